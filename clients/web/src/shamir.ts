/**
 * Shamir secret sharing over GF(p), p = 2^256 + 297, as fedhh/secagg/shamir.py.
 *
 * A share is (x, y) with x the holder's position in the owner's roster (1..k, ascending ids)
 * and y = f(x) in [0, p), sent as 33 big-endian bytes. f is a uniformly random polynomial of
 * degree <= t - 1 with f(0) = the secret, drawn as its forward differences at 0 (Newton's form,
 * see `shareMany`) from the RandomSource in the same order and by the same rejection sampling as
 * in Python (33 bytes, masked to 257 bits, redrawn while >= p), so one seeded stream gives
 * identical shares in both implementations; that is what the cross-implementation vectors check.
 */

import { type Bytes, bigToBytes, bytesToBig } from "./bytes.js";
import type { RandomSource } from "./random.js";

export const PRIME = (1n << 256n) + 297n;
export const SECRET_BYTES = 32;
export const SHARE_BYTES = 33;
const SECRET_BOUND = 1n << 256n;
const PRIME_BITS = 257; // PRIME.bit_length()
const DRAW_BYTES = Math.ceil(PRIME_BITS / 8);
const DRAW_MASK = (1n << BigInt(PRIME_BITS)) - 1n;

/** A share or set of shares is malformed, or the points reconstruct no 32-byte secret. */
export class ShareError extends Error {
  override name = "ShareError";
}

function mod(a: bigint, m: bigint): bigint {
  const r = a % m;
  return r < 0n ? r + m : r;
}

/** a^e mod m by square-and-multiply (inversion below is Fermat's: a^(p-2)). */
function modPow(base: bigint, exponent: bigint, m: bigint): bigint {
  let result = 1n;
  let b = mod(base, m);
  let e = exponent;
  while (e > 0n) {
    if (e & 1n) result = (result * b) % m;
    b = (b * b) % m;
    e >>= 1n;
  }
  return result;
}

/**
 * `count` uniform elements of GF(prime) by rejection sampling, drawn exactly as Python's
 * `shamir._random_elements` draws them (the same rand calls, candidates and order): a batch of
 * twice the missing count plus 8 candidates per call, the rest of the last batch unused.
 */
function randomElements(rand: RandomSource, prime: bigint, count: number): bigint[] {
  const out: bigint[] = [];
  while (out.length < count) {
    const batch = rand(DRAW_BYTES * (2 * (count - out.length) + 8));
    for (let offset = 0; offset + DRAW_BYTES <= batch.length; offset += DRAW_BYTES) {
      const candidate = bytesToBig(batch.subarray(offset, offset + DRAW_BYTES)) & DRAW_MASK;
      if (candidate < prime) {
        out.push(candidate);
        if (out.length === count) break;
      }
    }
  }
  return out;
}

function checkPoints(xs: readonly number[]): void {
  if (new Set(xs).size !== xs.length || xs.some((x) => !Number.isSafeInteger(x) || x <= 0)) {
    throw new ShareError("share points must be distinct and non-zero");
  }
}

/** The y values f(x) for each x of a fresh random polynomial with f(0) = secret. */
export function share(secret: bigint, threshold: number, xs: readonly number[],
                      rand: RandomSource): bigint[] {
  return shareMany([secret], threshold, xs, rand)[0]!;
}

/**
 * `share` of each secret among the same points, each with its own fresh random polynomial:
 * `result[j][i]` is f_j(xs[i]), as Python's `shamir.share_many` (a device shares b_u and its
 * mask key together). Each f_j(x) = sum_i D_i C(x, i), D_0 the secret and D_1..D_{t-1} (its
 * forward differences at 0) secret j's share of one `randomElements` draw: the binomials are a
 * basis of the polynomials of degree < t over GF(p), so uniform differences are uniform
 * coefficients. The points 1..k step the difference table (additions only); others sum the
 * Newton form directly.
 */
export function shareMany(secrets: readonly bigint[], threshold: number, xs: readonly number[],
                          rand: RandomSource): bigint[][] {
  for (const secret of secrets) {
    if (secret < 0n || secret >= PRIME) {
      throw new ShareError(
        `secret must be in [0, p), got a ${secret.toString(2).length}-bit value`);
    }
  }
  if (!Number.isInteger(threshold) || threshold < 1 || threshold > xs.length) {
    throw new ShareError(`threshold must be in [1, ${xs.length}], got ${threshold}`);
  }
  checkPoints(xs);
  const degree = threshold - 1;
  const differences = randomElements(rand, PRIME, secrets.length * degree);
  const tables = secrets.map((secret, j) =>
    [secret, ...differences.slice(j * degree, (j + 1) * degree)]);
  if (xs.every((x, i) => x === i + 1)) {
    return tables.map((table) => valuesAtOneTo(table, xs.length));
  }
  return tables.map((table) => xs.map((x) => newtonValue(table, BigInt(x)) % PRIME));
}

/**
 * f(1..count) from table[i] = Delta^i f(0): each step Delta^i f(x + 1) = Delta^i f(x) +
 * Delta^(i+1) f(x) for every i at once, kept exact (Delta^i f(x) < p 2^x) and reduced as each
 * f(x) is read (Python packs the table into one integer; here one bigint per row).
 */
function valuesAtOneTo(row: bigint[], count: number): bigint[] {
  // (steps the caller's fresh table in place)
  const values: bigint[] = [];
  for (let x = 1; x <= count; x++) {
    for (let i = 0; i + 1 < row.length; i++) row[i] = row[i]! + row[i + 1]!;
    values.push(row[0]! % PRIME);
  }
  return values;
}

/** sum_i table[i] C(x, i), exactly (C(x, i) = 0 for i > x). */
function newtonValue(table: bigint[], x: bigint): bigint {
  let total = table[0]!;
  let binomial = 1n;
  for (let i = 1; i < table.length; i++) {
    binomial = binomial * (x - BigInt(i) + 1n) / BigInt(i);
    if (binomial === 0n) break;
    total += table[i]! * binomial;
  }
  return total;
}

/** f(0) from the points (x, f(x)); throws ShareError if it is >= 2^256. */
export function reconstruct(points: ReadonlyArray<readonly [number, bigint]>): bigint {
  if (points.length === 0) throw new ShareError("reconstruction needs at least one share");
  const xs = points.map(([x]) => x);
  checkPoints(xs);
  if (points.some(([, y]) => y < 0n || y >= PRIME)) {
    throw new ShareError("share values must be in [0, p)");
  }
  // Lagrange at 0: lambda_i = prod_{j != i} x_j / (x_j - x_i), exact integers mod p.
  let secret = 0n;
  for (const [i, [xi, yi]] of points.entries()) {
    let num = 1n;
    let den = 1n;
    for (const [j, xj] of xs.entries()) {
      if (j === i) continue;
      num = (num * BigInt(xj)) % PRIME;
      den = mod(den * BigInt(xj - xi), PRIME);
    }
    secret = (secret + yi * num % PRIME * modPow(den, PRIME - 2n, PRIME)) % PRIME;
  }
  if (secret >= SECRET_BOUND) {
    throw new ShareError("shares reconstruct a value >= 2^256: a share is corrupt");
  }
  return secret;
}

/** 33 big-endian bytes of a share value. */
export function encodeShare(y: bigint): Bytes {
  return bigToBytes(y, SHARE_BYTES);
}

/** Inverse of encodeShare; rejects a wrong length or a value >= p. */
export function decodeShare(data: Uint8Array): bigint {
  if (data.length !== SHARE_BYTES) throw new ShareError(`a share is ${SHARE_BYTES} bytes`);
  const y = bytesToBig(data);
  if (y >= PRIME) throw new ShareError("share value >= p");
  return y;
}
