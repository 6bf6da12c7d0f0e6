/**
 * A refused report's reason is worded as the Python device words it (budget.py: 4 significant
 * digits), since a page shows it to its user: it showed the float sum, "95.99490000000001 of
 * 100", where the Python device says "95.99 of 100.0" (the cap as repr).
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { DeviceBudget, MemoryBudgetStore, PrivacyError } from "../src/budget.js";
import { TaskSchema } from "../src/gen/fedhh/v1/coordinator_pb.js";

test("a spent budget's refusal reads as the Python device's", async () => {
  const budget = await DeviceBudget.open(new MemoryBudgetStore(), 100, 3600, () => 0);
  for (let round = 0; round < 9; round++) {
    await budget.report(create(TaskSchema, { runId: "r", round, epsLocal: 10.6661 }), () => [1]);
  }
  await assert.rejects(
    budget.report(create(TaskSchema, { runId: "r", round: 9, epsLocal: 10.6661 }), () => [1]),
    (error: Error) => {
      assert.ok(error instanceof PrivacyError);
      // (the message of fedhh_device.budget.DeviceBudget.report for the same spends)
      assert.equal(error.message, "this device's budget is spent: 95.99 of 100.0 used in the " +
                                  "period, the task asks for 10.67, and their exact sum is " +
                                  "above the cap");
      return true;
    });
});

/** A store that hands back `state` as read from IndexedDB. */
function stored(state: unknown): MemoryBudgetStore {
  const store = new MemoryBudgetStore();
  store.load = async () => state as Awaited<ReturnType<MemoryBudgetStore["load"]>>;
  return store;
}

const SPEND = { run_id: "r", round: 0, eps_local: 40, at: 1000 };
const REPORT = { run_id: "r", round: 0, digest: "ab", ones: [1, 5] };

test("a stored budget with fields of other types is refused as corrupt when opened", async () => {
  // (before, only the shape was checked: a NaN eps_local made spent() NaN and the cap never
  // refused again; a string one was concatenated into the sum)
  const corrupt: unknown[] = [
    { spends: [{ ...SPEND, eps_local: Number.NaN }], reports: {} },
    { spends: [{ ...SPEND, eps_local: Number.POSITIVE_INFINITY }], reports: {} },
    { spends: [{ ...SPEND, eps_local: -1 }], reports: {} },
    { spends: [{ ...SPEND, eps_local: "40" }], reports: {} },
    { spends: [{ ...SPEND, at: null }], reports: {} },
    { spends: [{ ...SPEND, round: 0.5 }], reports: {} },
    { spends: ["r"], reports: {} },
    { spends: [SPEND], reports: [REPORT] },
    { spends: [SPEND], reports: { r: { ...REPORT, ones: ["1"] } } },
    { spends: [SPEND], reports: { r: { ...REPORT, digest: 3 } } },
    { spends: {}, reports: {} },
  ];
  for (const state of corrupt) {
    await assert.rejects(DeviceBudget.open(stored(state), 100, 3600, () => 1500),
                         /the stored budget is corrupt: /, JSON.stringify(state));
  }
  const budget = await DeviceBudget.open(
    stored({ spends: [SPEND, { ...SPEND, round: 1, eps_local: 50 }], reports: { r: REPORT } }),
    100, 3600, () => 1500);
  assert.equal(budget.spent(), 90);
  await assert.rejects(budget.report(create(TaskSchema, { runId: "r", round: 2, epsLocal: 20 }),
                                     () => [1]), PrivacyError);
});
