/**
 * Test-only: the seeded per-device stream of the Python devices in test mode,
 * `fedhh.device.streams.device_stream(seed, round, user)` =
 * `numpy.random.default_rng(SeedSequence(seed, spawn_key=(5, round, user)))`, replayed exactly,
 * so a web device given `--seed`'s value draws the selection and the randomizer's words that
 * the Python device (and the per-device simulation) draws for the same user and round.
 *
 * - SeedSequence: numpy's hashmix entropy pool (pool of 4 32-bit words) and `generate_state`.
 * - PCG64: the 128-bit LCG with the XSL-RR output (numpy's default bit generator), seeded from
 *   `generate_state(4, uint64)`; `next_uint32` returns a 64-bit output's low half and keeps the
 *   high half for the next call, as numpy's `pcg64_next32` does.
 * - `Generator.integers`: `below(h)` is `integers(0, [h], dtype=int64)` (numpy's
 *   `random_bounded_uint64`, Lemire's method, through the 32-bit path when h - 1 < 2^32), and
 *   `uint32(n)` is `integers(0, 2^32, size=n, dtype=uint32)` (n calls of `next_uint32`).
 *
 * A deployed device never uses this: its draws come from `crypto.getRandomValues`
 * (src/selection.ts `systemDraws`). tests/web/test_web_vectors.py checks it against numpy.
 */

import type { DrawSource } from "../src/selection.js";

const M32 = 0xffffffffn;
const M64 = (1n << 64n) - 1n;
const M128 = (1n << 128n) - 1n;
const PCG_MULT = 0x2360ed051fc65da44385df649fccf645n;

const INIT_A = 0x43b0d7e5;
const MULT_A = 0x931e8875;
const INIT_B = 0x8b51f9dd;
const MULT_B = 0x58f38ded;
const MIX_MULT_L = 0xca01f9dd;
const MIX_MULT_R = 0x4973f715;
const POOL_SIZE = 4;

const mul32 = (a: number, b: number): number => Math.imul(a, b) >>> 0;

/** numpy's `_coerce_to_uint32_array` of a non-negative integer: 32-bit words, low first. */
function words32(value: bigint): number[] {
  if (value < 0n) throw new RangeError(`a seed must be non-negative, got ${value}`);
  if (value === 0n) return [0];
  const out: number[] = [];
  for (let v = value; v > 0n; v >>= 32n) out.push(Number(v & M32));
  return out;
}

/** numpy's SeedSequence(entropy, spawn_key=key).generate_state(nWords, uint32). */
export function seedSequenceState(entropy: bigint, spawnKey: readonly bigint[],
                                  nWords: number): Uint32Array {
  const run = words32(entropy);
  while (run.length < POOL_SIZE) run.push(0);
  const entropyArray = [...run, ...spawnKey.flatMap(words32)];
  let hashConst = INIT_A;
  const hashmix = (value: number): number => {
    let v = (value ^ hashConst) >>> 0;
    hashConst = mul32(hashConst, MULT_A);
    v = mul32(v, hashConst);
    return (v ^ (v >>> 16)) >>> 0;
  };
  const mix = (x: number, y: number): number => {
    const r = (mul32(MIX_MULT_L, x) - mul32(MIX_MULT_R, y)) >>> 0;
    return (r ^ (r >>> 16)) >>> 0;
  };
  const pool = new Array<number>(POOL_SIZE);
  for (let i = 0; i < POOL_SIZE; i++) pool[i] = hashmix(entropyArray[i] ?? 0);
  for (let src = 0; src < POOL_SIZE; src++) {
    for (let dst = 0; dst < POOL_SIZE; dst++) {
      if (src !== dst) pool[dst] = mix(pool[dst]!, hashmix(pool[src]!));
    }
  }
  for (let src = POOL_SIZE; src < entropyArray.length; src++) {
    for (let dst = 0; dst < POOL_SIZE; dst++) pool[dst] = mix(pool[dst]!, hashmix(entropyArray[src]!));
  }
  const out = new Uint32Array(nWords);
  let hash = INIT_B;
  for (let i = 0; i < nWords; i++) {
    let v = (pool[i % POOL_SIZE]! ^ hash) >>> 0;
    hash = mul32(hash, MULT_B);
    v = mul32(v, hash);
    out[i] = (v ^ (v >>> 16)) >>> 0;
  }
  return out;
}

/** numpy's PCG64 (XSL-RR 128/64) with its buffered 32-bit draws. */
export class Pcg64 {
  private state = 0n;
  private readonly inc: bigint;
  private spare: number | null = null;

  constructor(seed: bigint, spawnKey: readonly bigint[]) {
    const w = seedSequenceState(seed, spawnKey, 8);
    const u64 = (i: number): bigint => (BigInt(w[2 * i + 1]!) << 32n) | BigInt(w[2 * i]!);
    const initState = (u64(0) << 64n) | u64(1);
    const initSeq = (u64(2) << 64n) | u64(3);
    this.inc = ((initSeq << 1n) | 1n) & M128;
    this.step();
    this.state = (this.state + initState) & M128;
    this.step();
  }

  private step(): void {
    this.state = (this.state * PCG_MULT + this.inc) & M128;
  }

  next64(): bigint {
    this.step();
    const xored = ((this.state >> 64n) ^ this.state) & M64;
    const rot = this.state >> 122n;
    return ((xored >> rot) | (xored << ((64n - rot) & 63n))) & M64;
  }

  next32(): number {
    if (this.spare !== null) {
      const out = this.spare;
      this.spare = null;
      return out;
    }
    const next = this.next64();
    this.spare = Number(next >> 32n);
    return Number(next & M32);
  }

  /** numpy's `random_bounded_uint64(state, 0, rng, 0, use_masked=false)`: uniform in [0, rng]. */
  bounded(rng: bigint): bigint {
    if (rng === 0n) return 0n;
    if (rng <= M32) {
      if (rng === M32) return BigInt(this.next32());
      const excl = rng + 1n;
      let m = BigInt(this.next32()) * excl;
      let leftover = m & M32;
      if (leftover < excl) {
        const threshold = (M32 - rng) % excl;
        while (leftover < threshold) {
          m = BigInt(this.next32()) * excl;
          leftover = m & M32;
        }
      }
      return m >> 32n;
    }
    if (rng === M64) return this.next64();
    const excl = rng + 1n;
    let m = this.next64() * excl;
    let leftover = m & M64;
    if (leftover < excl) {
      const threshold = (M64 - rng) % excl;
      while (leftover < threshold) {
        m = this.next64() * excl;
        leftover = m & M64;
      }
    }
    return m >> 64n;
  }
}

const DEVICE = 5n; // fedhh.device.streams._DEVICE

/** `device_stream(seed, round, user)` as the DrawSource the report takes. */
export function deviceStream(seed: number | bigint, round: number, user: number): DrawSource {
  const pcg = new Pcg64(BigInt(seed), [DEVICE, BigInt(round), BigInt(user)]);
  return {
    below(high: number): number {
      if (!Number.isSafeInteger(high) || high <= 0) throw new RangeError(`cannot draw below ${high}`);
      return Number(pcg.bounded(BigInt(high) - 1n));
    },
    uint32(size: number): Uint32Array {
      const out = new Uint32Array(size);
      for (let i = 0; i < size; i++) out[i] = pcg.next32();
      return out;
    },
  };
}
