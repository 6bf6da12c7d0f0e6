/**
 * The cap is compared with the exact sum of the reports' epsilons, as the Python device compares
 * it (tests/unit/device/test_device_budget.py, the same cases): ten reports of 0.1 exceed a cap of
 * 1.0, and a sum 5e-10 over the cap is over it. Before, a float sum (0.9999999999999999 for the
 * ten) was compared with the cap times 1 + 1e-9, and both were answered.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import {
  DeviceBudget, MemoryBudgetStore, PrivacyError, exactUnits, exceeds,
} from "../src/budget.js";
import { TaskSchema } from "../src/gen/fedhh/v1/coordinator_pb.js";

const task = (round: number, epsLocal: number) =>
  create(TaskSchema, { runId: "r", round, epsLocal });

test("ten reports of 0.1 exceed a cap of 1.0; a sum 5e-10 over the cap is over it", async () => {
  const budget = await DeviceBudget.open(new MemoryBudgetStore(), 1.0, 100, () => 0);
  for (let round = 0; round < 9; round++) await budget.report(task(round, 0.1), () => [1]);
  await assert.rejects(budget.report(task(9, 0.1), () => [1]), (error: Error) => {
    assert.ok(error instanceof PrivacyError);
    // (the float sum, 1.0, is within the cap: the refusal says why in figures, as Python's)
    assert.equal(error.message, "this device's budget is spent: 0.9 of 1.0 used in the period, " +
                                "the task asks for 0.1, and their exact sum, " +
                                "1.000000000000000055511151231257827..., is above the cap 1.0 " +
                                "by 5.551e-17 (a charge is the binary value of its double: 0.1 " +
                                "is 0.1000000000000000055511151231257827...)");
    return true;
  });

  const over = await DeviceBudget.open(new MemoryBudgetStore(), 1.0, 100, () => 0);
  await over.report(task(1, 0.5), () => [1]);
  await assert.rejects(over.report(task(2, 0.5000000005), () => [1]), PrivacyError);

  const dyadic = await DeviceBudget.open(new MemoryBudgetStore(), 1.0, 100, () => 0);
  for (let round = 0; round < 4; round++) await dyadic.report(task(round, 0.25), () => [1]);
  assert.equal(dyadic.spent(), 1);
});

test("exact units are the doubles' binary values", () => {
  assert.equal(exactUnits(0), 0n);
  assert.equal(exactUnits(5e-324), 1n);
  assert.equal(exactUnits(2 ** -1022), 1n << 52n);
  assert.equal(exactUnits(1), 1n << 1074n);
  assert.equal(exactUnits(-0.5), -(1n << 1073n));
  // 0.1 = 3602879701896397 / 2^55
  assert.equal(exactUnits(0.1), 3602879701896397n << 1019n);
  assert.equal(exceeds(Array(10).fill(0.1), 1), true);
  assert.equal(exceeds(Array(9).fill(0.1), 0.9), true); // 9 x 0.1 is above the double 0.9
  assert.equal(exceeds([0.1, 0.2], 0.30000000000000004), false);
  assert.equal(exceeds([Number.MAX_VALUE, Number.MAX_VALUE], Number.MAX_VALUE), true);
  // (as Python's exceeds: no exception for what cannot be summed exactly)
  assert.equal(exceeds([1, Number.POSITIVE_INFINITY], 10), true);
  assert.equal(exceeds([1, Number.NaN], 10), true);
  assert.equal(exceeds([Number.MAX_VALUE], Number.POSITIVE_INFINITY), false);
  assert.equal(exceeds([1], Number.NaN), true);
});
