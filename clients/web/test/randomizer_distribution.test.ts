/**
 * The production randomness of a report (`systemWords`, `systemDraws`: crypto.getRandomValues)
 * gives the distribution of the Python device's report, statistically: a coordinate is 1 with
 * probability a1 = 2^31 / 2^32 if it is the selected one and a0 = m / 2^32 otherwise, with m
 * Python's threshold as `vectors/python.json` records it (the estimator's rational a0), each
 * coordinate independently, in every part of a vector longer than one getRandomValues call
 * (65536 bytes, 16384 words); and the selection draws an entry with probability count / total
 * (weighted) or 1 / entries (uniform), on both paths of the bounded draw (below and above 2^32).
 *
 * The byte-exact vectors replay recorded words, so they never exercise these sources. Each
 * check bounds a sum of N independent Bernoulli(p) by Bernstein's inequality at a false-failure
 * rate of DELTA = 2.5e-8; the file makes 22 such checks, so it fails by chance with probability
 * below 1e-6 (5.5e-7). A source that repeats or zeroes words, a chunk left unfilled, a
 * threshold off by a factor, or a modulo-biased draw fails it.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { systemWords } from "../src/random.js";
import { A1_THRESHOLD, SCALE, randomize } from "../src/randomizer.js";
import { type RoundQuery, belowFromWords, selectEntry, systemDraws } from "../src/selection.js";

const DELTA = 2.5e-8;

/** Fails unless `count` successes of `n` Bernoulli(p) trials are within Bernstein's bound:
 * P(|S - np| >= x) <= 2 exp(-x^2 / (2 (np(1-p) + x/3))) = DELTA. */
function binomial(count: number, n: number, p: number, what: string): void {
  const L = Math.log(2 / DELTA);
  const bound = L / 3 + Math.sqrt(L * L / 9 + 2 * L * n * p * (1 - p));
  const off = Math.abs(count - n * p);
  assert.ok(off <= bound, `${what}: ${count} of ${n}, expected ${(n * p).toFixed(1)} ± ` +
                          `${bound.toFixed(1)} (p = ${p})`);
}

/** Python's thresholds m for two local epsilons (recorded in the vectors). */
function pythonThresholds(): Array<{ eps: number; threshold0: number }> {
  const vectors = JSON.parse(readFileSync(new URL("../../vectors/python.json", import.meta.url),
                                          "utf8")) as {
    randomizer: { thresholds: Array<{ eps: number; threshold0: number }> } };
  const pick = (lo: number, hi: number) => {
    const found = vectors.randomizer.thresholds.find((t) => t.eps >= lo && t.eps <= hi);
    assert.ok(found !== undefined, `the vectors hold a threshold for eps in [${lo}, ${hi}]`);
    return found;
  };
  return [pick(0.5, 2), pick(3, 8)];
}

test("a report's selected and other coordinates are 1 with Python's a1 and a0", () => {
  for (const { eps, threshold0 } of pythonThresholds()) {
    // Dimension 2, the selected coordinate alternating: 40,000 reports.
    const reports = 40_000;
    let selected = 0;
    let other = 0;
    for (let r = 0; r < reports; r++) {
      const index = r & 1;
      for (const one of randomize(eps, index, 2, systemWords)) {
        if (one === index) selected++;
        else other++;
      }
    }
    binomial(selected, reports, A1_THRESHOLD / SCALE, `eps ${eps}: selected coordinates`);
    binomial(other, reports, threshold0 / SCALE, `eps ${eps}: other coordinates`);
  }
});

test("every part of a vector longer than one getRandomValues call has Python's a0", () => {
  const [{ eps, threshold0 }] = pythonThresholds() as [{ eps: number; threshold0: number }];
  const a0 = threshold0 / SCALE;
  // 40,000 words a report: three calls of getRandomValues (16,384 words each at most).
  const dim = 40_000;
  const blocks = [0, 16_384, 32_768, dim];
  const ones = [0, 0, 0];
  const reports = 60;
  let both = 0;  // coordinates 1 in both reports of a pair (2r, 2r + 1): a0^2 if words are fresh
  for (let r = 0; r < reports; r += 2) {
    const pair = [randomize(eps, null, dim, systemWords), randomize(eps, null, dim, systemWords)];
    for (const report of pair) {
      for (const one of report) ones[one < blocks[1]! ? 0 : one < blocks[2]! ? 1 : 2]!++;
    }
    const first = new Set(pair[0]);
    both += pair[1]!.filter((one) => first.has(one)).length;
  }
  ones.forEach((count, b) => binomial(count, reports * (blocks[b + 1]! - blocks[b]!), a0,
                                      `words ${blocks[b]}-${blocks[b + 1]! - 1}`));
  // Words given again (a source that repeats itself) would make this a0, not a0^2.
  binomial(both, (reports / 2) * dim, a0 * a0, "ones shared by two reports");
});

test("the selection draws entries as the Python device: count / total, or uniformly", () => {
  const query: RoundQuery = { round: 1, prefixBits: 0, prefixes: [], segmentBits: 2, deny: [],
                              maxBits: 2 };
  const codes = [0n, 1n, 2n, 3n];
  const counts = [1, 2, 3, 4];
  const draws = 20_000;
  for (const rule of ["weighted", "uniform"] as const) {
    const seen = [0, 0, 0, 0];
    for (let i = 0; i < draws; i++) {
      const { entry, index } = selectEntry(codes, counts, query, rule, false, systemDraws);
      assert.equal(index, entry);  // the one-hot index of code c is c here
      seen[entry!]!++;
    }
    seen.forEach((count, e) => binomial(count, draws, rule === "weighted" ? counts[e]! / 10 : 1 / 4,
                                        `${rule}: entry ${e}`));
  }
});

test("a bounded draw is uniform below and above 2^32 (no modulo bias)", () => {
  // 3 * 2^31 below 2^32 (a modulo draw would give the first third half of the draws), and
  // 3 * 2^51 + 1 above it (the 64-bit path).
  for (const high of [3 * 2 ** 31, 3 * 2 ** 51 + 1]) {
    const draws = 30_000;
    const thirds = [0, 0, 0];
    for (let i = 0; i < draws; i++) {
      const x = belowFromWords(high, systemWords);
      assert.ok(Number.isSafeInteger(x) && x >= 0 && x < high, String(x));
      thirds[Math.min(2, Math.floor((x / high) * 3))]!++;
    }
    thirds.forEach((count, k) => binomial(count, draws, 1 / 3, `below ${high}: third ${k}`));
  }
});
