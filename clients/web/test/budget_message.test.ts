/**
 * A refused report's reason is worded as the Python device words it (budget.py: 4 significant
 * digits), since a page shows it to its user: it showed the float sum, "95.99490000000001 of
 * 100", where the Python device says "95.99 of 100".
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
      assert.equal(error.message, "this device's budget is spent: 95.99 of 100 used in the " +
                                  "period, the task asks for 10.67");
      return true;
    });
});
