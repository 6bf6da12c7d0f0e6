/**
 * One device, run until stopped: what fedhh_device/fleet.py does for each of its devices, for
 * the one device of a page. `runDevice` enrols once (the identity is kept in the device's
 * IndexedDB database, src/identity.ts: a reloaded page or a restarted browser goes on as the
 * same device and never presents its spent token again), opens the device's lifetime budget
 * (src/budget.ts, the same database), then takes task after task (`nextRound`, src/loop.ts:
 * each task once, the config and the floors checked before any budget is spent, the report
 * from `reportForTask`) until `signal` aborts. It tells the page what it does through
 * `onEvent`.
 *
 * Where Web Locks exist, the device holds the lock named after its database while it runs,
 * so a second tab of the same origin waits instead of running the same device twice (or
 * enrolling it twice with one token).
 */

import { type Client, type Code } from "@connectrpc/connect";

import { type BudgetStore, DeviceBudget, IndexedDbBudgetStore } from "./budget.js";
import { type BookLoader } from "./codec.js";
import { type Floors, DEFAULT_FLOORS } from "./floors.js";
import type { SecureAggregation } from "./gen/fedhh/v1/aggregator_pb.js";
import type { Task } from "./gen/fedhh/v1/coordinator_pb.js";
import { type IdentityStore, IndexedDbIdentityStore } from "./identity.js";
import { type Coordinator, type TaskOptions, type TaskResult, newTaskMemory, nextRound
} from "./loop.js";
import { type DeviceData, reportForTask } from "./report.js";
import type { RoundOptions, Stage } from "./round.js";
import { type DrawSource, systemDraws } from "./selection.js";
import { deviceDatabase } from "./storage.js";
import { CoordinatorClient, type Identity, aggregatorClient, connectTransport } from "./wire.js";

/** What the device tells the page, in order. */
export type DeviceEvent =
  /** Enrolled now with the token (`fresh`), or found enrolled in its storage. */
  | { type: "enrolled"; identity: Identity; fresh: boolean; spent: number }
  /**
   * A check-in is sent: the device waits for a task. `failures`: how many check-ins in a row
   * before this one got no answer (0: the coordinator answered the last one).
   */
  | { type: "checking-in"; failures: number }
  /**
   * A check-in got no answer (`code` unavailable: the coordinator is down or out of reach;
   * deadline_exceeded) or was shed (resource_exhausted, canceled); the next `checking-in`
   * follows in `retryInMs`.
   */
  | { type: "check-in-failed"; code: Code; message: string; retryInMs: number }
  /** A verified task is taken (its config is checked next). */
  | { type: "task"; task: Task }
  | { type: "stage"; stage: Stage }
  /** The task ended; `spent` is the local epsilon spent in the budget's period. */
  | { type: "result"; result: TaskResult; spent: number }
  /** Another tab of this origin runs this device; this one waits for it to stop. */
  | { type: "waiting-for-another-tab" }
  /**
   * The other tab let the device go (it was closed, or its device stopped): this tab runs it
   * from now on, as from the start (`enrolled` follows, after an enrolment if none was kept).
   */
  | { type: "another-tab-let-go" };

export interface RunDeviceOptions extends Omit<RoundOptions, "dropBefore" | "timings" | "onStage"> {
  /** The coordinator's Connect URL (`https://host:7080`). */
  coordinatorUrl: string;
  /** The one-time enrolment token: used only when the device has no stored identity. */
  enrollmentToken?: string;
  /** The label the device enrols with. */
  label?: string;
  /** The device's items (and their counts: each held once when not given). */
  items: readonly string[];
  counts?: readonly number[];
  /** The device's floors (DEFAULT_FLOORS, the Python device's). */
  floors?: Floors;
  /**
   * The device's name in its origin: its database is `fedhh-device/<name>`, or
   * "fedhh-device" for the unnamed one (a page with one device).
   */
  name?: string;
  /** Where the identity and the budget are kept (IndexedDB, the device's database). */
  identityStore?: IdentityStore;
  budgetStore?: BudgetStore;
  /** Loads a trained codebook a task names (`fetchBooks(url)`). */
  books?: BookLoader;
  /**
   * The Connect URL to reach a task's aggregator at, given the one the task names (signed
   * with it) and its gRPC address: the named URL unless the page maps it.
   */
  aggregatorUrl?: (webUrl: string, address: string) => string;
  /** The `fetch` of the Connect calls (the global one). */
  fetch?: typeof globalThis.fetch;
  /** A coordinator client of the page's own instead of one to `coordinatorUrl` (tests). */
  coordinator?: Coordinator;
  /** Stop after this many tasks (tests); none: until `signal` aborts. */
  tasks?: number;
  /**
   * Where a task's selection and randomizer draw from (systemDraws, the browser's
   * crypto.getRandomValues; a seeded stream only in tests).
   */
  draws?: (task: Task) => DrawSource;
  /**
   * What a verified task does differently (tests), given the task and how many tasks the
   * device took before it (0, 1, ...).
   */
  taskOptions?: (task: Task, n: number) => TaskOptions;
  onEvent?: (event: DeviceEvent) => void;
}

/** What a device did until it stopped. */
export interface DeviceSummary {
  identity: Identity;
  tasks: number;
  contributed: number;
  /** Local epsilon spent in the budget's period. */
  spent: number;
}

/**
 * Runs the device until `signal` aborts (then resolves) or `tasks` tasks are done. Throws if
 * it cannot enrol (no stored identity and no or a spent token), if the coordinator refuses
 * its credential, or with the abort's reason if `signal` aborts while another tab holds the
 * device (module docstring).
 */
export async function runDevice(options: RunDeviceOptions): Promise<DeviceSummary> {
  const database = deviceDatabase(options.name);
  const locks = (globalThis.navigator as Navigator | undefined)?.locks;
  if (locks === undefined) return run(options, database);
  const held = await locks.request(database, { ifAvailable: true }, async (lock) =>
    lock === null ? null : run(options, database));
  if (held !== null) return held;
  options.onEvent?.({ type: "waiting-for-another-tab" });
  return locks.request(database, options.signal === undefined ? {} : { signal: options.signal },
                       async () => {
    options.onEvent?.({ type: "another-tab-let-go" });
    return run(options, database);
  });
}

async function run(options: RunDeviceOptions, database: string): Promise<DeviceSummary> {
  const tell = options.onEvent ?? (() => undefined);
  const floors = options.floors ?? DEFAULT_FLOORS;
  const coordinator = options.coordinator
    ?? new CoordinatorClient(connectTransport(options.coordinatorUrl, options.fetch));
  const identities = options.identityStore ?? new IndexedDbIdentityStore(database);
  let identity = await identities.load();
  const fresh = identity === null;
  if (identity === null) {
    if (options.enrollmentToken === undefined || options.enrollmentToken === "") {
      throw new Error(`the device ${database} is not enrolled and has no enrolment token`);
    }
    identity = await coordinator.enroll(options.enrollmentToken, options.label);
    // Kept before anything else: the token is spent now.
    await identities.save(identity);
  }
  const budget = await DeviceBudget.open(options.budgetStore ?? new IndexedDbBudgetStore(database),
                                         floors.lifetimeEpsLocal, floors.budgetPeriodS);
  tell({ type: "enrolled", identity, fresh, spent: budget.spent() });
  const data: DeviceData = { items: options.items,
                             counts: options.counts ?? options.items.map(() => 1) };
  const clients = new Map<string, Client<typeof SecureAggregation>>();
  const aggregatorFor = (webUrl: string, address: string) => {
    const url = options.aggregatorUrl?.(webUrl, address) ?? webUrl;
    if (url === "") throw new Error(`the task names no Connect URL for aggregator ${address}`);
    let client = clients.get(url);
    if (client === undefined) {
      client = aggregatorClient(connectTransport(url, options.fetch));
      clients.set(url, client);
    }
    return client;
  };
  const memory = newTaskMemory();
  const summary: DeviceSummary = { identity, tasks: 0, contributed: 0, spent: budget.spent() };
  const { taskOptions, tasks, draws, onEvent: _onEvent, ...rest } = options;
  for (let n = 0; tasks === undefined || n < tasks; n++) {
    let result: TaskResult;
    try {
      result = await nextRound(coordinator, identity, {
        ...rest, memory, floors, aggregatorFor,
        ...(taskOptions === undefined ? {} : { forTask: (task: Task) => taskOptions(task, n) }),
        onCheckIn: (failures) => tell({ type: "checking-in", failures }),
        onCheckInFailed: (code, error, retryInMs) =>
          tell({ type: "check-in-failed", code, message: error.rawMessage, retryInMs }),
        onTask: (task) => tell({ type: "task", task }),
        onStage: (stage) => tell({ type: "stage", stage }),
        report: (task, taskFloors) => reportForTask(task, data, budget, taskFloors,
                                                    options.books, draws?.(task) ?? systemDraws),
      });
    } catch (error) {
      if (options.signal?.aborted) break;
      throw error;
    }
    summary.tasks += 1;
    if (result.contributed) summary.contributed += 1;
    summary.spent = budget.spent();
    tell({ type: "result", result, spent: summary.spent });
  }
  summary.spent = budget.spent();
  return summary;
}
