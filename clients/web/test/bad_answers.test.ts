/**
 * A web device whose coordinator answers a check-in with something it cannot use goes on
 * checking in, as the Python device does (fleet.py asks again after any failure but a refused
 * credential): an answer that does not parse, a reverse proxy's error page while the
 * coordinator restarts, the coordinator's internal error, an answer over the device's cap
 * (`MAX_ANSWER_BYTES`, the Python channels' 16 MiB), which is not read past the cap. Before,
 * any of the first three stopped `runDevice` for good, and an answer of any size was read
 * whole into the tab's memory.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";

import { MemoryBudgetStore } from "../src/budget.js";
import { MemoryIdentityStore } from "../src/identity.js";
import { type DeviceEvent, runDevice } from "../src/run.js";
import { CoordinatorClient, MAX_ANSWER_BYTES, cappedFetch, connectTransport } from "../src/wire.js";

const identity = {
  deviceId: 42n, credential: new Uint8Array(32).fill(1), identitySeed: new Uint8Array(32).fill(2),
  coordinatorPublic: new Uint8Array(32).fill(3),
};
const CHUNK = 1 << 20;

/** A body of `chunks` MiB, pulled one MiB at a time; `pulled()` says how many were read. */
function streamed(chunks: number): { body: ReadableStream<Uint8Array>; pulled: () => number } {
  let n = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (n === chunks) controller.close();
      else { n += 1; controller.enqueue(new Uint8Array(CHUNK)); }
    },
  }, { highWaterMark: 0 });
  return { body, pulled: () => n };
}

test("check-ins answered with errors, garbage or too much are asked again", async () => {
  const stop = new AbortController();
  const big = streamed(64);
  const answers: (() => Response)[] = [
    // an answer that does not parse as a GetTaskResponse
    () => new Response(new Uint8Array([0xff, 0xff, 0xff, 0xff, 0x0f]),
                       { headers: { "Content-Type": "application/proto" } }),
    // a reverse proxy's error page
    () => new Response("<h1>Internal Server Error</h1>",
                       { status: 500, headers: { "Content-Type": "text/html" } }),
    // the coordinator's own internal error
    () => new Response(JSON.stringify({ code: "internal", message: "internal error" }),
                       { status: 500, headers: { "Content-Type": "application/json" } }),
    // declared over the cap
    () => new Response(new Uint8Array(8), { headers: {
      "Content-Type": "application/proto", "Content-Length": String(MAX_ANSWER_BYTES + 1) } }),
    // streamed past the cap, no length declared
    () => new Response(big.body, { headers: { "Content-Type": "application/proto" } }),
  ];
  const events: DeviceEvent[] = [];
  let calls = 0;
  const identities = new MemoryIdentityStore();
  await identities.save(identity);
  const summary = await runDevice({
    coordinatorUrl: "https://coordinator.test", items: ["ab"], identityStore: identities,
    budgetStore: new MemoryBudgetStore(), jitter: () => 0, signal: stop.signal,
    fetch: async (url) => {
      assert.match(String(url), /DeviceService\/GetTask$/);
      const answer = answers[calls++];
      if (answer === undefined) {
        stop.abort(new Error("the test is done"));
        throw new TypeError("fetch failed");
      }
      return answer();
    },
    onEvent: (event) => events.push(event),
  });
  assert.equal(summary.tasks, 0);
  const failed = events.flatMap((e) => e.type === "check-in-failed" ? [e] : []);
  assert.deepEqual(failed.map((e) => e.code), [Code.Internal, Code.Unknown, Code.Internal,
                                               Code.ResourceExhausted, Code.ResourceExhausted]);
  assert.match(failed[0]!.message, /parse binary/);
  assert.match(failed[3]!.message, /16777217 bytes, over the device's cap of 16777216 bytes/);
  assert.match(failed[4]!.message, /over 16777216 bytes/);
  assert.ok(big.pulled() <= 18, `${big.pulled()} MiB of a 64 MiB answer read`);
});

test("a refused credential still stops the device", async () => {
  const identities = new MemoryIdentityStore();
  await identities.save(identity);
  await assert.rejects(runDevice({
    coordinatorUrl: "https://coordinator.test", items: ["ab"], identityStore: identities,
    budgetStore: new MemoryBudgetStore(), jitter: () => 0,
    fetch: async () => new Response(JSON.stringify({ code: "unauthenticated", message: "unknown device" }),
                                    { status: 401, headers: { "Content-Type": "application/json" } }),
  }), (error: Error) => error instanceof ConnectError && error.code === Code.Unauthenticated
    && /no longer knows this device/.test(error.message));
});

test("an answer within the cap is read whole; the cap holds for any call", async () => {
  const body = new Uint8Array(1000).fill(7);
  const small = cappedFetch(async () => new Response(body), 1000);
  assert.deepEqual(new Uint8Array(await (await small("https://a.test")).arrayBuffer()), body);
  const over = cappedFetch(async () => new Response(new Uint8Array(1001)), 1000);
  await assert.rejects(over("https://a.test"),
                       (error: Error) => error instanceof ConnectError
                         && error.code === Code.ResourceExhausted);
  // (the aggregator's client goes through the same transport)
  const client = new CoordinatorClient(connectTransport("https://a.test", async () =>
    new Response(null, { headers: { "Content-Length": String(MAX_ANSWER_BYTES * 4) } })));
  await assert.rejects(client.checkIn(identity, { cPk: new Uint8Array(32), sPk: new Uint8Array(32) }),
                       /over the device's cap/);
});
