/**
 * Web devices for tests/web/test_web_wire.py and test_web_discovery.py, given the
 * coordinator's and the aggregator's Connect URLs and one enrolment token and one user's items
 * per device: each device runs `runDevice` (src/run.ts) for `tasks` tasks, or until `stop`
 * aborts when the fleet names no count: it enrols, then checks in until it gets a task, makes
 * its report from its items (src/report.ts, a budget in memory) and takes part in that round.
 * Run in Node (test/web_devices_node.ts) and in a Chromium page (test/web_devices_browser.ts).
 *
 * Test-only options: `seed` with `users` makes each device draw its report from
 * `device_stream(seed, round, user)` (test/numpy_stream.ts), the stream a Python device of
 * `fedhh device --seed` draws for that user, so a mixed run equals the all-Python one; `plans`
 * give a device, per run, a drop before a stage (as fedhh_device's DropPlan) or a stricter
 * n_min floor for every task of that run (a round attempted again is planned as its first
 * attempt was); `coordinators` and `aggregators` give each device its own URLs of the two
 * ports (a browser opens at most 6 HTTP/1.1 connections per host, and a device's long-polls
 * each hold one: many devices in one page reach the ports under several host names).
 */

import { MemoryBudgetStore } from "../src/budget.js";
import { DEFAULT_FLOORS } from "../src/floors.js";
import { MemoryIdentityStore } from "../src/identity.js";
import type { TaskResult } from "../src/loop.js";
import type { Stage } from "../src/round.js";
import type { TaskOptions } from "../src/loop.js";
import { runDevice } from "../src/run.js";
import { deviceStream } from "./numpy_stream.js";

/** What one device does differently in one task (test only). */
export interface TaskPlan { dropBefore?: Stage; minCohort?: number }

/** One token and one user's items per device (each held once unless `counts`). */
export interface Fleet {
  coordinator: string; aggregator: string; tokens: string[]; items: string[][];
  counts?: number[][]; tasks?: number; seed?: number; users?: number[];
  /** Per device, by run id: what every task of that run does differently. */
  plans?: Array<Record<string, TaskPlan>>;
  /** Run until `runFleet`'s `stop` aborts instead of for `tasks` tasks. */
  untilStopped?: boolean;
  coordinators?: string[]; aggregators?: string[];
  /** Keep each task's own-work milliseconds by step (src/round.ts `timings`). */
  timings?: boolean;
}

export type Timed = TaskResult & { timings?: Record<string, number> };
export type DeviceResult = Timed & { deviceId: string; tasks: Timed[]; spent: number };

/**
 * `onEnrolled(n)` once all are enrolled (each checks in from its enrolment on); `onResult(i,
 * result)` as device i ends each task.
 */
export async function runFleet(fleet: Fleet, onEnrolled: (n: number) => void,
                               stop?: AbortSignal,
                               onResult?: (device: number, result: Timed) => void
): Promise<DeviceResult[]> {
  if (fleet.untilStopped === true && stop === undefined) {
    throw new Error("a fleet that runs until stopped needs a stop signal");
  }
  let enrolled = 0;
  return Promise.all(fleet.tokens.map(async (token, i) => {
    const items = fleet.items[i] ?? [];
    const user = fleet.users?.[i];
    const seed = fleet.seed;
    const timings: Array<Record<string, number>> = [];
    const tasks: Timed[] = [];
    const summary = await runDevice({
      coordinatorUrl: fleet.coordinators?.[i] ?? fleet.coordinator,
      enrollmentToken: token, label: `web-${i}`, name: `test-fleet/${i}`,
      identityStore: new MemoryIdentityStore(), budgetStore: new MemoryBudgetStore(),
      items, counts: fleet.counts?.[i] ?? items.map(() => 1),
      ...(fleet.untilStopped === true && stop !== undefined ? { signal: stop }
        : { tasks: fleet.tasks ?? 1 }),
      // Each task names the aggregator by its Connect URL (the test's services name this
      // one); the device dials it under its own host name, if it has one (above).
      aggregatorUrl: (webUrl) => {
        if (webUrl !== fleet.aggregator) throw new Error(`the task names ${webUrl || "no URL"}`);
        return fleet.aggregators?.[i] ?? fleet.aggregator;
      },
      ...(seed === undefined || user === undefined ? {}
        : { draws: (task) => deviceStream(seed, task.round, user) }),
      taskOptions: (task, n) => {
        const plan = fleet.plans?.[i]?.[task.runId] ?? {};
        const options: TaskOptions = {};
        if (plan.minCohort !== undefined) {
          options.floors = { ...DEFAULT_FLOORS, minCohort: plan.minCohort };
        }
        if (plan.dropBefore !== undefined) options.dropBefore = plan.dropBefore;
        if (fleet.timings === true) options.timings = timings[n] = {};
        return options;
      },
      onEvent: (event) => {
        if (event.type === "enrolled" && ++enrolled === fleet.tokens.length) onEnrolled(enrolled);
        if (event.type === "result") {
          const kept = timings[tasks.length];
          const result = kept === undefined ? event.result : { ...event.result, timings: kept };
          tasks.push(result);
          onResult?.(i, result);
        }
      },
    });
    return { deviceId: summary.identity.deviceId.toString(), ...tasks[tasks.length - 1]!, tasks,
             spent: summary.spent };
  }));
}
