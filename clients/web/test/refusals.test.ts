/**
 * What a web device refuses, and what a refusal costs it (as the Python device:
 * tests/security/test_device_refusals.py), through `runDevice` with the real check-in
 * (`CoordinatorClient` over a Connect router transport in this process), signed tasks and
 * configs (test/cohort.ts), the real budget, and an aggregator whose every call is refused:
 *
 * - a task that is not genuine (another key's signature, another device's) is remembered as
 *   known and waited past, with a backoff, at no cost; before, the device stopped with the
 *   refusal (a coordinator restarted with a new signing key stopped every web device);
 * - a round below the device's floors, or whose first stage closed long ago by the device's
 *   clock (`checkClock`), spends none of its budget and sends the aggregator nothing but its
 *   Decline (the seat given up, so the round need not wait for it to the deadline; before,
 *   nothing at all was sent);
 * - a page that goes (pagehide) while its device holds a seat it has not advertised keys for
 *   gives it up with a keepalive Decline; before, it dropped out silently and the round waited
 *   for it to the first stage's deadline. Not before the seat, nor once keys are advertised.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";

import { MemoryBudgetStore } from "../src/budget.js";
import { concat, equal, u32, utf8 } from "../src/bytes.js";
import { type Floors, DEFAULT_FLOORS } from "../src/floors.js";
import { DeclineRequestSchema, SubmitResponseSchema } from "../src/gen/fedhh/v1/aggregator_pb.js";
import {
  DeviceService, type GetTaskRequest, type SignedTask, type Task, GetTaskResponseSchema, TaskSchema,
} from "../src/gen/fedhh/v1/coordinator_pb.js";
import { MemoryIdentityStore } from "../src/identity.js";
import { LABELS, ed25519PublicFromSeed, ed25519Verify, sha256 } from "../src/primitives.js";
import { type DeviceEvent, type DeviceSummary, runDevice } from "../src/run.js";
import { CoordinatorClient, type Identity } from "../src/wire.js";
import { type RoundSpec, signTask, signedRound } from "./cohort.js";

const COORDINATOR_SEED = new Uint8Array(32).fill(5);
const OTHER_SEED = new Uint8Array(32).fill(6);
const DEVICE_ID = 42n;
const NOW = 1_800_000_000_000;  // the device's clock (Unix ms)
const DECLINE = "/fedhh.v1.SecureAggregation/Decline";

const identity: Identity = {
  deviceId: DEVICE_ID, credential: new Uint8Array(32).fill(1),
  identitySeed: new Uint8Array(32).fill(2),
  coordinatorPublic: ed25519PublicFromSeed(COORDINATOR_SEED),
};

/** A round open for another minute by the device's clock, which default floors refuse
 * (n_min 3 < 100) and floors with minCohort 3 accept. */
const SMALL: RoundSpec = { n: 3, nMin: 3, k: 2, t: 2, dimension: 64,
                           deadlines: [0, 1, 2, 3, 4].map((i) => BigInt(NOW + 60_000 + i)) };
const SMALL_FLOORS: Floors = { ...DEFAULT_FLOORS, minCohort: 3 };

/**
 * Device `forDevice`'s task of round `round` of `spec`, admitting the round keys of `request`
 * (as the coordinator admits the keys a check-in presents), signed by `signer`.
 */
async function taskFor(request: GetTaskRequest, round: number, spec: RoundSpec,
                       signer = COORDINATOR_SEED, forDevice = DEVICE_ID,
                       webUrl = "https://aggregator.test",
                       fields: TaskFields = {}): Promise<SignedTask> {
  const signed = await signedRound(
    spec, [ed25519PublicFromSeed(identity.identitySeed), request.cPk, request.sPk],
    COORDINATOR_SEED);
  return signTask(create(TaskSchema, {
    runId: "run", round, attempt: 1, deviceId: forDevice, prefixBits: 4, prefixes: [3n],
    segmentBits: 6, epsLocal: 1, codec: "5bit", maxBits: 10, selection: "uniform",
    aggregatorWebUrl: webUrl, roundConfig: signed.config,
    roundConfigSignature: signed.signature, secaggId: 1, admission: signed.admission,
    ...fields,
  }) as Task, signer);
}

/** Task fields a test sets otherwise. */
type TaskFields = { codec?: string; maxBits?: number; selection?: string };

type Answer = (request: GetTaskRequest, n: number) => Promise<SignedTask | "hold">;

interface Scenario {
  summary: DeviceSummary;
  events: DeviceEvent[];
  requests: GetTaskRequest[];
  /** The aggregator calls made (every one refused: round_aborted). */
  aggregatorCalls: string[];
  /** The bodies of the Decline calls among them. */
  declineBodies: Uint8Array[];
  /** Whether each Decline was sent keepalive (to outlive its page). */
  declineKeepalive: boolean[];
}

/** An aggregator call's answer of a test's own; undefined: refused as round_aborted. */
type AggregatorAnswer = (url: string) => Response | undefined;

/**
 * `runDevice` against a coordinator whose n-th GetTask (0, 1, ...) is answered by `answer`
 * ("hold": the call is held, as the coordinator holds a check-in that names the current task
 * as known, and the test stops the device there); the device stops after `tasks` results or
 * at the first hold.
 */
async function scenario(answer: Answer, options: { floors?: Floors; tasks?: number;
                                                   jitter?: () => number;
                                                   budgetStore?: MemoryBudgetStore;
                                                   page?: EventTarget;
                                                   aggregator?: AggregatorAnswer } = {}
): Promise<Scenario> {
  const stop = new AbortController();
  const requests: GetTaskRequest[] = [];
  const transport = createRouterTransport(({ service }) => {
    service(DeviceService, {
      async getTask(request) {
        requests.push(request);
        const task = await answer(request, requests.length - 1);
        if (task === "hold") {
          // (the device's abort does not reach the handler's context in this transport)
          stop.abort(new Error("held"));
          throw new ConnectError("the device stopped", Code.Canceled);
        }
        return create(GetTaskResponseSchema, { outcome: { case: "task", value: task } });
      },
    });
  });
  const aggregatorCalls: string[] = [];
  const declineBodies: Uint8Array[] = [];
  const declineKeepalive: boolean[] = [];
  const identities = new MemoryIdentityStore();
  await identities.save(identity);
  const events: DeviceEvent[] = [];
  const summary = await runDevice({
    coordinatorUrl: "https://unused.test", items: ["ab"], identityStore: identities,
    budgetStore: options.budgetStore ?? new MemoryBudgetStore(),
    coordinator: new CoordinatorClient(transport),
    floors: options.floors ?? SMALL_FLOORS, now: () => NOW, jitter: options.jitter ?? (() => 0),
    signal: stop.signal, ...(options.tasks === undefined ? {} : { tasks: options.tasks }),
    ...(options.page === undefined ? {} : { pageEvents: options.page }),
    fetch: async (url, init) => {
      aggregatorCalls.push(String(url));
      if (String(url).endsWith(DECLINE)) {
        declineBodies.push(new Uint8Array(init!.body as Uint8Array));
        declineKeepalive.push(init!.keepalive === true);
      }
      const answered = options.aggregator?.(String(url));
      if (answered !== undefined) return answered;
      return new Response(JSON.stringify({ code: "aborted", message: "refused by the test" }),
                          { status: 409, headers: { "Content-Type": "application/json" } });
    },
    onEvent: (event) => events.push(event),
  });
  return { summary, events, requests, aggregatorCalls, declineBodies, declineKeepalive };
}

const kinds = (events: DeviceEvent[]) => events.map((e) => e.type)
  .filter((type) => type !== "checking-in" && type !== "stage");

test("a task signed by another key is refused at no cost and not asked for again", async () => {
  let refused: SignedTask | undefined;
  const { summary, events, requests, aggregatorCalls } = await scenario(async (request, n) => {
    if (n > 0) return "hold";
    refused = await taskFor(request, 1, SMALL, OTHER_SEED);
    return refused;
  });
  assert.equal(requests.length, 2, `${requests.length} check-ins for one refused task`);
  assert.equal(requests[0]!.knownTask.length, 0);
  assert.ok(equal(requests[1]!.knownTask, await sha256(refused!.task)),
            "the next check-in names the refused task as known");
  assert.deepEqual(kinds(events), ["enrolled", "task-refused"]);
  const event = events.find((e) => e.type === "task-refused");
  assert.equal(event?.type === "task-refused" ? event.reason : "",
               "the task's signature is invalid: it is not by the coordinator key this device " +
               "pinned when it enrolled (a coordinator started with another signing key needs " +
               "its devices enrolled again, each with a new token)");
  assert.equal(summary.tasks, 0);
  assert.equal(summary.spent, 0, "a refused task spends nothing");
  assert.deepEqual(aggregatorCalls, [], "nothing is sent for a refused task");
});

test("another device's task is refused, and the device takes the round's next task", async () => {
  let refused: SignedTask | undefined;
  const { summary, events, requests, aggregatorCalls } = await scenario(async (request, n) => {
    if (n === 0) {
      refused = await taskFor(request, 1, SMALL, COORDINATOR_SEED, DEVICE_ID + 1n);
      return refused;
    }
    // The round's next task, once the device names the refused one as known.
    assert.ok(equal(request.knownTask, await sha256(refused!.task)));
    return taskFor(request, 2, SMALL);
  }, { tasks: 1 });
  assert.equal(requests.length, 2);
  assert.deepEqual(kinds(events), ["enrolled", "task-refused", "task", "result"]);
  const reason = events.flatMap((e) => e.type === "task-refused" ? [e.reason] : []);
  assert.deepEqual(reason, ["the task is for another device"]);
  const results = events.flatMap((e) => e.type === "result" ? [e.result] : []);
  assert.deepEqual(results.map((r) => [r.round, r.outcome]), [[2, "round_aborted"]]);
  assert.equal(summary.spent, 1, "only the task taken is spent");
  assert.ok(aggregatorCalls.length > 0 && aggregatorCalls.every((url) =>
    url.startsWith("https://aggregator.test/")));
});

test("a refused task handed back again and again is asked for with a growing backoff", async () => {
  // A coordinator that ignores the known task: the same refused task at every check-in.
  let refused: SignedTask | undefined;
  const times = 12;
  const { summary, events, requests, aggregatorCalls } = await scenario(async (request, n) => {
    if (n >= times) return "hold";
    refused ??= await taskFor(request, 1, SMALL, OTHER_SEED);
    return refused;
  }, { jitter: () => 0.001 });
  assert.equal(requests.length, times + 1);
  const digest = await sha256(refused!.task);
  assert.ok(requests.slice(1).every((r) => equal(r.knownTask, digest)));
  const waits = events.flatMap((e) => e.type === "task-refused" ? [[e.refusals, e.retryInMs]] : []);
  // Full jitter (here 0.001 of it) over 200 ms doubling to a cap of 10 s.
  assert.deepEqual(waits, Array.from({ length: times }, (_, i) =>
    [i + 1, 0.001 * Math.min(10_000, 200 * 2 ** i)]));
  assert.equal(summary.spent, 0);
  assert.deepEqual(aggregatorCalls, []);
});

/** How many of `calls` (aggregator URLs) were Declines, and how many were not. */
function declines(calls: string[]): { declined: number; sent: number } {
  const declined = calls.filter((url) => url.endsWith(DECLINE)).length;
  return { declined, sent: calls.length - declined };
}

/** The one result of a device given `spec`'s task (naming the aggregator by `webUrl`) under
 * `floors`, and what it cost: `sent` the aggregator calls but Declines, `declined` those. */
async function oneRound(spec: RoundSpec, floors: Floors = SMALL_FLOORS,
                        webUrl = "https://aggregator.test", fields: TaskFields = {}) {
  const { summary, events, aggregatorCalls } = await scenario(
    async (request) => taskFor(request, 1, spec, COORDINATOR_SEED, DEVICE_ID, webUrl, fields),
    { floors, tasks: 1 });
  const results = events.flatMap((e) => e.type === "result" ? [e.result] : []);
  assert.equal(results.length, 1);
  return { result: results[0]!, spent: summary.spent, ...declines(aggregatorCalls) };
}

test("a round the device takes part in is spent and sent (the tests' control)", async () => {
  const { result, spent, sent } = await oneRound(SMALL);
  assert.equal(result.outcome, "round_aborted", result.detail);
  assert.equal(spent, 1);
  assert.ok(sent > 0);
});

test("a page reloaded mid-round, handed the round's task again, spends nothing more", async () => {
  // The first load takes the task, spends its report's epsilon and is lost before the round
  // ends (every aggregator call refused: the tab closed). The reload, with the same budget, is
  // handed the same task, whose admission is for the first load's round keys: it must neither
  // spend again nor send anything.
  const budgetStore = new MemoryBudgetStore();
  let first: SignedTask | undefined;
  const handed: Answer = async (request) =>
    (first ??= await taskFor(request, 1, SMALL, COORDINATOR_SEED, DEVICE_ID));
  const before = await scenario(handed, { tasks: 1, budgetStore });
  assert.equal(before.summary.spent, 1);
  assert.ok(before.aggregatorCalls.length > 0);
  const reloaded = await scenario(handed, { tasks: 1, budgetStore });
  const results = reloaded.events.flatMap((e) => e.type === "result" ? [e.result] : []);
  assert.deepEqual(results.map((r) => r.outcome), ["device_aborted"]);
  assert.match(results[0]!.detail, /before the page was reloaded/);
  assert.equal(reloaded.summary.spent, 1, "the reload spent nothing more");
  // (its Decline alone: the aggregator refuses it, the first load having advertised its keys)
  assert.deepEqual(declines(reloaded.aggregatorCalls), { declined: 1, sent: 0 });
  assert.equal((await budgetStore.load())!.spends.length, 1);
});

test("a round below the device's floors spends none of its budget and only declines", async () => {
  // n_min 3 below the default floor of 100.
  const low = await oneRound(SMALL, DEFAULT_FLOORS);
  assert.equal(low.result.outcome, "device_aborted");
  assert.match(low.result.detail, /n_min=3 < floor 100/);
  assert.deepEqual([low.spent, low.sent, low.declined], [0, 0, 1]);
  // (n, k, t) = (40, 4, 2) fails the lying-server bound at 5% corrupt devices.
  const weak = await oneRound({ ...SMALL, n: 40, k: 4, t: 2 });
  assert.equal(weak.result.outcome, "device_aborted");
  assert.match(weak.result.detail, /\(n, k, t\) = \(40, 4, 2\) fails the lying-server bound/);
  assert.deepEqual([weak.spent, weak.sent, weak.declined], [0, 0, 1]);
  // eps_local above the device's cap (10).
  const eps = await oneRound(SMALL, { ...SMALL_FLOORS, maxEpsLocal: 0.5 });
  assert.match(eps.result.detail, /eps_local 1.0, above this device's limit 0.5/);
  assert.deepEqual([eps.spent, eps.sent, eps.declined], [0, 0, 1]);
});

/**
 * Whether `body` is this device's Decline of the round of `config`, its admission for seat 1,
 * signed over the transcript as fedhh/rpc/aggregator_wire.py's call_transcript writes it:
 * label || len(kind) kind || len(session) session || device id || len(digest) digest (empty).
 */
async function isThisDevicesDecline(body: Uint8Array, config: Uint8Array): Promise<boolean> {
  const sent = fromBinary(DeclineRequestSchema, body);
  const session = await sha256(LABELS.session, config);
  const admission = sent.credentials!.admission!;
  const field = (data: Uint8Array) => concat(u32(data.length), data);
  const transcript = concat(utf8("fedhh/aggregator/v1/call"), field(utf8("decline")),
                            field(session), u32(1), field(new Uint8Array()));
  return equal(sent.sessionId, session) && admission.deviceId === 1
    && equal(admission.identityKey, ed25519PublicFromSeed(identity.identitySeed))
    && ed25519Verify(admission.identityKey, sent.credentials!.signature, transcript);
}

test("a refused round's Decline is this device's, signed over the call as the aggregator reads it",
     async () => {
  // The transcript written out as fedhh/rpc/aggregator_wire.py's call_transcript writes it:
  // label || len(kind) kind || len(session) session || device id || len(digest) digest (empty).
  let config: Uint8Array | undefined;
  const { declineBodies } = await scenario(async (request) => {
    const signed = await taskFor(request, 1, SMALL);
    config = fromBinary(TaskSchema, signed.task).roundConfig;
    return signed;
  }, { floors: DEFAULT_FLOORS, tasks: 1 });
  assert.equal(declineBodies.length, 1);
  assert.ok(await isThisDevicesDecline(declineBodies[0]!, config!));
});

test("a round whose first stage closed beyond the patience by its clock costs nothing", async () => {
  // The device's clock 61 s past the first stage's deadline (its patience: 30 s).
  const late = await oneRound({ ...SMALL, deadlines: SMALL.deadlines.map((d) => d - 121_000n) });
  assert.equal(late.result.outcome, "device_aborted");
  assert.match(late.result.detail,
               /^the round's first stage closed 61 s ago by this device's clock/);
  assert.deepEqual([late.spent, late.sent, late.declined], [0, 0, 1]);
  // 29 s past it: within the patience, the device takes part.
  const within = await oneRound({ ...SMALL, deadlines: SMALL.deadlines.map((d) => d - 89_000n) });
  assert.equal(within.result.outcome, "round_aborted", within.result.detail);
  assert.deepEqual([within.spent, within.sent > 0, within.declined], [1, true, 0]);
});

test("a task naming a plain-http aggregator, in an https page, costs nothing", async () => {
  // The browser would block every call to it as mixed content ("Failed to fetch"): before, the
  // device spent its report's epsilon, then every call of the round failed, round after round.
  const scope = globalThis as { location?: { origin: string; protocol: string } };
  scope.location = { origin: "https://app.example", protocol: "https:" };
  try {
    const blocked = await oneRound(SMALL, SMALL_FLOORS, "http://aggregator.test:7180");
    assert.equal(blocked.result.outcome, "device_aborted");
    assert.match(blocked.result.detail, /^the Connect URL of aggregator .* is plain http .* mixed content/);
    // (not even a Decline: the page cannot call that aggregator)
    assert.deepEqual([blocked.spent, blocked.sent, blocked.declined], [0, 0, 0]);
    // A loopback aggregator over http is allowed by browsers: the device takes part.
    const loopback = await oneRound(SMALL, SMALL_FLOORS, "http://127.0.0.1:7180");
    assert.equal(loopback.result.outcome, "round_aborted", loopback.result.detail);
    assert.deepEqual([loopback.spent, loopback.sent > 0], [1, true]);
  } finally {
    delete scope.location;
  }
});

test("a task of a coordinator newer than the page's code is refused at no cost, saying to reload",
     async () => {
  // A page holding a cached bundle after the services were upgraded: before, the round ended
  // "unsupported RoundConfig version 5" (or "unknown codebook ..."), every round, with no word
  // of what to do.
  const reload = /this page's device code is older than the coordinator's: reload the page \(if this persists, the site or a cache still serves an older bundle/;
  // A config the page cannot read names no seat it could give up; a task it cannot take in a
  // round it can read is declined.
  const cases: [string, RoundSpec, TaskFields, RegExp, number][] = [
    ["a config version", { ...SMALL, version: 6 }, {},
     /ConfigError: unsupported RoundConfig version 6 \(this device reads version 5\): /, 0],
    ["a config flag", { ...SMALL, flags: 7 }, {}, /ConfigError: unknown RoundConfig flags 0x7: /,
     0],
    ["a codebook", SMALL, { codec: "french" }, /^unknown codebook "french"; .* A task that names it: /,
     1],
    ["a code width", SMALL, { maxBits: 5000 }, /^max_bits must be .*, got 5000 \(from a task: /, 1],
    ["a selection rule", SMALL, { selection: "stratified" },
     /^selection must be .*, got "stratified": /, 1],
  ];
  for (const [what, spec, fields, detail, declined] of cases) {
    const round = await oneRound(spec, SMALL_FLOORS, "https://aggregator.test", fields);
    assert.equal(round.result.outcome, "device_aborted", what);
    assert.match(round.result.detail, detail, what);
    assert.match(round.result.detail, reload, what);
    assert.deepEqual([round.spent, round.sent, round.declined], [0, 0, declined], what);
  }
  // The other way round: a coordinator older than the page's code.
  const older = await oneRound({ ...SMALL, version: 4 });
  assert.match(older.result.detail, /ConfigError: unsupported RoundConfig version 4 \(this device reads version 5\): the coordinator is older than this page's device code: the operator must serve the bundle built from the coordinator's fedhh version, or upgrade the coordinator$/);
  assert.deepEqual([older.spent, older.sent, older.declined], [0, 0, 0]);
});

/** A page of the test's own: `goes()` fires its pagehide, as a closed or reloaded tab's. */
function testPage(): EventTarget & { goes: () => void } {
  const page = new EventTarget();
  return Object.assign(page, { goes: () => { page.dispatchEvent(new Event("pagehide")); } });
}

const ADVERTISE = "/fedhh.v1.SecureAggregation/AdvertiseKeys";
const AWAIT = "/fedhh.v1.SecureAggregation/AwaitStage";

test("a page that goes before its device advertised keys gives its seat up, kept alive",
     async () => {
  // The tab closes while the device's keys are on their way (no answer yet): the device holds
  // its seat until the aggregator accepted them.
  const page = testPage();
  let config: Uint8Array | undefined;
  const { declineBodies, declineKeepalive, aggregatorCalls } = await scenario(async (request) => {
    const signed = await taskFor(request, 1, SMALL);
    config = fromBinary(TaskSchema, signed.task).roundConfig;
    return signed;
  }, { tasks: 1, page, aggregator: (url) => {
    if (url.endsWith(ADVERTISE)) page.goes();
    return undefined;
  } });
  assert.deepEqual(declineKeepalive, [true], aggregatorCalls.join(", "));
  assert.ok(aggregatorCalls.every((url) => url.startsWith("https://aggregator.test/")));
  assert.ok(await isThisDevicesDecline(declineBodies[0]!, config!));
});

test("a page that goes once its keys are advertised, or holding no seat, declines nothing",
     async () => {
  // Advertised: the aggregator accepted the keys, and the page goes at the next stage's wait
  // (its neighbours count on the device now: it leaves as a dropout, which the round recovers).
  const page = testPage();
  const advertised = await scenario(async (request) => taskFor(request, 1, SMALL), {
    tasks: 1, page, aggregator: (url) => {
      if (url.endsWith(ADVERTISE)) {
        return new Response(toBinary(SubmitResponseSchema, create(SubmitResponseSchema,
                                                                  { accepted: true })),
                            { status: 200, headers: { "Content-Type": "application/proto" } });
      }
      if (url.endsWith(AWAIT)) page.goes();
      return undefined;
    } });
  assert.ok(advertised.aggregatorCalls.some((url) => url.endsWith(AWAIT)));
  assert.deepEqual(advertised.declineKeepalive, []);
  // Checking in (no task yet), and after the round ended for the device: nothing to give up.
  const idle = testPage();
  const between = await scenario(async (request, n) => {
    idle.goes();
    return n === 0 ? taskFor(request, 1, SMALL) : "hold";
  }, { page: idle });
  assert.ok(between.aggregatorCalls.some((url) => url.endsWith(ADVERTISE)));
  assert.deepEqual(between.declineKeepalive, []);
  // A refused task's own Decline is an ordinary call; a page that goes after it sends no other.
  const refusing = testPage();
  const refused = await scenario(async (request, n) => {
    refusing.goes();
    return n === 0 ? taskFor(request, 1, SMALL) : "hold";
  }, { page: refusing, floors: DEFAULT_FLOORS });
  assert.deepEqual(refused.declineKeepalive, [false]);
});
