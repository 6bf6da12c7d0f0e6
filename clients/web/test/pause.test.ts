/**
 * The web device's waits: `pause` keeps a wait longer than a timer holds (2^31 - 1 ms) by
 * chaining timers, where one timer of that length fired at once (a coordinator's huge wait
 * became a hot loop of check-ins); and a check-in answered with nothing to do is sent again
 * after a floor and a bounded, jittered backoff (`noTaskPause`), not after `retryAfterMs` as
 * given (0: a hot loop). The timers are the test's own: each delay is recorded and fires on
 * the next turn of the event loop, so nothing here sleeps.
 */

import assert from "node:assert/strict";
import { type TestContext, test } from "node:test";

import type { Client } from "@connectrpc/connect";

import type { SecureAggregation } from "../src/gen/fedhh/v1/aggregator_pb.js";
import {
  type Coordinator,
  NO_TASK_FLOOR_MS,
  NO_TASK_MAX_BACKOFF_MS,
  NO_TASK_MAX_WAIT_MS,
  nextRound,
  noTaskPause,
} from "../src/loop.js";
import { MAX_TIMER_MS, pause } from "../src/round.js";
import type { CheckIn, Identity } from "../src/wire.js";

/**
 * setTimeout and clearTimeout replaced for the test: every delay is recorded; a timer fires on
 * the next turn whatever its delay (`onTimer` is told first, and may abort the wait).
 */
function recordedTimers(t: TestContext, onTimer: (delays: number[]) => void = () => {}): number[] {
  const delays: number[] = [];
  const immediate = globalThis.setImmediate;
  const clearImmediateReal = globalThis.clearImmediate;
  t.mock.method(globalThis, "setTimeout", (callback: () => void, ms: number) => {
    delays.push(ms);
    onTimer(delays);
    return immediate(callback);
  });
  t.mock.method(globalThis, "clearTimeout", (handle: ReturnType<typeof setImmediate>) => {
    clearImmediateReal(handle);
  });
  return delays;
}

test("a wait longer than a timer holds is made of timers each within the limit", async (t) => {
  const delays = recordedTimers(t);
  await pause(2 ** 32 + 5);
  assert.ok(delays.every((ms) => ms >= 0 && ms <= MAX_TIMER_MS), `${delays}`);
  assert.equal(delays.reduce((a, b) => a + b, 0), 2 ** 32 + 5);
  assert.deepEqual(delays, [MAX_TIMER_MS, MAX_TIMER_MS, 7]);
  // A short wait is one timer, as before; NaN and a negative wait are none.
  delays.length = 0;
  await pause(250);
  await pause(Number.NaN);
  await pause(-5);
  assert.deepEqual(delays, [250, 0, 0]);
});

test("an endless wait lasts until its signal aborts", async (t) => {
  const stop = new AbortController();
  const delays = recordedTimers(t, (made) => {
    if (made.length === 5) stop.abort(new Error("closed"));
  });
  await assert.rejects(pause(Number.POSITIVE_INFINITY, stop.signal), /closed/);
  assert.deepEqual(delays, Array(5).fill(MAX_TIMER_MS));
});

const IDENTITY: Identity = {
  deviceId: 41n, credential: new Uint8Array(32).fill(1), identitySeed: new Uint8Array(32).fill(2),
  coordinatorPublic: new Uint8Array(32) };

/**
 * The waits between the check-ins of a device whose every check-in is answered `answer`
 * (`held` is told at each check-in, as the coordinator holds it; `now` the device's wall clock).
 */
async function waitsBetweenCheckIns(t: TestContext, answer: CheckIn, count: number,
                                    jitter: number, held: () => void = () => {},
                                    now?: () => number): Promise<number[]> {
  const stop = new AbortController();
  let checkIns = 0;
  const coordinator: Coordinator = {
    async enroll(): Promise<Identity> { throw new Error("not asked"); },
    async checkIn(): Promise<CheckIn> {
      checkIns += 1;
      if (checkIns > count) stop.abort(new Error("enough"));
      held();
      return answer;
    },
  };
  const delays = recordedTimers(t);
  await assert.rejects(nextRound(coordinator, IDENTITY, {
    signal: stop.signal, jitter: () => jitter, ...(now === undefined ? {} : { now }),
    aggregatorFor: () => ({}) as Client<typeof SecureAggregation>,
    report: async () => [] }), /enough/);
  return delays;
}

test("check-ins answered 'no task, retry after 0 ms' back off from a floor to a cap", async (t) => {
  const waits = await waitsBetweenCheckIns(t, { kind: "wait", retryAfterMs: 0 }, 12, 0);
  assert.equal(waits.length, 12);
  assert.deepEqual(waits, waits.map((_, i) =>
    Math.min(NO_TASK_MAX_BACKOFF_MS, NO_TASK_FLOOR_MS * 2 ** i)));
});

test("a coordinator's wait is honoured within bounds, with jitter", async (t) => {
  const asked = await waitsBetweenCheckIns(t, { kind: "wait", retryAfterMs: 90_000 }, 3, 0.5);
  assert.deepEqual(asked, [112_500, 112_500, 112_500]);
  // The largest uint32 (49 days) is bounded: the device checks in again within minutes.
  const huge = await waitsBetweenCheckIns(t, { kind: "wait", retryAfterMs: 2 ** 32 - 1 }, 2, 0);
  assert.deepEqual(huge, [NO_TASK_MAX_WAIT_MS, NO_TASK_MAX_WAIT_MS]);
  assert.equal(noTaskPause(0, 1e9, 0.999), NO_TASK_MAX_BACKOFF_MS * (1 + 0.5 * 0.999));
  assert.equal(noTaskPause(Number.NaN, -3, 0), NO_TASK_FLOOR_MS);
});

test("a check-in held by the coordinator counts as held when the wall clock steps back", async (t) => {
  // Each check-in is held for a long-poll's 30 s, during which the wall clock is set back an
  // hour (NTP, a user): read on the wall clock the check-in seemed answered at once, and the
  // waits doubled as for a coordinator answering in a hot loop.
  let monotonic = 1_000;
  let wall = 1_800_000_000_000;
  t.mock.method(performance, "now", () => monotonic);
  const delays = await waitsBetweenCheckIns(t, { kind: "wait", retryAfterMs: 0 }, 6, 0, () => {
    monotonic += 30_000;
    wall -= 3_600_000;
  }, () => wall);
  assert.deepEqual(delays, Array(6).fill(NO_TASK_FLOOR_MS));
});
