/**
 * A device whose check-in got no answer and whose browser is back online checks in again at
 * once (the page's "online" event), not after its backoff (up to 10 s); one whose browser says
 * it is offline is told so and waits for it to be online again (a minute at most: a
 * coordinator on loopback answers without a network), rather than ask every few seconds. The
 * timers are the test's own and never fire, so only the event can end a wait: nothing here
 * sleeps.
 */

import assert from "node:assert/strict";
import { type TestContext, test } from "node:test";

import { type Client, Code, ConnectError } from "@connectrpc/connect";

import type { SecureAggregation } from "../src/gen/fedhh/v1/aggregator_pb.js";
import { type Coordinator, type Network, OFFLINE_RECHECK_MS, nextRound } from "../src/loop.js";
import type { CheckIn, Identity } from "../src/wire.js";

const IDENTITY: Identity = {
  deviceId: 41n, credential: new Uint8Array(32).fill(1), identitySeed: new Uint8Array(32).fill(2),
  coordinatorPublic: new Uint8Array(32) };

/** setTimeout replaced by one that records its delay and never fires. */
function frozenTimers(t: TestContext): number[] {
  const delays: number[] = [];
  t.mock.method(globalThis, "setTimeout", (_callback: () => void, ms: number) => {
    delays.push(ms);
    return 0;
  });
  t.mock.method(globalThis, "clearTimeout", () => undefined);
  return delays;
}

/** Every pending promise's callbacks run (the test's timers never fire, setImmediate does). */
const settled = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A device whose check-ins all fail as unreachable, on `network`; stopped by `stop`. */
function unreachableDevice(network: Network, stop: AbortController) {
  const failures: { retryInMs: number; offline: boolean }[] = [];
  let checkIns = 0;
  const coordinator: Coordinator = {
    async enroll(): Promise<Identity> { throw new Error("not asked"); },
    async checkIn(): Promise<CheckIn> {
      checkIns += 1;
      throw new ConnectError("Failed to fetch", Code.Unavailable);
    },
  };
  const running = nextRound(coordinator, IDENTITY, {
    signal: stop.signal, jitter: () => 1, network,
    onCheckInFailed: (_code, _error, retryInMs, offline) => failures.push({ retryInMs, offline }),
    aggregatorFor: () => ({}) as Client<typeof SecureAggregation>,
    report: async () => [] });
  return { running, failures, checkIns: () => checkIns };
}

test("a device back online checks in at once, not after its backoff", async (t) => {
  const delays = frozenTimers(t);
  const page = new EventTarget();
  const stop = new AbortController();
  const device = unreachableDevice({ online: () => true, events: page }, stop);
  await settled();
  assert.equal(device.checkIns(), 1);
  assert.deepEqual(device.failures, [{ retryInMs: 200, offline: false }]);
  assert.deepEqual(delays, [200]);  // (a timer that never fires: the device waits)
  await settled();
  assert.equal(device.checkIns(), 1);

  page.dispatchEvent(new Event("online"));
  await settled();
  assert.equal(device.checkIns(), 2);
  assert.deepEqual(device.failures.map((f) => f.retryInMs), [200, 400]);
  // The wait it left stopped listening: a later "online" wakes only the wait under way.
  page.dispatchEvent(new Event("online"));
  await settled();
  assert.equal(device.checkIns(), 3);

  stop.abort(new Error("stopped"));
  await assert.rejects(device.running, /stopped/);
});

test("a device whose browser is offline says so and waits for it to be online", async (t) => {
  const delays = frozenTimers(t);
  const page = new EventTarget();
  let online = false;
  const stop = new AbortController();
  const device = unreachableDevice({ online: () => online, events: page }, stop);
  await settled();
  assert.equal(device.checkIns(), 1);
  assert.deepEqual(device.failures, [{ retryInMs: OFFLINE_RECHECK_MS, offline: true }]);
  assert.deepEqual(delays, [OFFLINE_RECHECK_MS]);
  page.dispatchEvent(new Event("offline"));  // (not the event it waits for)
  await settled();
  assert.equal(device.checkIns(), 1);

  online = true;
  page.dispatchEvent(new Event("online"));
  await settled();
  assert.equal(device.checkIns(), 2);
  assert.deepEqual(device.failures[1], { retryInMs: 400, offline: false });

  stop.abort(new Error("stopped"));
  await assert.rejects(device.running, /stopped/);
});

test("a device stopped while it waits for the network stops", async (t) => {
  frozenTimers(t);
  const page = new EventTarget();
  const stop = new AbortController();
  const device = unreachableDevice({ online: () => false, events: page }, stop);
  await settled();
  stop.abort(new Error("page closed"));
  await assert.rejects(device.running, /page closed/);
  page.dispatchEvent(new Event("online"));
  await settled();
  assert.equal(device.checkIns(), 1);
});
