/**
 * A masked vector travels in one unary call (SubmitMaskedVector), so the call's deadline must
 * leave its body the time the aggregator itself allows an upload (its least rate, 64 KiB/s,
 * after a 5 s grace). Before, the deadline was the 55 s hold plus 30 s, whatever the size: a
 * 16 MiB vector over a 1 Mbit/s link was cut by the device's own deadline and sent again,
 * whole, until its stage closed.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { maskedVectorTimeoutMs } from "../src/round.js";

test("a masked vector's call gives its upload the aggregator's least rate before its deadline", () => {
  // 16 MiB, the aggregator's receive cap: 256 s at 64 KiB/s, the rate the aggregator still
  // takes, then its 5 s grace, the 55 s hold of the next stage's request and 30 s for the answer.
  assert.equal(maskedVectorTimeoutMs(16 << 20, 55_000, 30_000), 5_000 + 256_000 + 85_000);
  // (before, 85 s: a 16 MiB vector over 1 Mbit/s, 134 s, was cut and sent again, whole, until
  // its stage closed)
  assert.ok(maskedVectorTimeoutMs(16 << 20, 55_000, 30_000) > (16 << 20) / (1e6 / 8) * 1000 + 85_000);
  // A small vector keeps about the deadline of the other calls.
  assert.equal(maskedVectorTimeoutMs(16_384, 55_000, 30_000), 5_000 + 250 + 85_000);
  assert.equal(maskedVectorTimeoutMs(0, 0, 30_000), 35_000);
});
