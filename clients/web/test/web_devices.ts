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
 *
 * `audit` (test only) records every 32-byte draw of crypto.getRandomValues (the identity
 * seeds, the round keys' secrets, the self-mask seeds b_u) and every call the devices send
 * (body and header values); `audit()` then names each call that carries 16 bytes of such a
 * secret, raw or in hex: none may (the keys stay on the device, docs/web-devices.md).
 */

import { MemoryBudgetStore } from "../src/budget.js";
import { toHex } from "../src/bytes.js";
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
  /** Record the secrets drawn and the calls sent, for `audit()`. */
  audit?: boolean;
}

/** What `audit()` found: secrets drawn, calls and bytes sent, and each call that leaked. */
export interface Audit { secrets: number; calls: number; bytesSent: number; leaks: string[] }

const drawn: Uint8Array[] = [];
const sent: Array<{ url: string; body: Uint8Array; headers: string[] }> = [];
let watching = false;

/** Keeps a copy of every 32-byte array crypto.getRandomValues fills from now on. */
export function watchDraws(): void {
  if (watching) return;
  watching = true;
  const source = globalThis.crypto;
  const original = source.getRandomValues.bind(source);
  Object.defineProperty(source, "getRandomValues", {
    configurable: true,
    value: <T extends ArrayBufferView | null>(array: T): T => {
      const filled = original(array as unknown as Uint8Array) as unknown as T;
      if (array !== null && array.byteLength === 32) {
        drawn.push(new Uint8Array(array.buffer, array.byteOffset, 32).slice());
      }
      return filled;
    },
  });
}

/** `fetch`, keeping each call's URL, body and header values for `audit()`. */
export const auditedFetch: typeof globalThis.fetch = async (input, init) => {
  const body: unknown = init?.body;
  const bytes: Uint8Array = body instanceof Uint8Array ? body.slice()
    : body instanceof ArrayBuffer ? new Uint8Array(body.slice(0))
    : typeof body === "string" ? new TextEncoder().encode(body) : new Uint8Array();
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  const headers: string[] = [];
  new Headers(init?.headers).forEach((value) => headers.push(value));
  sent.push({ url, body: bytes, headers });
  return globalThis.fetch(input, init);
};

/** Each recorded call that carries the first 16 bytes of a recorded secret, raw or in hex. */
export function audit(): Audit {
  const needles = new Set(drawn.map((secret) => toHex(secret.subarray(0, 16))));
  const leaks: string[] = [];
  let bytesSent = 0;
  for (const call of sent) {
    bytesSent += call.body.length;
    const raw = toHex(call.body);
    const text = new TextDecoder("latin1").decode(call.body).toLowerCase();
    for (const needle of needles) {
      let at = raw.indexOf(needle);
      while (at >= 0 && at % 2 !== 0) at = raw.indexOf(needle, at + 1);  // byte-aligned only
      if (at >= 0) leaks.push(`${call.url}: its body holds a secret's bytes at ${at / 2}`);
      if (text.includes(needle)) leaks.push(`${call.url}: its body holds a secret in hex`);
      if (call.headers.some((value) => value.toLowerCase().includes(needle))) {
        leaks.push(`${call.url}: a header holds a secret in hex`);
      }
    }
  }
  return { secrets: drawn.length, calls: sent.length, bytesSent, leaks };
}

export type Timed = TaskResult & { timings?: Record<string, number> };
/** `stageSpent`: the ε spent as the stage events of its last task told it. */
export type DeviceResult = Timed & { deviceId: string; tasks: Timed[]; spent: number;
                                     stageSpent: number };

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
  if (fleet.audit === true) watchDraws();
  return Promise.all(fleet.tokens.map(async (token, i) => {
    const items = fleet.items[i] ?? [];
    const user = fleet.users?.[i];
    const seed = fleet.seed;
    const timings: Array<Record<string, number>> = [];
    const tasks: Timed[] = [];
    let stageSpent = 0;
    const summary = await runDevice({
      coordinatorUrl: fleet.coordinators?.[i] ?? fleet.coordinator,
      enrollmentToken: token, label: `web-${i}`, name: `test-fleet/${i}`,
      identityStore: new MemoryIdentityStore(), budgetStore: new MemoryBudgetStore(),
      items, counts: fleet.counts?.[i] ?? items.map(() => 1),
      ...(fleet.audit === true ? { fetch: auditedFetch } : {}),
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
        if (event.type === "stage") stageSpent = event.spent;
        if (event.type === "result") {
          const kept = timings[tasks.length];
          const result = kept === undefined ? event.result : { ...event.result, timings: kept };
          tasks.push(result);
          onResult?.(i, result);
        }
      },
    });
    return { deviceId: summary.identity.deviceId.toString(), ...tasks[tasks.length - 1]!, tasks,
             spent: summary.spent, stageSpent };
  }));
}
