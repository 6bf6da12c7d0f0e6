/** Unit tests of the device's codec, selection, floors and budget beyond the Python vectors. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { boundAccepts, boundTolerance, lgammaInt, lyingServerBound } from "../src/bounds.js";
import { DeviceBudget, MemoryBudgetStore, PrivacyError, pythonFloatRepr } from "../src/budget.js";
import { Codec, CodecError, codebookFromSpec, huffmanCodewords } from "../src/codec.js";
import { ConfigError } from "../src/config.js";
import { DEFAULT_FLOORS, checkEpsLocal, policyOf } from "../src/floors.js";
import { fromHex } from "../src/bytes.js";
import { AwaitStageResponseSchema, AwaitStatus, ConsistencyRequestSchema } from "../src/gen/fedhh/v1/aggregator_pb.js";
import { TaskSchema } from "../src/gen/fedhh/v1/coordinator_pb.js";
import { parseRoundConfig } from "../src/config.js";
import { reportForTask } from "../src/report.js";
import { bitIds, requestFromPb } from "../src/round.js";
import { belowFromWords, systemDraws } from "../src/selection.js";
import { fileBooks, pythonVectors } from "./vectors.js";

test("belowFromWords rejects the words that would bias the draw", () => {
  const queue = [0xffffffff, 0xfffffffe, 7];
  const words = { uint32: (n: number) => Uint32Array.from(queue.splice(0, n)) };
  // 2^32 mod 3 = 1: the word 0xffffffff is rejected, 0xfffffffe = 3 * 1431655764 + 2 is kept.
  assert.equal(belowFromWords(3, words), 2);
  assert.equal(belowFromWords(1, words), 0);
  assert.throws(() => belowFromWords(0, words), RangeError);
  for (const high of [1, 2, 1000, 2 ** 32, 2 ** 32 + 1, 2 ** 53 - 1]) {
    for (let i = 0; i < 50; i++) {
      const x = systemDraws.below(high);
      assert.ok(Number.isInteger(x) && x >= 0 && x < high, `${x} below ${high}`);
    }
  }
});

test("lgamma at integers: exact small factorials and Stirling beyond", () => {
  assert.equal(lgammaInt(1), 0);
  assert.equal(lgammaInt(2), 0);
  assert.equal(lgammaInt(4), Math.log(6));
  // ln(99!) = 359.1342053695753987760440104602869... (exact to the digits shown)
  assert.ok(Math.abs(lgammaInt(100) - 359.13420536957539878) < 1e-12);
  // Continuity at the switch from factorials to the series: ln(23!) - ln(22!) = ln 23.
  assert.ok(Math.abs(lgammaInt(24) - lgammaInt(23) - Math.log(23)) < 1e-13);
  assert.throws(() => lgammaInt(0), RangeError);
  assert.throws(() => lgammaInt(2.5), RangeError);
});

test("the bound: the complete graph has no disconnection term; no corruption, no privacy loss", () => {
  assert.equal(lyingServerBound(100, 98, 60, 0, 0), 0);
  // Complete graph, 5 corrupt: every device has H = 5, so it leaks iff 2t - 99 <= 5.
  assert.equal(lyingServerBound(100, 99, 52, 0.3, 0.05), 1);
  assert.equal(lyingServerBound(100, 99, 53, 0.3, 0.05), 0);
  // A larger t needs more corrupt neighbours: a smaller bound.
  const strict = lyingServerBound(1000, 40, 35, 0.3, 0.05);
  assert.ok(strict > 0 && strict < lyingServerBound(1000, 40, 30, 0.3, 0.05));
  assert.ok(boundTolerance(1e5) < 1e-7 && boundTolerance(2 ** 24) < 1e-5);
  assert.equal(boundAccepts(2 ** -40, 100, 40), false, "exactly at the target is in the band");
  assert.equal(boundAccepts(2 ** -41, 100, 40), true);
});

test("floors: Python's defaults, the policy they give, the local epsilon cap", () => {
  const policy = policyOf(DEFAULT_FLOORS);
  assert.equal(policy.minNMin, 100);
  assert.equal(policy.maxCorruptFraction, 0.05);
  assert.equal(policy.requireDeviceAuth && policy.requireConsistencyCheck, true);
  checkEpsLocal(10, DEFAULT_FLOORS);
  for (const bad of [0, -1, 10.000001, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(() => checkEpsLocal(bad, DEFAULT_FLOORS), ConfigError, String(bad));
  }
});

test("Python float repr", () => {
  const cases: Array<[number, string]> = [
    [1, "1.0"], [-0, "-0.0"], [0.5, "0.5"], [1e-4, "0.0001"], [1.5e-7, "1.5e-07"],
    [-2.5e300, "-2.5e+300"], [9999999999999998, "9999999999999998.0"], [1e100, "1e+100"],
  ];
  for (const [x, text] of cases) assert.equal(pythonFloatRepr(x), text);
});

test("codecs: a lone surrogate and an empty item are refused, the 5-bit code is the paper's", async () => {
  const codec = await Codec.fromSpec("5bit", 20);
  assert.equal(codec.encode("ab"), BigInt("0b00000000011101000000"));
  assert.throws(() => codec.encode(""), CodecError);
  assert.throws(() => codec.encode("a\ud83d"), CodecError);
  await assert.rejects(codebookFromSpec("english"), CodecError, "a trained book needs a loader");
  assert.throws(() => new Codec(codec.book, 0), CodecError);
  assert.throws(() => huffmanCodewords([1]), CodecError);
});

test("the budget: concurrent reports are serialized, so two cannot both pass the cap", async () => {
  const budget = await DeviceBudget.open(new MemoryBudgetStore(), 1.0, 100, () => 0);
  const task = (run: string) => create(TaskSchema, { runId: run, round: 1, epsLocal: 0.75 });
  const results = await Promise.allSettled([budget.report(task("a"), () => [1]),
                                            budget.report(task("b"), () => [2])]);
  assert.equal(results[0].status, "fulfilled");
  assert.equal(results[1].status, "rejected");
  assert.ok((results[1] as PromiseRejectedResult).reason instanceof PrivacyError);
});

test("the budget: a failed save releases no report and records no spend", async () => {
  const store = new MemoryBudgetStore();
  const failing = { load: () => store.load(), save: async () => { throw new Error("disk full"); } };
  const budget = await DeviceBudget.open(failing, 1.0, 100, () => 0);
  await assert.rejects(budget.report(create(TaskSchema, { runId: "a", round: 1, epsLocal: 0.5 }),
                                     () => [1]), /disk full/);
  assert.equal(budget.spent(), 0);
});

test("codecs: a served book must be the one this version pins, and a failed load is retried", async () => {
  const swapped = (name: string) => fileBooks(name === "german" ? "english" : name);
  await assert.rejects(codebookFromSpec("german", swapped), /named english/);
  const tampered = async (name: string) => {
    const data = JSON.parse(await fileBooks(name));
    [data.bytes.e, data.bytes.t] = [data.bytes.t, data.bytes.e]; // still a valid code
    return JSON.stringify(data);
  };
  await assert.rejects(codebookFromSpec("english", tampered), /not the expected english-/);
  let calls = 0;
  const flaky = async (name: string) => {
    calls++;
    if (calls === 1) throw new Error("offline");
    return fileBooks(name);
  };
  await assert.rejects(codebookFromSpec("german", flaky), /offline/);
  const first = await codebookFromSpec("german", flaky);
  assert.equal(await codebookFromSpec("german", flaky), first, "kept per loader");
  assert.equal(calls, 2);
});

test("reportForTask: the epsilon cap, then the budget, then the report; a retry is answered alike", async () => {
  const python = pythonVectors().selection.reports[0];
  const f = python.task;
  const task = (eps: number, run = "run") => create(TaskSchema, {
    runId: run, round: 2, codec: f.codec, maxBits: f.max_bits, prefixBits: f.prefix_bits,
    prefixes: f.prefixes.map(BigInt), segmentBits: f.segment_bits, denyList: f.deny_list.map(BigInt),
    selection: f.selection, prefixConditioning: f.prefix_conditioning, epsLocal: eps,
    roundConfig: fromHex(f.round_config),
  });
  const floors = { ...DEFAULT_FLOORS, maxEpsLocal: 4, lifetimeEpsLocal: 5 };
  const budget = await DeviceBudget.open(new MemoryBudgetStore(), floors.lifetimeEpsLocal,
                                         floors.budgetPeriodS);
  const data = { items: python.items, counts: python.counts };
  await assert.rejects(reportForTask(task(4.5), data, budget, floors, fileBooks), ConfigError);
  assert.equal(budget.spent(), 0, "a refused epsilon spends nothing");
  const ones = await reportForTask(task(3), data, budget, floors, fileBooks);
  const dimension = parseRoundConfig(fromHex(f.round_config)).dimension;
  assert.ok(ones.every((i) => Number.isInteger(i) && i >= 0 && i < dimension));
  assert.deepEqual(await reportForTask(task(3), data, budget, floors, fileBooks), ones);
  await assert.rejects(reportForTask(task(3, "other"), data, budget, floors, fileBooks), PrivacyError);
  assert.equal(budget.spent(), 3);
});

test("the survivor set reads as the ids, then the bitmap's (aggregator.proto's survivor_bits)", () => {
  assert.deepEqual(bitIds(new Uint8Array([0xff, 0x03])), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  assert.deepEqual(bitIds(new Uint8Array([0x00, 0x80, 0x01])), [16, 17]);
  assert.deepEqual(bitIds(new Uint8Array(0)), []);
  const answer = (request: object) => create(AwaitStageResponseSchema, {
    status: AwaitStatus.READY,
    request: { case: "consistencyCheck", value: create(ConsistencyRequestSchema, request) } });
  const sid = new Uint8Array(32);
  const read = (request: object) => {
    const parsed = requestFromPb(sid, 3, answer(request));
    assert.ok(parsed !== null && "survivors" in parsed);
    return parsed.survivors;
  };
  assert.deepEqual(read({ survivors: [2, 3, 9] }), [2, 3, 9]);
  assert.deepEqual(read({ survivorBits: new Uint8Array([0x06, 0x01]) }), [2, 3, 9]);
  // both: the ids, then the bitmap's, which the device's check that they increase refuses
  assert.deepEqual(read({ survivors: [2, 3], survivorBits: new Uint8Array([0x04]) }), [2, 3, 3]);
});
