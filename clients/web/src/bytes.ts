/** Byte helpers shared by every module: the encodings the Python library uses on the wire. */

/** A byte array backed by a plain ArrayBuffer (what WebCrypto accepts as a BufferSource). */
export type Bytes = Uint8Array<ArrayBuffer>;

/** Big-endian unsigned 32-bit encoding (ids and counts in every label and transcript). */
export function u32(value: number): Bytes {
  if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw new RangeError(`u32 needs an integer in [0, 2^32), got ${value}`);
  }
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, value, false);
  return out;
}

export function concat(...parts: Uint8Array[]): Bytes {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** A copy on a fresh ArrayBuffer (noble and views over shared buffers return other kinds). */
export function own(data: Uint8Array): Bytes {
  return Uint8Array.from(data);
}

export function utf8(text: string): Bytes {
  return own(new TextEncoder().encode(text));
}

export function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

export function toHex(data: Uint8Array): string {
  return Array.from(data, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function fromHex(hex: string): Bytes {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) {
    throw new RangeError(`not an even-length hex string: ${hex.slice(0, 16)}...`);
  }
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** A non-negative bigint as exactly `length` big-endian bytes (Python's int.to_bytes). */
export function bigToBytes(value: bigint, length: number): Bytes {
  if (value < 0n || value >> BigInt(8 * length) !== 0n) {
    throw new RangeError(`value does not fit in ${length} bytes`);
  }
  const out = new Uint8Array(length);
  let v = value;
  for (let i = length - 1; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

/** Big-endian bytes as a bigint (Python's int.from_bytes(data, "big")). */
export function bytesToBig(data: Uint8Array): bigint {
  let v = 0n;
  for (const b of data) v = (v << 8n) | BigInt(b);
  return v;
}
