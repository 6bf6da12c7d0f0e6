/**
 * Test-only randomness: the Python library's DeterministicRandom (AES-256-CTR keystream with a
 * zero counter block under a 32-byte key), replayed from a vector's `stream_key`, so a seeded
 * TypeScript computation consumes exactly the bytes the Python one did. The keystream is made
 * up front with WebCrypto, so the same helper runs in Node and in the browser; no deployed
 * device ever uses it.
 */

import { type Bytes, fromHex } from "../src/bytes.js";
import type { RandomSource } from "../src/random.js";

/** A source replaying the first `limit` bytes of the stream (a round needs a few hundred). */
export async function replay(streamKeyHex: string, limit = 8192): Promise<RandomSource> {
  const key = await globalThis.crypto.subtle.importKey("raw", fromHex(streamKeyHex), "AES-CTR",
                                                      false, ["encrypt"]);
  const stream = new Uint8Array(await globalThis.crypto.subtle.encrypt(
    { name: "AES-CTR", counter: new Uint8Array(16), length: 128 }, key, new Uint8Array(limit)));
  let offset = 0;
  return (n: number): Bytes => {
    if (offset + n > limit) throw new Error(`replayed stream exhausted (${limit} bytes)`);
    offset += n;
    return stream.slice(offset - n, offset);
  };
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
