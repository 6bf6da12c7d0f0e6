/**
 * Randomness of a deployed web device: the browser's CSPRNG (`crypto.getRandomValues`).
 *
 * Mirrors the two Python interfaces: `RandomSource` of fedhh.secagg.primitives (`n -> n bytes`,
 * for keys, Shamir coefficients and nonces) and the word source of fedhh.device.randomness
 * (uniform 32-bit words for the randomizer's coin flips). A seeded source exists only in the
 * tests: a seed the server knew would undo local differential privacy and reveal every key.
 */

import type { Bytes } from "./bytes.js";

/** `rand(n)` returns n uniformly random bytes. */
export type RandomSource = (n: number) => Bytes;

/** What the randomizer draws from: independent uniform 32-bit words. */
export interface WordSource {
  uint32(size: number): Uint32Array;
}

// getRandomValues fills at most 65536 bytes per call (a QuotaExceededError above that).
const MAX_DRAW = 65536;

function fill(out: Uint8Array): void {
  for (let offset = 0; offset < out.length; offset += MAX_DRAW) {
    globalThis.crypto.getRandomValues(out.subarray(offset, Math.min(out.length, offset + MAX_DRAW)));
  }
}

/** The production byte source. */
export const systemRandom: RandomSource = (n: number): Bytes => {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`cannot draw ${n} bytes`);
  const out = new Uint8Array(n);
  fill(out);
  return out;
};

/** The production word source (a deployed device's coin flips). */
export const systemWords: WordSource = {
  uint32(size: number): Uint32Array {
    if (!Number.isInteger(size) || size < 0) throw new RangeError(`cannot draw ${size} words`);
    const out = new Uint32Array(size);
    fill(new Uint8Array(out.buffer));
    return out;
  },
};

/**
 * Uniform in [0, 1) from crypto.getRandomValues: the backoff jitter of retried calls. (Not a
 * privacy need: every draw of a deployed device comes from the browser's CSPRNG, so there is
 * no other generator to audit.)
 */
export const systemJitter = (): number => systemWords.uint32(1)[0]! / 2 ** 32;
