/**
 * What the demo page says of the query a task carries: how many prefixes the round asks about,
 * how many bits of segment each extends, the size of the report the device sends for it and
 * the epsilon it is randomized at. Split from demo.ts, which runs the page when loaded, so that
 * node's tests can load it.
 */

import { parseRoundConfig } from "../src/config.js";
import type { Task } from "../src/gen/fedhh/v1/coordinator_pb.js";
import { queryOfTask } from "../src/selection.js";

/**
 * The query of `task` in words. The report is the masked vector the device uploads: one
 * entry of the config's modulus width per element of the round's domain. The task is told
 * before its query and config are checked, so one the device will refuse is said to be
 * unreadable, with the reason, not thrown.
 */
export function queryText(task: Task): string {
  let prefixes: number;
  let reportBytes: number;
  try {
    prefixes = queryOfTask(task).prefixes.length;
    const config = parseRoundConfig(task.roundConfig);
    reportBytes = config.dimension * (config.modulusBits / 8);
  } catch (error) {
    return `a query this device cannot read (${error instanceof Error ? error.message
                                                : String(error)})`;
  }
  const segment = task.segmentBits === 1 ? "1 bit" : `${task.segmentBits} bits`;
  return `${prefixes} prefix${prefixes === 1 ? "" : "es"} of ${task.prefixBits} bits, ` +
         `segment ${segment}; report ${reportBytes.toLocaleString("en")} bytes ` +
         `at local ε ${epsilonText(task.epsLocal)}`;
}

/** ε as the coordinator set it, to 4 significant digits (not 0.000 for a small one). */
function epsilonText(eps: number): string {
  return Number.isFinite(eps) ? String(Number(eps.toPrecision(4))) : String(eps);
}
