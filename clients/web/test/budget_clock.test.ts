/**
 * The budget's time and what it keeps (budget.ts "Time" and "What is kept"), as
 * tests/unit/device/test_device_budget.py checks the Python device: a spend is dated
 * max(device clock, the task's signed last deadline) and counted against min(device clock,
 * that deadline) - period, so no clock error frees a spend early; a run's last report is kept
 * while its round's spend is, and at most MAX_REPORTS of them.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { DeviceBudget, MAX_REPORTS, MemoryBudgetStore, PrivacyError } from "../src/budget.js";
import { TaskSchema } from "../src/gen/fedhh/v1/coordinator_pb.js";

const DAY = 86_400;
const PERIOD = 30 * DAY;
const REAL = 1_700_000_000;  // the true time of the first task

/** A task whose signed last deadline is a minute after the true time `at` (0: none). */
function signed(round: number, at: number, epsLocal = 6, runId = "r") {
  return create(TaskSchema, { runId, round, epsLocal,
                              deadlineUnixMs: at === 0 ? 0n : BigInt((at + 60) * 1000) });
}

const spent = (error: unknown) => error instanceof PrivacyError && /budget is spent/.test(error.message);

test("a clock behind, then corrected, does not free the spends made meanwhile", async () => {
  // (before, the spend was dated 40 days back by the device's clock; corrected a day later,
  // the device found it 41 days old and spent the cap again)
  let now = REAL - 40 * DAY;
  const store = new MemoryBudgetStore();
  const budget = await DeviceBudget.open(store, 10, PERIOD, () => now);
  await budget.report(signed(1, REAL), () => [1]);
  now = REAL + DAY;
  const reloaded = await DeviceBudget.open(store, 10, PERIOD, () => now);
  await assert.rejects(reloaded.report(signed(2, REAL + DAY), () => [2]), spent);
  now = REAL + PERIOD + 61;  // a true period after the spend's signed deadline
  assert.deepEqual(await reloaded.report(signed(2, now), () => [2]), [2]);
});

test("a clock jumping ahead does not free the spends", async () => {
  let now = REAL;
  const store = new MemoryBudgetStore();
  const budget = await DeviceBudget.open(store, 10, PERIOD, () => now);
  await budget.report(signed(1, REAL), () => [1]);
  now = REAL + 40 * DAY;
  await assert.rejects(budget.report(signed(2, REAL + DAY), () => [2]), spent);
  assert.equal((await store.load())!.spends.length, 1, "nor was it pruned");
});

test("neither a clock jumping back nor a signed time far ahead frees a spend", async () => {
  let now = REAL;
  const budget = await DeviceBudget.open(new MemoryBudgetStore(), 10, PERIOD, () => now);
  await budget.report(signed(1, REAL), () => [1]);
  now = REAL - 40 * DAY;
  await assert.rejects(budget.report(signed(2, REAL + DAY), () => [2]), spent);
  now = REAL + DAY;  // a coordinator signing a deadline 40 days ahead
  await assert.rejects(budget.report(signed(2, REAL + 40 * DAY), () => [2]), spent);
});

test("reports are kept while their round's spend is, and at most MAX_REPORTS", async () => {
  // (before, the last report of every run was kept for ever)
  let now = 1000;
  const store = new MemoryBudgetStore();
  const budget = await DeviceBudget.open(store, 1e9, 100, () => now);
  await budget.report(signed(1, 0, 1, "old"), () => [7]);
  now += 101;
  let calls = 0;
  for (let i = 0; i <= MAX_REPORTS; i++) {
    await budget.report(signed(1, 0, 1, `run-${i}`), () => [++calls]);
  }
  const state = (await store.load())!;
  assert.ok(!("old" in state.reports) && !("run-0" in state.reports));
  assert.equal(Object.keys(state.reports).length, MAX_REPORTS);
  assert.equal(state.spends.length, MAX_REPORTS + 1, "every spend still counted");
  const reloaded = await DeviceBudget.open(store, 1e9, 100, () => now);
  const last = `run-${MAX_REPORTS}`;
  assert.deepEqual(await reloaded.report(signed(1, 0, 1, last), () => [++calls]),
                   state.reports[last]!.ones);
  assert.equal(calls, MAX_REPORTS + 1, "a retry of a kept round: no fresh report");
});

test("a round whose report was dropped is refused while its spend counts", async () => {
  // (before, a round of a run answered again after a later round of that run got a fresh
  // report; the coordinator's ledger charges every attempt of a round as one report)
  let now = 1000;
  const budget = await DeviceBudget.open(new MemoryBudgetStore(), 1e9, 100, () => now);
  const gone = (error: unknown) => error instanceof PrivacyError && /no longer kept/.test(error.message);
  await budget.report(signed(1, 0, 1), () => [1]);
  await budget.report(signed(2, 0, 1), () => [2]);
  await assert.rejects(budget.report(signed(1, 0, 1), () => [3]), gone);
  for (let i = 0; i < MAX_REPORTS; i++) await budget.report(signed(1, 0, 1, `run-${i}`), () => [4]);
  await assert.rejects(budget.report(signed(2, 0, 1), () => [5]), gone, "past the count bound");
  now += 101;  // the spends left the period: a fresh report, charged
  assert.deepEqual(await budget.report(signed(2, 0, 1), () => [6]), [6]);
});
