/**
 * Unit tests of the device loop (src/run.ts over src/loop.ts) with a coordinator of the test's
 * own, and of the round calls' patience while their stage is open (src/round.ts `retrying`).
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import { MemoryBudgetStore } from "../src/budget.js";
import { TaskSchema } from "../src/gen/fedhh/v1/coordinator_pb.js";
import { MemoryIdentityStore } from "../src/identity.js";
import type { Coordinator } from "../src/loop.js";
import { retrying } from "../src/round.js";
import { type DeviceEvent, runDevice } from "../src/run.js";
import type { CheckIn, Identity } from "../src/wire.js";

const fast = { jitter: () => 0 };

test("a shed call is made again for as long as its stage is open, then given up", async () => {
  let clock = 1_000;
  let calls = 0;
  const shed = (code: Code) => async () => {
    calls += 1;
    clock += 10;
    throw new ConnectError("shed", code);
  };
  // Stage open until 1_100: ten tries of 10 ms each, more than the 5 attempts.
  await assert.rejects(retrying(shed(Code.Unavailable), { ...fast, now: () => clock },
                                undefined, 1_100), /shed/);
  assert.equal(calls, 10);
  // resource_exhausted (a Connect port shedding) is retried the same way.
  calls = 0; clock = 1_000;
  await assert.rejects(retrying(shed(Code.ResourceExhausted), { ...fast, now: () => clock },
                                undefined, 1_050), /shed/);
  assert.equal(calls, 5);
  // Beyond the attempts while the stage is open, then an answer.
  calls = 0; clock = 0;
  assert.equal(await retrying(async () => {
    calls += 1;
    if (calls < 12) throw new ConnectError("shed", Code.Canceled);
    return "in";
  }, { ...fast, now: () => clock }, undefined, 1), "in");
  assert.equal(calls, 12);
  // With the stage closed: the policy's attempts only.
  calls = 0; clock = 5_000;
  await assert.rejects(retrying(shed(Code.Unavailable), { ...fast, attempts: 3, now: () => clock },
                                undefined, 1_000), /shed/);
  assert.equal(calls, 3);
});

test("a call that ran out of time is asked again while its stage is open, else not", async () => {
  let clock = 0;
  let calls = 0;
  const slow = async () => {
    calls += 1;
    clock += 30;
    throw new ConnectError("too slow", Code.DeadlineExceeded);
  };
  await assert.rejects(retrying(slow, { ...fast, now: () => clock }, undefined, 100), /too slow/);
  assert.equal(calls, 4);  // at 0, 30, 60 and 90 ms
  calls = 0;
  await assert.rejects(retrying(slow, { ...fast, now: () => clock }), /too slow/);
  assert.equal(calls, 1);  // no stage open: the outcome is timed_out
  // A repeat that finds its stage closed still asks what happened.
  calls = 0; clock = 0;
  assert.equal(await retrying(async () => {
    calls += 1;
    throw new ConnectError("x", calls === 1 ? Code.DeadlineExceeded : Code.FailedPrecondition);
  }, { ...fast, now: () => clock }, () => "closed since", 100), "closed since");
});

test("an abort ends the retries and the backoff at once", async () => {
  const stop = new AbortController();
  const started = Date.now();
  const call = retrying(async () => {
    throw new ConnectError("shed", Code.Unavailable);
  }, { jitter: () => 1, initialBackoffMs: 60_000, signal: stop.signal }, undefined, Infinity);
  setTimeout(() => stop.abort(new Error("stopped")), 20);
  await assert.rejects(call, /stopped/);
  assert.ok(Date.now() - started < 5_000);
});

const COORDINATOR_KEY = new Uint8Array(32).fill(7);

/**
 * A coordinator that enrols each token once and hands out `tasks` in turn (each twice, as
 * the coordinator hands a device its current task again), then holds the check-in until the
 * call is aborted, as a long-poll with no task.
 */
function coordinator(tasks: CheckIn[]): Coordinator & { enrolled: number; checkIns: number } {
  const used = new Set<string>();
  let next = 0;
  return {
    enrolled: 0,
    checkIns: 0,
    async enroll(token: string): Promise<Identity> {
      if (used.has(token)) throw new ConnectError("unknown or already used", Code.Unauthenticated);
      used.add(token);
      this.enrolled += 1;
      return { deviceId: BigInt(40 + this.enrolled), credential: new Uint8Array(32).fill(1),
               identitySeed: new Uint8Array(32).fill(2), coordinatorPublic: COORDINATOR_KEY };
    },
    async checkIn(_identity, _keys, _known, _wait, signal?: AbortSignal): Promise<CheckIn> {
      this.checkIns += 1;
      const answer = tasks[Math.floor(next++ / 2)];
      if (answer !== undefined) return answer;
      return new Promise((_, reject) => signal?.addEventListener(
        "abort", () => reject(new ConnectError("aborted", Code.Canceled)), { once: true }));
    },
  };
}

function task(round: number, epsLocal: number): CheckIn {
  return { kind: "task", taskBytes: new Uint8Array(), digest: new Uint8Array([round]),
           task: create(TaskSchema, { runId: "r", round, attempt: 0, deviceId: 41n, epsLocal,
                                      aggregatorWebUrl: "https://aggregator.test" }) };
}

test("runDevice enrols once, keeps its identity, takes each task once and stops on abort", async () => {
  const identities = new MemoryIdentityStore();
  const budgets = new MemoryBudgetStore();
  // Round 1 asks for more local epsilon than the floors allow; round 2's config does not parse.
  const service = coordinator([task(1, 50), task(2, 1)]);
  const events: DeviceEvent[] = [];
  const stop = new AbortController();
  const base = { coordinatorUrl: "https://unused.test", enrollmentToken: "token-1",
                 items: ["a"], identityStore: identities, budgetStore: budgets,
                 coordinator: service, jitter: () => 0 };
  const running = runDevice({ ...base, signal: stop.signal, onEvent: (event) => {
    events.push(event);
    if (event.type === "result" && event.result.round === 2) stop.abort(new Error("closed"));
  } });
  const summary = await running;
  assert.equal(service.enrolled, 1);
  assert.equal((await identities.load())?.deviceId, 41n);
  assert.equal(summary.tasks, 2);
  assert.equal(summary.contributed, 0);
  assert.equal(summary.spent, 0, "a refused task spends nothing");
  const results = events.flatMap((e) => e.type === "result" ? [e.result] : []);
  assert.deepEqual(results.map((r) => [r.round, r.outcome]),
                   [[1, "device_aborted"], [2, "device_aborted"]]);
  assert.match(results[0]!.detail, /eps_local 50, above this device's limit 10/);
  assert.deepEqual(events.filter((e) => e.type === "task").length, 2, "each task taken once");
  assert.deepEqual(events[0], { type: "enrolled", identity: await identities.load(), fresh: true,
                                spent: 0 });

  // The page again (a reload): the stored identity, not the spent token.
  const again = coordinator([task(3, 1)]);
  const later = await runDevice({ ...base, coordinator: again, tasks: 1, onEvent: (event) => {
    if (event.type === "enrolled") assert.equal(event.fresh, false);
  } });
  assert.equal(again.enrolled, 0);
  assert.equal(later.identity.deviceId, 41n);
  assert.equal(later.tasks, 1);

  // A device with neither an identity nor a token cannot start.
  await assert.rejects(runDevice({ ...base, identityStore: new MemoryIdentityStore(),
                                   enrollmentToken: "" }), /not enrolled and has no enrolment token/);
});

test("runDevice stops during a check-in when its signal aborts", async () => {
  const stop = new AbortController();
  const service = coordinator([]);
  setTimeout(() => stop.abort(), 30);
  const summary = await runDevice({
    coordinatorUrl: "https://unused.test", enrollmentToken: "t", items: [],
    identityStore: new MemoryIdentityStore(), budgetStore: new MemoryBudgetStore(),
    coordinator: service, signal: stop.signal });
  assert.equal(summary.tasks, 0);
  assert.equal(service.checkIns, 1, "an aborted check-in is not asked again");
});
