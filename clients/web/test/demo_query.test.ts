/**
 * What the demo page says of a round's query (demo/query.ts): the prefix list's size, the
 * segment length, the size of the report the device uploads (the masked vector: one 16-bit
 * entry per element of the domain, prefixes * 2^segment_bits) and the task's local epsilon.
 * Before, the page showed none of it. A task the device will refuse is told before its checks:
 * it is said to be unreadable, with the reason, never thrown into the page's event handler.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { type Task, TaskSchema } from "../src/gen/fedhh/v1/coordinator_pb.js";
import { ed25519PublicFromSeed } from "../src/primitives.js";
import { queryText } from "../demo/query.js";
import { signedRound } from "./cohort.js";

const SEED = new Uint8Array(32).fill(5);

async function taskOf(prefixes: bigint[], segmentBits: number, epsLocal: number,
                      dimension = prefixes.length * 2 ** segmentBits): Promise<Task> {
  const own = [ed25519PublicFromSeed(new Uint8Array(32).fill(2)), new Uint8Array(32).fill(3),
               new Uint8Array(32).fill(4)] as const;
  const { config } = await signedRound(
    { n: 3, nMin: 3, k: 2, t: 2, dimension, deadlines: [1n, 2n, 3n, 4n, 5n] }, [...own], SEED);
  return create(TaskSchema, {
    runId: "run", round: 2, attempt: 1, prefixBits: 4, prefixes, segmentBits, epsLocal,
    maxBits: 10, roundConfig: config }) as Task;
}

test("the page names the prefixes, the segment, the report's bytes and the epsilon", async () => {
  assert.equal(queryText(await taskOf([3n, 5n, 9n], 5, 1.5)),
               "3 prefixes of 4 bits, segment 5 bits; report 192 bytes at local ε 1.5");
  assert.equal(queryText(await taskOf([3n], 1, 0.000123456)),
               "1 prefix of 4 bits, segment 1 bit; report 4 bytes at local ε 0.0001235");
  assert.equal(queryText(await taskOf([1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n], 6, 2)),
               "8 prefixes of 4 bits, segment 6 bits; report 1,024 bytes at local ε 2");
});

test("a query the device will refuse is said to be unreadable, not thrown", async () => {
  assert.match(queryText(await taskOf([5n, 3n], 5, 1, 64)),
               /^a query this device cannot read \(task prefix or deny list .*not strictly ascending\)$/);
  const noConfig = await taskOf([3n], 5, 1);
  noConfig.roundConfig = new Uint8Array(0);
  assert.match(queryText(noConfig), /^a query this device cannot read \(not a RoundConfig/);
});
