/**
 * A web device's loop over the Connect ports, as fedhh_device/fleet.py runs a device over gRPC:
 * check in with fresh round keys until a task comes, verify it (the coordinator's signatures
 * over the task and its round config, the floors), randomize the report, and run the round.
 * Keys are replaced once a task has used them.
 *
 * Not here yet (docs/web-devices.md): item selection and the codecs (the report's one-hot
 * index is the caller's), the lifetime budget, the lying-server (k, t) bound.
 */

import { type Client, Code, ConnectError } from "@connectrpc/connect";

import { type DevicePolicy, SecAggDevice } from "./device.js";
import type { SecureAggregation } from "./gen/fedhh/v1/aggregator_pb.js";
import type { Task } from "./gen/fedhh/v1/coordinator_pb.js";
import { ed25519PublicFromSeed } from "./primitives.js";
import { type RandomSource, type WordSource, systemRandom, systemWords } from "./random.js";
import { randomize } from "./randomizer.js";
import { type RoundOptions, type RoundOutcome, participate } from "./round.js";
import { generateRoundKeys } from "./secagg.js";
import type { CheckIn, CoordinatorClient, Identity } from "./wire.js";

const SHED = new Set([Code.Canceled, Code.ResourceExhausted]);
const CHECK_IN_RETRIED = new Set([...SHED, Code.Unavailable, Code.DeadlineExceeded]);

/** The floors of fedhh_device.secagg_run.Floors that the web device enforces now. */
export interface Floors {
  policy: DevicePolicy;
  maxEpsLocal: number;
}

export const DEFAULT_FLOORS: Floors = {
  policy: { minThreshold: 2, minNMin: 100, maxDimension: 1 << 24, requireDeviceAuth: true,
            requireConsistencyCheck: true },
  maxEpsLocal: 10,
};

export interface TaskResult extends RoundOutcome {
  runId: string;
  round: number;
  attempt: number;
}

export interface LoopOptions extends RoundOptions {
  floors?: Floors;
  random?: RandomSource;
  words?: WordSource;
  /** The aggregator's device client for the gRPC address a task names. */
  aggregatorFor: (address: string) => Client<typeof SecureAggregation>;
  /** The report's one-hot index in the task's domain (null: nothing to report). */
  select?: (task: Task, dimension: number) => number | null;
  signal?: AbortSignal;
}

/**
 * Check in until this device gets a task, then take part in its round: one task, one result.
 * A task refused by the device's floors ends as `device_aborted` before anything is sent.
 */
export async function nextRound(coordinator: CoordinatorClient, identity: Identity,
                                options: LoopOptions): Promise<TaskResult> {
  const random = options.random ?? systemRandom;
  const floors = options.floors ?? DEFAULT_FLOORS;
  const keys = generateRoundKeys(random);
  for (let failures = 0; ; failures++) {
    options.signal?.throwIfAborted();
    let checkIn: CheckIn;
    try {
      checkIn = await coordinator.checkIn(identity, { cPk: keys.c.public, sPk: keys.s.public },
                                          new Uint8Array(), undefined, options.signal);
    } catch (error) {
      // A shed or failed check-in is asked again after a full-jitter backoff (fleet.py's
      // GET_TASK_RETRY and GET_TASK_SHED_RETRY); a refused credential is final.
      if (!(error instanceof ConnectError) || !CHECK_IN_RETRIED.has(error.code)) throw error;
      const cap = SHED.has(error.code) ? 60_000 : 10_000;
      const backoff = (options.jitter ?? Math.random)()
        * Math.min(cap, 200 * 2 ** Math.min(failures, 30));
      await new Promise((resolve) => setTimeout(resolve, backoff));
      continue;
    }
    failures = -1;
    if (checkIn.kind === "wait") {
      await new Promise((resolve) => setTimeout(resolve, checkIn.retryAfterMs));
      continue;
    }
    const task = checkIn.task;
    const base = { runId: task.runId, round: task.round, attempt: task.attempt };
    if (!(task.epsLocal > 0 && task.epsLocal <= floors.maxEpsLocal)) {
      return { ...base, outcome: "device_aborted", reached: 0, contributed: false,
               detail: `eps_local ${task.epsLocal} is above this device's ${floors.maxEpsLocal}` };
    }
    const admission = { deviceId: task.secaggId,
                        identityKey: ed25519PublicFromSeed(identity.identitySeed),
                        cPk: keys.c.public, sPk: keys.s.public, proof: task.admission };
    let device: SecAggDevice;
    try {
      device = await SecAggDevice.create(task.roundConfig, task.roundConfigSignature,
                                         identity.coordinatorPublic, task.secaggId, {
        identitySeed: identity.identitySeed, admission, roundKeys: keys, policy: floors.policy,
        rand: random });
    } catch (error) {
      return { ...base, outcome: "device_aborted", reached: 0, contributed: false,
               detail: String(error) };
    }
    const dimension = device.config.dimension;
    const ones = randomize(task.epsLocal, options.select?.(task, dimension) ?? null, dimension,
                           options.words ?? systemWords);
    const result = await participate(options.aggregatorFor(task.aggregatorAddress), device, ones,
                                     identity.identitySeed, admission, options);
    return { ...base, ...result };
  }
}
