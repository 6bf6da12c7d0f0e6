/**
 * What a deployed device refuses whoever signed the task: fedhh_device.secagg_run.Floors.
 *
 * - a local epsilon above `maxEpsLocal` (a larger one would weaken its local guarantee);
 * - reports beyond `lifetimeEpsLocal` summed over `budgetPeriodS` (src/budget.ts);
 * - rounds whose release threshold n_min is below `minCohort`, rounds without device
 *   authentication or without the consistency check, and rounds whose (n, k, t) fail the
 *   lying-server bound at `maxCorruptFraction` and 2^-`securityBits` (src/bounds.ts), all
 *   through the DevicePolicy that `policyOf` gives to SecAggDevice.create.
 */

import { pythonFloatRepr } from "./budget.js";
import { ConfigError } from "./config.js";
import type { DevicePolicy } from "./device.js";
import { MAX_DIMENSION } from "./prg.js";

export interface Floors {
  maxEpsLocal: number;
  minCohort: number;
  maxCorruptFraction: number;
  securityBits: number;
  lifetimeEpsLocal: number;
  budgetPeriodS: number;
}

/** Python's defaults (Floors() in fedhh_device/secagg_run.py). */
export const DEFAULT_FLOORS: Readonly<Floors> = {
  maxEpsLocal: 10.0, minCohort: 100, maxCorruptFraction: 0.05, securityBits: 40.0,
  lifetimeEpsLocal: 100.0, budgetPeriodS: 30 * 24 * 3600.0,
};

/** The policy the floors give the round's state machine (Floors.policy()). */
export function policyOf(floors: Floors): DevicePolicy {
  return {
    minThreshold: 2, minNMin: floors.minCohort, maxDimension: MAX_DIMENSION,
    requireDeviceAuth: true, requireConsistencyCheck: true,
    maxCorruptFraction: floors.maxCorruptFraction, securityBits: floors.securityBits,
    assumedDropout: 0.3,
  };
}

/**
 * The local epsilon cap, checked before any report is computed (fleet.py `_perform`), its
 * refusal worded as the Python device's: both numbers as Python writes a float (before, as
 * JavaScript does: "eps_local 12, above this device's limit 10" where Python says "12.0" and
 * "10.0", "0.00001" for 1e-05, "Infinity" for inf).
 */
export function checkEpsLocal(epsLocal: number, floors: Floors): void {
  // Zero, a negative or NaN is no local guarantee, not "above the limit" (Floors.check_eps_local)
  if (!(epsLocal > 0)) {
    throw new ConfigError(`task asks for eps_local ${pythonFloatRepr(epsLocal)}, not a ` +
                          "positive number");
  }
  if (!(epsLocal <= floors.maxEpsLocal)) {
    throw new ConfigError(`task asks for eps_local ${pythonFloatRepr(epsLocal)}, above this ` +
                          `device's limit ${pythonFloatRepr(floors.maxEpsLocal)}`);
  }
}
