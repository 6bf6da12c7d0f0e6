/**
 * Test-only randomness: the Python library's DeterministicRandom (AES-256-CTR keystream with a
 * zero counter block under a 32-byte key), replayed from a vector's `stream_key`, so a seeded
 * TypeScript computation consumes exactly the bytes the Python one did. Node's crypto gives a
 * synchronous streaming cipher; no deployed device ever uses this.
 */

import { createCipheriv } from "node:crypto";

import { type Bytes, fromHex } from "../src/bytes.js";
import type { RandomSource } from "../src/random.js";

export function replay(streamKeyHex: string): RandomSource {
  const cipher = createCipheriv("aes-256-ctr", fromHex(streamKeyHex), new Uint8Array(16));
  return (n: number): Bytes => Uint8Array.from(cipher.update(new Uint8Array(n)));
}

/** A source that hands out exactly the given bytes, then fails (e.g. one recorded nonce). */
export function fixed(...chunks: Uint8Array[]): RandomSource {
  const queue = [...chunks];
  return (n: number): Bytes => {
    const next = queue.shift();
    if (next === undefined || next.length !== n) {
      throw new Error(`fixed source: asked for ${n} bytes, had ${next?.length ?? "none"}`);
    }
    return Uint8Array.from(next);
  };
}
