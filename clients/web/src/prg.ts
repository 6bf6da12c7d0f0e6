/**
 * The mask generator of fedhh/secagg/prg.py: AES-128-CTR keystream read as little-endian
 * uint16 or uint32 words.
 *
 * A mask of dimension D modulo 2^b is the first D*b/8 bytes of the AES-128-CTR keystream under a
 * 16-byte key with the all-zero initial counter block (the whole 128-bit block is the counter, as
 * in OpenSSL). Every key is used for one mask only (HKDF with the session id as salt and the ids
 * as info), so the zero IV is safe. The keystream comes from WebCrypto in chunks; a chunk that
 * starts at byte offset o starts at counter block o / 16.
 */

import { type Bytes, concat, own, u32 } from "./bytes.js";
import { LABELS, hkdf } from "./primitives.js";

export const MASK_KEY_BYTES = 16;
export const MAX_DIMENSION = 1 << 24;
const CHUNK_BYTES = 1 << 20; // bounds the scratch memory of one WebCrypto call

export type ModulusBits = 16 | 32;
/** A vector modulo 2^16 or 2^32; typed-array stores wrap, which is the modular arithmetic. */
export type MaskVector = Uint16Array | Uint32Array;

// Browsers and Node run on little-endian hosts; the fast path reads the keystream in place.
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export function checkModulusBits(bits: number): ModulusBits {
  if (bits !== 16 && bits !== 32) throw new RangeError(`modulus_bits must be 16 or 32, got ${bits}`);
  return bits;
}

/** The PRG key of device `deviceId`'s self mask PRG(b_u). */
export function selfMaskKey(bSecret: Uint8Array, sessionId: Uint8Array,
                            deviceId: number): Promise<Bytes> {
  return hkdf(bSecret, sessionId, concat(LABELS.self, u32(deviceId)), MASK_KEY_BYTES);
}

/** The PRG key of the pairwise mask between u and v from their X25519 secret. */
export function pairMaskKey(sharedSecret: Uint8Array, sessionId: Uint8Array, u: number,
                            v: number): Promise<Bytes> {
  const [lo, hi] = u < v ? [u, v] : [v, u];
  return hkdf(sharedSecret, sessionId, concat(LABELS.pair, u32(lo), u32(hi)), MASK_KEY_BYTES);
}

export function zeros(dimension: number, bits: ModulusBits): MaskVector {
  if (!Number.isInteger(dimension) || dimension < 1 || dimension > MAX_DIMENSION) {
    throw new RangeError(`dimension must be in [1, ${MAX_DIMENSION}], got ${dimension}`);
  }
  return bits === 16 ? new Uint16Array(dimension) : new Uint32Array(dimension);
}

function counterBlock(blockIndex: number): Bytes {
  // Offsets stay below 2^26 bytes (D <= 2^24 words of 4 bytes), so the index fits 32 bits.
  const block = new Uint8Array(16);
  new DataView(block.buffer).setUint32(12, blockIndex, false);
  return block;
}

/** `acc += sign * PRG(key) mod 2^b` in place (sign +1 or -1). */
export async function addMask(acc: MaskVector, key: Uint8Array, sign: 1 | -1 = 1): Promise<void> {
  if (key.length !== MASK_KEY_BYTES) {
    throw new RangeError(`mask key must be ${MASK_KEY_BYTES} bytes, got ${key.length}`);
  }
  if (sign !== 1 && sign !== -1) throw new RangeError(`sign must be +1 or -1, got ${sign}`);
  const itemsize = acc.BYTES_PER_ELEMENT;
  const cryptoKey = await globalThis.crypto.subtle.importKey(
    "raw", own(key), "AES-CTR", false, ["encrypt"]);
  const total = acc.length * itemsize;
  for (let offset = 0; offset < total; offset += CHUNK_BYTES) {
    const nbytes = Math.min(CHUNK_BYTES, total - offset);
    const stream = await globalThis.crypto.subtle.encrypt(
      { name: "AES-CTR", counter: counterBlock(offset / 16), length: 128 }, cryptoKey,
      new Uint8Array(nbytes));
    const start = offset / itemsize;
    const count = nbytes / itemsize;
    const words = LITTLE_ENDIAN
      ? (itemsize === 2 ? new Uint16Array(stream) : new Uint32Array(stream))
      : littleEndianWords(new DataView(stream), itemsize, count);
    if (sign === 1) {
      for (let i = 0; i < count; i++) acc[start + i] = acc[start + i]! + words[i]!;
    } else {
      for (let i = 0; i < count; i++) acc[start + i] = acc[start + i]! - words[i]!;
    }
  }
}

function littleEndianWords(view: DataView, itemsize: number, count: number): number[] {
  const out = new Array<number>(count);
  for (let i = 0; i < count; i++) {
    out[i] = itemsize === 2 ? view.getUint16(2 * i, true) : view.getUint32(4 * i, true);
  }
  return out;
}

/** PRG(key) as a new vector (tests and known-answer vectors; a device accumulates with addMask). */
export async function generateMask(key: Uint8Array, dimension: number,
                                   bits: ModulusBits): Promise<MaskVector> {
  const out = zeros(dimension, bits);
  await addMask(out, key);
  return out;
}

/** The little-endian wire bytes of a vector (numpy's "<u2"/"<u4" tobytes()). */
export function vectorBytes(vector: MaskVector): Bytes {
  const out = new Uint8Array(vector.length * vector.BYTES_PER_ELEMENT);
  const view = new DataView(out.buffer);
  for (let i = 0; i < vector.length; i++) {
    if (vector.BYTES_PER_ELEMENT === 2) view.setUint16(2 * i, vector[i]!, true);
    else view.setUint32(4 * i, vector[i]!, true);
  }
  return out;
}
