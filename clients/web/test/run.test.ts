/**
 * Unit tests of the device loop (src/run.ts over src/loop.ts) with a coordinator of the test's
 * own, and of the round calls' patience while their stage is open (src/round.ts `retrying`).
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import { MemoryBudgetStore } from "../src/budget.js";
import type { Bytes } from "../src/bytes.js";
import { Codec, CodecError } from "../src/codec.js";
import { TaskSchema } from "../src/gen/fedhh/v1/coordinator_pb.js";
import { MemoryIdentityStore } from "../src/identity.js";
import { ed25519PublicFromSeed } from "../src/primitives.js";
import { type Coordinator, checkClock } from "../src/loop.js";
import { retrying } from "../src/round.js";
import { type DeviceEvent, UnsupportedBrowserError, publicIdentity, runDevice } from "../src/run.js";
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
  // resource_exhausted (a message over the receive cap: the same answer would come) is given
  // up at once, the stage open or not; an earlier call still open there is unavailable.
  calls = 0; clock = 1_000;
  await assert.rejects(retrying(shed(Code.ResourceExhausted), { ...fast, now: () => clock },
                                undefined, 1_100), /shed/);
  assert.equal(calls, 1);
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
  assert.match(results[0]!.detail, /eps_local 50.0, above this device's limit 10.0/);
  assert.deepEqual(events.filter((e) => e.type === "task").length, 2, "each task taken once");
  assert.deepEqual(events[0], { type: "enrolled", identity: publicIdentity((await identities.load())!),
                                fresh: true, spent: 0 });

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

test("runDevice refuses a page that cannot run a device before it sends anything", async () => {
  const scope = globalThis as { isSecureContext?: boolean };
  const service = coordinator([]);
  const base = { coordinatorUrl: "https://unused.test", enrollmentToken: "t", items: ["a"],
                 identityStore: new MemoryIdentityStore(), budgetStore: new MemoryBudgetStore(),
                 coordinator: service };
  // A page served over http from a host other than localhost: no WebCrypto, no Web Locks.
  scope.isSecureContext = false;
  try {
    await assert.rejects(runDevice(base), (error: Error) =>
      error instanceof UnsupportedBrowserError && /not a secure context.*serve the page over https/
        .test(error.message));
  } finally {
    delete scope.isSecureContext;
  }
  // A browser without WebCrypto's subtle API.
  const crypto = Object.getOwnPropertyDescriptor(globalThis, "crypto")!;
  Object.defineProperty(globalThis, "crypto", {
    configurable: true, value: { getRandomValues: globalThis.crypto.getRandomValues.bind(globalThis.crypto) } });
  try {
    await assert.rejects(runDevice(base), /this browser lacks WebCrypto \(crypto\.subtle\)/);
  } finally {
    Object.defineProperty(globalThis, "crypto", crypto);
  }
  // Node has no IndexedDB: the default stores cannot be used, and the page is told so.
  const { identityStore: _kept, ...noStore } = base;
  await assert.rejects(runDevice(noStore), /lacks IndexedDB, Web Locks \(navigator\.locks/);
  // IndexedDB without Web Locks: two tabs could spend one budget at once.
  const scopeDb = globalThis as { indexedDB?: unknown };
  scopeDb.indexedDB = {};
  try {
    await assert.rejects(runDevice(noStore), /this browser lacks Web Locks \(navigator\.locks/);
  } finally {
    delete scopeDb.indexedDB;
  }
  assert.equal(service.enrolled, 0, "the token was not presented");
  assert.equal(service.checkIns, 0);
  // With everything there, the same options run.
  const stop = new AbortController();
  await runDevice({ ...base, signal: stop.signal, onEvent: (event) => {
    if (event.type === "enrolled") stop.abort();
  } });
  assert.equal(service.enrolled, 1);
});

/**
 * A coordinator's Enroll as the store does it: a token enrols one key once, and the key it
 * enrolled, presented again with that token, is the same device again (its answer was lost).
 * `lose(n)` makes the n-th call (0, 1, ...) take effect and then lose its answer: "transport"
 * as a failed fetch, "hang" as an answer that never comes (until the call is aborted).
 */
function enrolments(lose: (n: number) => "transport" | "unavailable" | "hang" | "proxy"
                                          | undefined) {
  const byKey = new Map<string, bigint>();
  const tokens = new Map<string, string>();
  const seeds: string[] = [];
  const service = coordinator([]);
  service.enroll = async (token: string, _label?: string, seed?: Bytes,
                          signal?: AbortSignal): Promise<Identity> => {
    const key = Buffer.from(seed!).toString("hex");
    const n = seeds.push(key) - 1;
    let deviceId = byKey.get(key);
    if (deviceId === undefined) {
      if (!token.startsWith("token") || tokens.has(token)) {
        throw new ConnectError("unknown or already used enrollment token", Code.Unauthenticated);
      }
      deviceId = BigInt(100 + byKey.size);
      byKey.set(key, deviceId);
      tokens.set(token, key);
    } else if (tokens.get(token) !== key) {
      throw new ConnectError("this identity key is already enrolled", Code.AlreadyExists);
    }
    const lost = lose(n);
    if (lost === "transport") {
      throw new ConnectError("Failed to fetch", Code.Unknown, undefined, undefined,
                             new TypeError("Failed to fetch"));
    }
    if (lost === "unavailable") throw new ConnectError("restarting", Code.Unavailable);
    if (lost === "proxy") throw new ConnectError("HTTP 500", Code.Unknown);
    if (lost === "hang") {
      return new Promise((_, reject) => signal?.addEventListener(
        "abort", () => reject(new ConnectError("aborted", Code.Canceled)), { once: true }));
    }
    return { deviceId, credential: new Uint8Array(32).fill(n), identitySeed: seed!,
             coordinatorPublic: COORDINATOR_KEY };
  };
  return { service, seeds };
}

test("an enrolment whose answer was lost is sent again with the same key: the same device", async () => {
  const { service, seeds } = enrolments((n) => n === 0 ? "transport" : n === 1 ? "unavailable"
                                                                              : undefined);
  const identities = new MemoryIdentityStore();
  const events: DeviceEvent[] = [];
  const summary = await runDevice({
    coordinatorUrl: "https://unused.test", enrollmentToken: "token-1", items: ["a"],
    identityStore: identities, budgetStore: new MemoryBudgetStore(), coordinator: service,
    jitter: () => 0, tasks: 0, onEvent: (event) => events.push(event) });
  assert.equal(seeds.length, 3);
  assert.equal(new Set(seeds).size, 1, "every try presents the same identity key");
  assert.equal(summary.identity.deviceId, 100n);
  assert.equal(Buffer.from((await identities.load())!.identitySeed).toString("hex"), seeds[0]);
  assert.deepEqual(events.map((e) => e.type === "enroll-failed" ? [e.type, e.code] : [e.type]),
                   [["enroll-failed", Code.Unavailable], ["enroll-failed", Code.Unavailable],
                    ["enrolled"]]);
  assert.deepEqual(publicIdentity((await identities.load())!), summary.identity);
  assert.equal(await identities.loadPending(), null, "the pending enrolment is forgotten");
});

test("a tab closed while its enrolment waits resumes it on the next load", async () => {
  const { service, seeds } = enrolments((n) => n === 0 ? "hang" : undefined);
  const identities = new MemoryIdentityStore();
  const base = { coordinatorUrl: "https://unused.test", enrollmentToken: "token-2", items: ["a"],
                 identityStore: identities, budgetStore: new MemoryBudgetStore(),
                 coordinator: service, jitter: () => 0, tasks: 0 };
  const stop = new AbortController();
  const closing = runDevice({ ...base, signal: stop.signal });
  // The coordinator took the enrolment (its answer never comes); then the tab closes.
  const deadline = Date.now() + 10_000;
  while (seeds.length === 0 && Date.now() < deadline) await new Promise((r) => setImmediate(r));
  stop.abort(new Error("tab closed"));
  await assert.rejects(closing, /tab closed/);
  assert.equal(await identities.load(), null);
  assert.notEqual(await identities.loadPending(), null);
  // The next load: the same token and key, so the same device (not "already used").
  const again = await runDevice(base);
  assert.deepEqual(seeds.length, 2);
  assert.equal(seeds[1], seeds[0]);
  assert.equal(again.identity.deviceId, 100n);
  assert.equal(await identities.loadPending(), null);
  // A pending enrolment left beside a kept identity (the tab closed between the two writes)
  // is forgotten on the next load, its token with it.
  await identities.savePending({ token: "token-2", identitySeed: new Uint8Array(32).fill(3) });
  assert.equal((await runDevice(base)).identity.deviceId, 100n);
  assert.equal(await identities.loadPending(), null);
  assert.equal(seeds.length, 2, "no enrolment was sent");
  // A load with no token resumes a pending enrolment too; one the coordinator refuses is
  // forgotten, and the page is told why.
  const other = new MemoryIdentityStore();
  await other.savePending({ token: "token-2", identitySeed: new Uint8Array(32).fill(9) });
  const { enrollmentToken: _token, ...noToken } = base;
  await assert.rejects(runDevice({ ...noToken, identityStore: other }),
                       /unknown or already used enrollment token/);
  assert.equal(await other.loadPending(), null);
  await assert.rejects(runDevice({ ...noToken, identityStore: other }),
                       /not enrolled and has no enrolment token/);
});

test("an enrolment lost behind a proxy's error keeps its key: the next load is the same device", async () => {
  // The coordinator enrolled the key; a reverse proxy answered 500 in its place. The page
  // stops (as the Python device stops at an enrolment error it does not retry), but keeps the
  // pending enrolment: before, it was forgotten, and the next load's fresh key found the
  // token spent ("unknown or already used enrollment token").
  const { service, seeds } = enrolments((n) => n === 0 ? "proxy" : undefined);
  const identities = new MemoryIdentityStore();
  const base = { coordinatorUrl: "https://unused.test", enrollmentToken: "token-3", items: ["a"],
                 identityStore: identities, budgetStore: new MemoryBudgetStore(),
                 coordinator: service, jitter: () => 0, tasks: 0 };
  await assert.rejects(runDevice(base), /HTTP 500/);
  assert.equal(await identities.load(), null);
  assert.notEqual(await identities.loadPending(), null, "the pending enrolment is kept");
  const again = await runDevice(base);
  assert.equal(seeds.length, 2);
  assert.equal(seeds[1], seeds[0], "the next load presents the same key");
  assert.equal(again.identity.deviceId, 100n);
  assert.equal(await identities.loadPending(), null);
});

test("runDevice refuses items it cannot report before it sends anything, never quoting them", async () => {
  const service = coordinator([]);
  const base = { coordinatorUrl: "https://unused.test", enrollmentToken: "t",
                 identityStore: new MemoryIdentityStore(), budgetStore: new MemoryBudgetStore(),
                 coordinator: service };
  const refused: Array<[string[], number[] | undefined, RegExp]> = [
    // A string cut inside an emoji: a lone surrogate.
    [["ok", "my secret \ud83d"], undefined,
     /^item 1 of 2 is not valid Unicode: a lone surrogate at UTF-16 offset 10 /],
    [["my secret \ude00 x"], undefined, /^item 0 of 1 is not valid Unicode: .* offset 10 /],
    [["ok", ""], undefined, /^item 1 of 2 is empty$/],
    [["ok", 7 as unknown as string], undefined, /^item 1 of 2 is a number, not a string$/],
    [["ok", "my secret"], [1], /^counts must have one count per item \(2\), got 1$/],
    [["ok", "my secret"], [1, -1], /^count 1 must be an integer >= 0, got -1$/],
    [["ok", "my secret"], [1, 0.5], /^count 1 must be an integer >= 0, got 0.5$/],
    // Named by kind: before, "is a object" for null, and the string "1" or the bigint 1n read
    // "got 1", a valid count to whoever read it (counts read from a page's data attributes).
    [["ok", null as unknown as string], undefined, /^item 1 of 2 is null, not a string$/],
    [[{} as unknown as string], undefined, /^item 0 of 1 is an object, not a string$/],
    [["ok", "my secret"], [1, "1" as unknown as number],
     /^count 1 must be an integer >= 0, got a string$/],
    [["ok", "my secret"], [1n as unknown as number, 1],
     /^count 0 must be an integer >= 0, got a bigint$/],
    // Each count safe, their total not (a weighted round draws below it).
    [["ok", "my secret"], [2 ** 52, 2 ** 52],
     /^the counts add up to more than 9007199254740991 \(2\^53 - 1\), .* scale them down$/],
  ];
  for (const [items, counts, message] of refused) {
    await assert.rejects(runDevice({ ...base, items, ...(counts === undefined ? {} : { counts }) }),
                         (error: Error) => {
      assert.ok(error instanceof RangeError, String(error));
      assert.match(error.message, message);
      assert.doesNotMatch(error.message, /secret/);
      return true;
    });
  }
  assert.equal(service.enrolled, 0, "the token was not presented");
  // The codec's own refusal does not quote the item either.
  const codec = await Codec.fromSpec("bytes", 64);
  assert.throws(() => codec.encode("my secret \ud83d"), (error: Error) =>
    error instanceof CodecError && /lone surrogate at offset 10/.test(error.message)
      && !/secret/.test(error.message));
  // Emoji, CJK, URLs and numbers are items like any other.
  const stop = new AbortController();
  await runDevice({ ...base, items: ["👍🏽", "東京", "https://a.example/?q=1", "42", "👩‍👩‍👧"],
                    counts: [1, 2, 0, 3, 1], signal: stop.signal, onEvent: (event) => {
    if (event.type === "enrolled") stop.abort();
  } });
  assert.equal(service.enrolled, 1);
});

test("a task whose first stage closed beyond the device's patience by its clock is refused", () => {
  const deadlines = [1_700_000_000_000n, 1_700_000_001_000n];
  checkClock(deadlines, 1_699_999_000_000);            // the stage is open
  checkClock(deadlines, 1_700_000_030_000);            // closed 30 s ago: within the patience
  assert.throws(() => checkClock(deadlines, 1_700_000_061_000), (error: Error) =>
    /^the round's first stage closed 61 s ago by this device's clock: the clock is at least that far ahead/
      .test(error.message));
  assert.throws(() => checkClock(deadlines, 1_700_000_010_000, 5_000), /closed 10 s ago/);
});

/** Every byte array reachable from `value` (objects, arrays, Map values). */
function byteArrays(value: unknown, out: Uint8Array[] = []): Uint8Array[] {
  if (value instanceof Uint8Array) out.push(value);
  else if (value instanceof Map) for (const v of value.values()) byteArrays(v, out);
  else if (Array.isArray(value)) for (const v of value) byteArrays(v, out);
  else if (typeof value === "object" && value !== null) {
    for (const v of Object.values(value)) byteArrays(v, out);
  }
  return out;
}

test("the events and the summary a page gets carry no credential and no identity seed", async () => {
  // Before, the `enrolled` event and the summary held the whole stored identity, so a page
  // that logged its events (`onEvent: (event) => show(event)`, as the docs write it) or sent
  // them to its analytics handed over the bearer secrets that act as the device.
  const identities = new MemoryIdentityStore();
  const events: DeviceEvent[] = [];
  const stop = new AbortController();
  const summary = await runDevice({
    coordinatorUrl: "https://unused.test", enrollmentToken: "token-1", items: ["a"],
    identityStore: identities, budgetStore: new MemoryBudgetStore(),
    coordinator: coordinator([task(1, 50)]), jitter: () => 0, signal: stop.signal,
    onEvent: (event) => {
      events.push(event);
      if (event.type === "result") stop.abort(new Error("closed"));
    } });
  const stored = (await identities.load())!;
  const shown = byteArrays([events, summary]);
  assert.ok(shown.length > 0);
  for (const bytes of shown) {
    for (const [name, secret] of [["credential", stored.credential],
                                  ["identity seed", stored.identitySeed]] as const) {
      assert.notDeepEqual(Buffer.from(bytes), Buffer.from(secret), `the ${name} is shown`);
    }
  }
  const enrolled = events.find((e) => e.type === "enrolled");
  assert.deepEqual(enrolled?.type === "enrolled" && enrolled.identity,
                   { deviceId: 41n, identityPublic: ed25519PublicFromSeed(stored.identitySeed),
                     coordinatorPublic: COORDINATOR_KEY });
  assert.deepEqual(summary.identity, enrolled?.type === "enrolled" && enrolled.identity);
});
