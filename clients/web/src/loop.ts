/**
 * A web device's loop over the Connect ports, as fedhh_device/fleet.py runs a device over gRPC:
 * check in with fresh round keys until a task comes, verify it (the coordinator's signatures
 * over the task and its round config; a task that is not genuine is remembered as known, and
 * the device checks in again for the round's next), take the report (`report`, normally
 * `reportForTask` of src/report.ts: the local epsilon cap, the lifetime budget, codec,
 * selection and randomizer, in the Python device's order), and run the round with the floors'
 * policy (src/floors.ts: n_min, t, device auth, the consistency check, the lying-server
 * bound). The config, the floors and the device's clock (`checkClock`) are checked before the
 * report is taken, so a refused round spends no budget. Keys are replaced once a task has
 * used them.
 */

import { type Client, Code, ConnectError } from "@connectrpc/connect";

import { sessionIdOf, verifyConfig } from "./config.js";
import { SecAggDevice } from "./device.js";
import { type Floors, DEFAULT_FLOORS, checkEpsLocal, policyOf } from "./floors.js";
import type { SecureAggregation } from "./gen/fedhh/v1/aggregator_pb.js";
import type { Task } from "./gen/fedhh/v1/coordinator_pb.js";
import type { Admission } from "./merkle.js";
import { ed25519PublicFromSeed } from "./primitives.js";
import { type RandomSource, systemJitter, systemRandom } from "./random.js";
import { type RoundOptions, type RoundOutcome, Stage, codeOf, decline, participate, pause,
  timed } from "./round.js";
import { generateRoundKeys } from "./secagg.js";
import type { AuthenticationError } from "./task.js";
import type { CheckIn, CoordinatorClient, Identity } from "./wire.js";

/** The coordinator calls a device makes (`CoordinatorClient`, or a test's own). */
export type Coordinator = Pick<CoordinatorClient, "enroll" | "checkIn">;

const SHED = new Set([Code.Canceled, Code.ResourceExhausted]);
// The backoff after a refused task (ms, full jitter): the first, and the cap.
const REFUSED_BACKOFF_MS = 200;
const REFUSED_BACKOFF_CAP_MS = 10_000;
// A check-in answered without a task (its retryAfterMs), or with a task this device has taken,
// is sent again after the wait the coordinator asks for, at least NO_TASK_FLOOR_MS and at most
// NO_TASK_MAX_WAIT_MS, plus up to half of it again (jitter). Such answers that come sooner
// than NO_TASK_HELD_MS (the coordinator did not hold the long-poll) double the floor, up to
// NO_TASK_MAX_BACKOFF_MS; an answer held longer starts afresh. As fleet.py's no_task_pause:
// the device waited retryAfterMs as given, so "retry after 0 ms" was a hot loop of check-ins.
export const NO_TASK_FLOOR_MS = 1_000;
export const NO_TASK_MAX_BACKOFF_MS = 60_000;
export const NO_TASK_MAX_WAIT_MS = 600_000;
export const NO_TASK_HELD_MS = 5_000;

/**
 * How long to wait before checking in again after an answer with nothing to do (the comment
 * above): `retryAfterMs` the coordinator's wait, `quickAnswers` how many such answers in a row
 * came at once before this one, `jitter` in [0, 1).
 */
export function noTaskPause(retryAfterMs: number, quickAnswers: number, jitter: number): number {
  const asked = Math.min(retryAfterMs > 0 ? retryAfterMs : 0, NO_TASK_MAX_WAIT_MS);
  const backoff = Math.min(NO_TASK_MAX_BACKOFF_MS,
                           NO_TASK_FLOOR_MS * 2 ** Math.min(Math.max(quickAnswers, 0), 30));
  return Math.max(asked, backoff) * (1 + 0.5 * jitter);
}

export interface TaskResult extends RoundOutcome {
  runId: string;
  round: number;
  attempt: number;
}

/**
 * What one device remembers between its tasks (fleet.py's `done` and `known`): the tasks it
 * has taken (run, round, attempt) and the digest of the last task it got. Give every
 * `nextRound` of a device the same one: the coordinator hands a device its current task again
 * until a newer one exists (the digest makes it hold the check-in instead), and a task taken
 * once is not taken again (its admission is for round keys already used).
 */
export interface TaskMemory { done: Set<string>; known: Uint8Array }

/** How many taken tasks a device remembers (fleet.py's REMEMBERED_TASKS): it is handed only
 * the current attempts of the runs under way. */
export const REMEMBERED_TASKS = 64;

export function newTaskMemory(): TaskMemory {
  return { done: new Set(), known: new Uint8Array() };
}

/**
 * Records a task as taken, forgetting the oldest past REMEMBERED_TASKS (as fleet.py's
 * TakenTasks). Before, `done` kept every task for as long as the page ran; a task forgotten
 * and handed again meets the budget, which answers a round only with its kept report or a
 * refusal.
 */
export function rememberTask(memory: TaskMemory, key: string): void {
  memory.done.add(key);
  for (const oldest of memory.done) {
    if (memory.done.size <= REMEMBERED_TASKS) break;
    memory.done.delete(oldest);
  }
}

/**
 * What one task changes of a device's behaviour (test fleets: a dropout, stricter floors, its
 * own timings), decided once the task is verified.
 */
export interface TaskOptions {
  floors?: Floors;
  dropBefore?: Stage;
  timings?: Record<string, number>;
}

/**
 * What the device knows of the browser's network: whether it says it is online
 * (`navigator.onLine`), and where its "online" and "offline" events fire (the page).
 */
export interface Network {
  online: () => boolean;
  events: EventTarget;
}

/**
 * How long a device whose browser says it is offline waits for it to be online again before
 * it checks in all the same: `navigator.onLine` speaks of the network, and a coordinator on
 * loopback (the demo of `fedhh up`) answers without one.
 */
export const OFFLINE_RECHECK_MS = 60_000;

const WOKEN = Symbol("woken");

/**
 * `pause(ms, signal)`, cut short when `network`'s browser comes back online: a device that
 * lost its network waited out its backoff (up to 10 s, a minute while offline) once the network
 * was back.
 */
export function pauseUntilOnline(ms: number, signal?: AbortSignal, network?: Network
): Promise<void> {
  if (network === undefined) return pause(ms, signal);
  const woken = new AbortController();
  const wake = () => woken.abort(WOKEN);
  const stop = () => woken.abort(signal?.reason);
  network.events.addEventListener("online", wake);
  signal?.addEventListener("abort", stop);
  if (signal?.aborted) stop();
  return pause(ms, woken.signal).catch((error: unknown) => {
    if (error !== WOKEN) throw error;
  }).finally(() => {
    network.events.removeEventListener("online", wake);
    signal?.removeEventListener("abort", stop);
  });
}

export interface LoopOptions extends RoundOptions {
  /** This device's memory of its tasks (a fresh one when not given: one task only). */
  memory?: TaskMemory;
  floors?: Floors;
  random?: RandomSource;
  /**
   * The aggregator's device client for a task: by the Connect URL the task names
   * (`aggregatorWebUrl`, signed with the task; empty if the operator gave none), or by its
   * gRPC address through a map of the page's own.
   */
  aggregatorFor: (webUrl: string, address: string) => Client<typeof SecureAggregation>;
  /**
   * What this task does differently (tests), asked once the task is verified: by the task
   * itself, so a round attempted again is treated as its first attempt was.
   */
  forTask?: (task: Task) => TaskOptions;
  /** The report's 1-bit positions for a verified task under `floors` (throws to refuse it). */
  report: (task: Task, floors: Floors) => Promise<number[]>;
  /**
   * Told when a check-in is sent (the device waits for a task from then on), with how many
   * check-ins in a row before it got no answer.
   */
  onCheckIn?: (failures: number) => void;
  /**
   * Told when a check-in got no answer (`unavailable`: the coordinator is down or out of
   * reach; `deadline_exceeded`), was shed (`resource_exhausted`, `canceled`), or failed
   * otherwise (an answer that did not parse or was too large, a proxy's error page, the
   * coordinator's internal error: any code but `unauthenticated`, which is final), with its
   * code (a failed fetch counted as unavailable): the device sends it again after `retryInMs`,
   * or at once when the browser comes back online (`network`). `offline`: the browser says it
   * is offline (`network`), so the device waits for it to be online again rather than ask
   * every few seconds (at most OFFLINE_RECHECK_MS).
   */
  onCheckInFailed?: (code: Code, error: ConnectError, retryInMs: number, offline: boolean) => void;
  /** The browser's network (none: the device knows nothing of it, and only backs off). */
  network?: Network | undefined;
  /** Told when a verified task is taken, before its config is checked. */
  onTask?: (task: Task) => void;
  /**
   * Told when the device takes a seat in a round (a task whose config the coordinator signed:
   * `seat`), and when it no longer holds one it could give up (undefined): it advertised its
   * keys (a Decline is refused after that: its neighbours count on it), or its task ended.
   * A page that goes meanwhile (closed, reloaded) gives the seat up at once (src/run.ts).
   */
  onSeat?: (seat: HeldSeat | undefined) => void;
  /**
   * Told when a task is refused as not genuine (`error`: not signed by the coordinator key
   * pinned at enrolment, another device's, malformed): nothing is spent or sent for it, and
   * the device checks in again after `retryInMs`, naming it as known, so the coordinator
   * holds the check-in until the round has another task. `refusals`: how many in a row.
   */
  onTaskRefused?: (error: AuthenticationError, refusals: number, retryInMs: number) => void;
}

/**
 * Throws if, by this device's clock (`nowMs`), the round's first stage (its deadline:
 * `deadlines[0]`, Unix ms) closed more than `overrunMs` (the device's patience, 30 s) ago. The
 * device would give up at its first wait for a request, having advertised its keys (a dropout
 * the round must recover from) and spent its budget on a report. The task comes as the cohort
 * is drawn, before that stage closes, so this is a device whose clock is ahead of the
 * coordinator's, or a task that came too late (a laptop that slept holding it). As the Python
 * device (`_check_clock` in fedhh_device/secagg_run.py), checked after the config's own
 * checks and before the report.
 */
export function checkClock(deadlines: readonly bigint[], nowMs: number, overrunMs = 30_000): void {
  const closedAgoMs = nowMs - Number(deadlines[0] ?? 0n);
  if (closedAgoMs > overrunMs) {
    throw new Error(`the round's first stage closed ${Math.round(closedAgoMs / 1000)} s ago by ` +
                    "this device's clock: the clock is at least that far ahead of the " +
                    "coordinator's (check its time synchronisation), or the task came too late " +
                    "to take part");
  }
}

/** A seat this device holds in the round of `task`, as its Decline names it. */
export interface HeldSeat {
  task: Task;
  sessionId: Uint8Array;
  admission: Admission;
}

/**
 * The seat `task` gives this device; undefined where its config does not verify (or parse):
 * such a config names no round this device has a seat in, and nothing is declined for it.
 */
async function seatOf(task: Task, identity: Identity, admission: Admission
                     ): Promise<HeldSeat | undefined> {
  try {
    verifyConfig(task.roundConfig, task.roundConfigSignature, identity.coordinatorPublic);
    return { task, sessionId: await sessionIdOf(task.roundConfig), admission };
  } catch {
    return undefined;
  }
}

/**
 * Give up the seat of a genuine task this device refuses (`decline` of src/round.ts, as the
 * Python device's `decline_round`), so that its round's first stage does not wait for it to
 * the deadline. Only for a config the coordinator signed (`seat`) and an aggregator the page
 * may call.
 */
async function declineTask(seat: HeldSeat | undefined, identity: Identity,
                           options: LoopOptions): Promise<boolean> {
  if (seat === undefined) return false;
  let aggregator: Client<typeof SecureAggregation>;
  try {
    aggregator = options.aggregatorFor(seat.task.aggregatorWebUrl, seat.task.aggregatorAddress);
  } catch {
    return false;
  }
  return decline(aggregator, seat.sessionId, identity.identitySeed, seat.admission, options);
}

/**
 * Check in until this device gets a task, then take part in its round: one task, one result.
 * A task that is not genuine (`onTaskRefused`) is not a result: the device remembers it as
 * known and checks in again, after a backoff, for the round's next task (as fleet.py does).
 * A genuine task refused by the device (its floors, its clock, its budget, its config checks)
 * ends as `device_aborted` before its report is made (no budget is spent); the one call the
 * aggregator then gets is its Decline (`declineTask`: the round need not wait for it). `signal` stops it: the abort's reason is thrown (during a round
 * too: the device then leaves it, as one that drops out).
 */
export async function nextRound(coordinator: Coordinator, identity: Identity,
                                options: LoopOptions): Promise<TaskResult> {
  const random = options.random ?? systemRandom;
  const floors = options.floors ?? DEFAULT_FLOORS;
  const memory = options.memory ?? newTaskMemory();
  const keys = generateRoundKeys(random);
  let refusals = 0;
  let quick = 0;  // answers in a row with nothing to do, each at once (noTaskPause)
  // How long the coordinator held a check-in is read on the monotonic clock: on the wall clock
  // (`options.now`, for the round's deadlines) one set back would read a held long-poll as
  // answered at once and double the next wait.
  const elapsed = () => performance.now();
  const idle = async (retryAfterMs: number, sentAt: number) => {
    quick = elapsed() - sentAt < NO_TASK_HELD_MS ? quick + 1 : 0;
    await pause(noTaskPause(retryAfterMs, quick - 1, (options.jitter ?? systemJitter)()),
                options.signal);
  };
  for (let failures = 0; ; failures++) {
    options.signal?.throwIfAborted();
    let checkIn: CheckIn;
    options.onCheckIn?.(failures);
    const sentAt = elapsed();
    try {
      checkIn = await coordinator.checkIn(identity, { cPk: keys.c.public, sPk: keys.s.public },
                                          memory.known, undefined, options.signal);
    } catch (error) {
      // A failed check-in is asked again after a full-jitter backoff (fleet.py's
      // GET_TASK_RETRY, and GET_TASK_SHED_RETRY for a shed one), whatever its code, as the
      // Python device asks again: a refused credential alone is final. A call that got no
      // answer (fetch failed) counts as unavailable, as on gRPC. Before, only unavailable,
      // deadline_exceeded and the shed codes were asked again, and any other stopped the
      // device for good: an answer that did not parse (internal), a reverse proxy's 500 while
      // the coordinator restarted (unknown), a coordinator's internal error.
      options.signal?.throwIfAborted();
      if (!(error instanceof ConnectError) || error.code === Code.Unauthenticated) throw error;
      const cap = SHED.has(error.code) ? 60_000 : 10_000;
      const offline = options.network?.online() === false;
      const backoff = offline ? OFFLINE_RECHECK_MS : (options.jitter ?? systemJitter)()
        * Math.min(cap, 200 * 2 ** Math.min(failures, 30));
      options.onCheckInFailed?.(codeOf(error), error, backoff, offline);
      await pauseUntilOnline(backoff, options.signal, options.network);
      continue;
    }
    failures = -1;
    if (checkIn.kind === "wait") {
      await idle(checkIn.retryAfterMs, sentAt);
      continue;
    }
    // A refused task is known all the same: the next check-in waits until the round has
    // another task (before, the device stopped with the refusal; asked again at once, the
    // coordinator hands the same task back). The backoff bounds the check-ins of a coordinator
    // that hands it back all the same.
    memory.known = checkIn.digest;
    if (checkIn.kind === "refused") {
      const backoff = (options.jitter ?? systemJitter)()
        * Math.min(REFUSED_BACKOFF_CAP_MS, REFUSED_BACKOFF_MS * 2 ** Math.min(refusals, 30));
      refusals += 1;
      options.onTaskRefused?.(checkIn.error, refusals, backoff);
      await pause(backoff, options.signal);
      continue;
    }
    const task = checkIn.task;
    const key = `${task.runId}/${task.round}/${task.attempt}`;
    if (memory.done.has(key)) {
      await idle(0, sentAt);
      continue;
    }
    quick = 0;
    rememberTask(memory, key);
    options.onTask?.(task);
    const plan = options.forTask?.(task) ?? {};
    const taskFloors = plan.floors ?? floors;
    const roundOptions: RoundOptions = {
      ...options,
      ...(plan.dropBefore === undefined ? {} : { dropBefore: plan.dropBefore }),
      ...(plan.timings === undefined ? {} : { timings: plan.timings }) };
    const base = { runId: task.runId, round: task.round, attempt: task.attempt };
    const refused = (error: unknown): TaskResult =>
      ({ ...base, outcome: "device_aborted", reached: 0, contributed: false,
         detail: error instanceof Error ? error.message : String(error) });
    const admission = { deviceId: task.secaggId,
                        identityKey: ed25519PublicFromSeed(identity.identitySeed),
                        cPk: keys.c.public, sPk: keys.s.public, proof: task.admission };
    const seat = await seatOf(task, identity, admission);
    if (seat !== undefined) options.onSeat?.(seat);
    try {
      let device: SecAggDevice;
      let ones: number[];
      let aggregator: Client<typeof SecureAggregation>;
      try {
        checkEpsLocal(task.epsLocal, taskFloors);
        aggregator = options.aggregatorFor(task.aggregatorWebUrl, task.aggregatorAddress);
        device = await timed(roundOptions.timings, "config", () => SecAggDevice.create(
          task.roundConfig, task.roundConfigSignature, identity.coordinatorPublic, task.secaggId, {
            identitySeed: identity.identitySeed, admission, roundKeys: keys,
            policy: policyOf(taskFloors), rand: random }));
        checkClock(device.config.deadlines, (options.now ?? Date.now)(), options.overrunMs);
        ones = await timed(roundOptions.timings, "report", () => options.report(task, taskFloors));
      } catch (error) {
        await declineTask(seat, identity, options);
        return refused(error);
      }
      // The seat is the device's to give up until its keys are advertised: the next stage is
      // entered only once the aggregator accepted them.
      const result = await participate(aggregator, device, ones, identity.identitySeed, admission, {
        ...roundOptions,
        onStage: (stage) => {
          if (stage !== Stage.ADVERTISE_KEYS && seat !== undefined) options.onSeat?.(undefined);
          roundOptions.onStage?.(stage);
        } });
      return { ...base, ...result };
    } finally {
      if (seat !== undefined) options.onSeat?.(undefined);
    }
  }
}
