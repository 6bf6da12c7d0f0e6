/**
 * The demo page's "rounds contributed": rounds, not attempts. Before, an attempt the device
 * sent its input to and that then aborted was counted beside the round's attempt that
 * completed (5 shown for 4 rounds).
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  inTheSum, LATE_IN_A_ROW, lateAdvice, lateInARow, roundsContributed,
} from "../demo/rounds.js";

test("an aborted attempt the device contributed to is not a round contributed", () => {
  const tasks = [
    { outcome: "completed", contributed: true },
    { outcome: "round_aborted", contributed: true },  // round 2, attempt 0
    { outcome: "completed", contributed: true },  // round 2, attempt 1
    { outcome: "completed", contributed: true },
    { outcome: "late", contributed: false },
    { outcome: "completed", contributed: true },
  ] as const;
  assert.equal(roundsContributed(tasks), 4);
  assert.equal(roundsContributed([]), 0);
});

test("a device late round after round is told what to do, once it is LATE_IN_A_ROW times", () => {
  const late = { outcome: "late", contributed: false } as const;
  const tasks = [{ outcome: "completed", contributed: true } as const,
                 ...Array.from({ length: LATE_IN_A_ROW }, () => late)];
  assert.equal(lateInARow(tasks), LATE_IN_A_ROW);
  assert.match(lateAdvice(tasks), new RegExp(`^late in its last ${LATE_IN_A_ROW} rounds in a ` +
                                             "row: each spent its report's ε.*--stage-ms\\)$"));
  assert.equal(lateAdvice(tasks.slice(0, -1)), "");
  // Its masked input accepted before the stage closed: its report is in the sum.
  assert.equal(lateInARow([...tasks, { outcome: "late", contributed: true }]), 0);
  assert.equal(lateInARow([...tasks, { outcome: "completed", contributed: true }]), 0);
});

test("an input accepted in an attempt fedhh up says was released counts, whatever came after", () => {
  // Its answer to the unmask stage came late: the device's outcome is `late`, its input in the
  // sum of round 2, which fedhh up's progress names as released. Before, left out.
  const tasks = [
    { task: "demo round 1.1", outcome: "completed", contributed: true },
    { task: "demo round 2.1", outcome: "late", contributed: true },
    { task: "demo round 3.1", outcome: "late", contributed: true },  // not released
    { task: "demo round 4.1", outcome: "late", contributed: false },  // released, input not in
  ] as const;
  const released = new Set(["demo round 1.1", "demo round 2.1", "demo round 4.1"]);
  assert.equal(roundsContributed(tasks, released), 2);
  assert.equal(roundsContributed(tasks), 1);
  assert.ok(inTheSum(tasks[1], released) && !inTheSum(tasks[2], released));
  assert.ok(!inTheSum(tasks[3], released));
});
