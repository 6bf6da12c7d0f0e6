/**
 * Web devices for tests/web/test_web_wire.py and test_web_discovery.py, given the
 * coordinator's and the aggregator's Connect URLs and one enrolment token and one user's items
 * per device: each device enrols, then takes `tasks` tasks one after another (src/loop.ts):
 * checks in until it gets a task, makes its report from its items (src/report.ts, a budget in
 * memory) and takes part in that round. Run in Node (test/web_devices_node.ts) and in a
 * Chromium page (test/web_devices_browser.ts).
 *
 * Test-only options: `seed` with `users` makes each device draw its report from
 * `device_stream(seed, round, user)` (test/numpy_stream.ts), the stream a Python device of
 * `fedhh device --seed` draws for that user, so a mixed run equals the all-Python one; `plans`
 * give a device, per task, a drop before a stage (as fedhh_device's DropPlan) or a stricter
 * n_min floor; `coordinators` and `aggregators` give each device its own URLs of the two
 * ports (a browser opens at most 6 HTTP/1.1 connections per host, and a device's long-polls
 * each hold one: many devices in one page reach the ports under several host names).
 */

import { DeviceBudget, MemoryBudgetStore } from "../src/budget.js";
import { DEFAULT_FLOORS } from "../src/floors.js";
import { newTaskMemory, nextRound, type TaskResult } from "../src/loop.js";
import { reportForTask } from "../src/report.js";
import type { Stage } from "../src/round.js";
import { systemDraws } from "../src/selection.js";
import { CoordinatorClient, aggregatorClient, connectTransport } from "../src/wire.js";
import { deviceStream } from "./numpy_stream.js";

/** What one device does differently in one task (test only). */
export interface TaskPlan { dropBefore?: Stage; minCohort?: number }

/** One token and one user's items per device (each held once unless `counts`). */
export interface Fleet {
  coordinator: string; aggregator: string; tokens: string[]; items: string[][];
  counts?: number[][]; tasks?: number; seed?: number; users?: number[];
  plans?: Array<Array<TaskPlan | null>>;
  coordinators?: string[]; aggregators?: string[];
  /** Keep each task's own-work milliseconds by step (src/round.ts `timings`). */
  timings?: boolean;
}

export type Timed = TaskResult & { timings?: Record<string, number> };
export type DeviceResult = Timed & { deviceId: string; tasks: Timed[]; spent: number };

/** `onEnrolled(n)` once all are enrolled (they check in from then on). */
export async function runFleet(fleet: Fleet, onEnrolled: (n: number) => void
): Promise<DeviceResult[]> {
  const coordinators = fleet.tokens.map((_, i) => new CoordinatorClient(
    connectTransport(fleet.coordinators?.[i] ?? fleet.coordinator)));
  const identities = await Promise.all(
    fleet.tokens.map((token, i) => coordinators[i]!.enroll(token, `web-${i}`)));
  onEnrolled(identities.length);
  return Promise.all(identities.map(async (identity, i) => {
    const coordinator = coordinators[i]!;
    const aggregator = aggregatorClient(connectTransport(fleet.aggregators?.[i] ?? fleet.aggregator));
    // Each task names the aggregator by its Connect URL (the test's services name this one);
    // the device dials it under its own host name, if it has one (above).
    const aggregatorFor = (webUrl: string) => {
      if (webUrl !== fleet.aggregator) throw new Error(`the task names ${webUrl || "no URL"}`);
      return aggregator;
    };
    const budget = await DeviceBudget.open(new MemoryBudgetStore(), DEFAULT_FLOORS.lifetimeEpsLocal,
                                           DEFAULT_FLOORS.budgetPeriodS);
    const items = fleet.items[i] ?? [];
    const data = { items, counts: fleet.counts?.[i] ?? items.map(() => 1) };
    const user = fleet.users?.[i];
    const tasks: Timed[] = [];
    const memory = newTaskMemory();
    for (let t = 0; t < (fleet.tasks ?? 1); t++) {
      const plan = fleet.plans?.[i]?.[t] ?? {};
      const floors = plan.minCohort === undefined ? DEFAULT_FLOORS
        : { ...DEFAULT_FLOORS, minCohort: plan.minCohort };
      const timings: Record<string, number> = {};
      const result = await nextRound(coordinator, identity, {
        aggregatorFor,
        memory,
        ...(fleet.timings === true ? { timings } : {}),
        floors,
        ...(plan.dropBefore === undefined ? {} : { dropBefore: plan.dropBefore }),
        report: (task) => reportForTask(
          task, data, budget, floors, undefined,
          fleet.seed === undefined || user === undefined ? systemDraws
            : deviceStream(fleet.seed, task.round, user)),
      });
      tasks.push(fleet.timings === true ? { ...result, timings } : result);
    }
    return { deviceId: identity.deviceId.toString(), ...tasks[tasks.length - 1]!, tasks,
             spent: budget.spent() };
  }));
}
