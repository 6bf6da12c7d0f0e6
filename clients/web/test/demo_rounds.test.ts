/**
 * The demo page's "rounds contributed": rounds, not attempts. Before, an attempt the device
 * sent its input to and that then aborted was counted beside the round's attempt that
 * completed (5 shown for 4 rounds).
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { roundsContributed } from "../demo/rounds.js";

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
