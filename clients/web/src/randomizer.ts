/**
 * The local randomizer of fedhh/device/randomizer.py: one-hot encoding plus asymmetric binary
 * randomized response with exact integer thresholds.
 *
 * A coordinate is 1 when its uniform 32-bit word is below its threshold: 2^31 for the selected
 * coordinate (a1 = 1/2 exactly) and m for every other one, with m the smallest integer such that
 * m / 2^32 >= 1 / (e^eps + 1). Rounding a0 up keeps the randomizer eps-LDP exactly.
 *
 * m must be the integer the Python library computes, or the server's estimator (which uses the
 * implemented a0) would be biased for web devices. Both compute the exact ceiling: here with
 * rigorous bigint interval bounds on e^eps, Python with decimal interval bounds, each doubling
 * its precision until both ends of the interval give the same ceiling (so they agree for every
 * double). From eps 64 on, both give 1 without evaluating e^eps (2^32 / (e^64 + 1) < 1;
 * Python's decimal exp overflowed above eps ~2.3e6).
 */

import type { WordSource } from "./random.js";

export const WORD_BITS = 32;
export const SCALE = 2 ** WORD_BITS;
export const A1_THRESHOLD = SCALE / 2;
const MAX_PRECISION_BITS = 1 << 14;

/** An exact binary decomposition of a positive finite double: value = mantissa * 2^exponent. */
function decompose(x: number): { mantissa: bigint; exponent: number } {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const biased = (view.getUint16(0) >> 4) & 0x7ff;
  const fraction = view.getBigUint64(0) & ((1n << 52n) - 1n);
  return biased === 0
    ? { mantissa: fraction, exponent: -1074 }
    : { mantissa: fraction | (1n << 52n), exponent: biased - 1075 };
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return (a + b - 1n) / b; // a >= 0, b > 0
}

/** ceil(2^32 / (e^eps + 1)) if precision P settles it, else null. */
function thresholdAt(eps: number, precision: number): bigint | null {
  const P = BigInt(precision);
  const S = 1n << P;
  // Argument reduction: e^eps = (e^z)^(2^r) with z = eps / 2^r <= 1/2 (exact: a power of 2).
  let r = 0;
  while (eps / 2 ** r > 0.5) r++;
  const { mantissa, exponent } = decompose(eps);
  const shift = BigInt(exponent - r) + P; // z * S = mantissa * 2^shift
  const zLo = shift >= 0n ? mantissa << shift : mantissa >> -shift;
  const zHi = shift >= 0n ? zLo : ceilDiv(mantissa, 1n << -shift);
  // Taylor series of e^z in fixed point: floors give a lower bound, ceilings an upper bound.
  let lo = S;
  let term = S;
  for (let n = 1n; term > 0n; n++) {
    term = (term * zLo) / (n * S);
    lo += term;
  }
  let hi = S;
  term = S;
  for (let n = 1n; term > 1n; n++) {
    term = ceilDiv(term * zHi, n * S);
    hi += term;
  }
  hi += 2n; // the tail after a term of at most 1 unit is below 1 unit, since z <= 1/2
  for (let i = 0; i < r; i++) {
    lo = (lo * lo) / S;
    hi = ceilDiv(hi * hi, S);
  }
  const numerator = BigInt(SCALE) * S * S;
  const valueLo = numerator / (hi + S); // 2^32 / (e^eps + 1), in units of 1/S
  const valueHi = ceilDiv(numerator, lo + S);
  const mLo = ceilDiv(valueLo, S);
  const mHi = ceilDiv(valueHi, S);
  return mLo === mHi ? mLo : null;
}

const cache = new Map<number, number>();

/** Smallest m with m / 2^32 >= 1 / (e^eps + 1): the implemented P[0 -> 1] is m / 2^32. */
export function a0Threshold(epsLocal: number): number {
  if (!(Number.isFinite(epsLocal) && epsLocal > 0)) {
    throw new RangeError(`eps_local must be a positive finite number, got ${epsLocal}`);
  }
  const known = cache.get(epsLocal);
  if (known !== undefined) return known;
  let m: bigint | null = null;
  if (epsLocal >= 64) {
    m = 1n; // 2^32 / (e^64 + 1) < 1, and the threshold is at least 1
  }
  for (let precision = 128; m === null; precision *= 2) {
    if (precision > MAX_PRECISION_BITS) {
      throw new Error(`a0 threshold of eps=${epsLocal} not settled at ${MAX_PRECISION_BITS} bits`);
    }
    m = thresholdAt(epsLocal, precision);
  }
  const threshold = Number(m > 1n ? m : 1n);
  cache.set(epsLocal, threshold);
  return threshold;
}

/**
 * The report's 1-bit positions (ascending) for one-hot `index` (null: nothing to report) over a
 * domain of size `dim`, with one 32-bit word per coordinate from `words`.
 */
export function randomize(epsLocal: number, index: number | null, dim: number,
                          words: WordSource): number[] {
  if (!Number.isInteger(dim) || dim < 1) throw new RangeError(`domain size must be >= 1, got ${dim}`);
  if (index !== null && !(Number.isInteger(index) && index >= 0 && index < dim)) {
    throw new RangeError(`selected index ${index} is outside the domain [0, ${dim})`);
  }
  const threshold0 = a0Threshold(epsLocal);
  const drawn = words.uint32(dim);
  if (drawn.length !== dim) throw new Error(`the word source gave ${drawn.length} of ${dim} words`);
  const ones: number[] = [];
  for (let i = 0; i < dim; i++) {
    if (drawn[i]! < (i === index ? A1_THRESHOLD : threshold0)) ones.push(i);
  }
  return ones;
}
