/**
 * The protocol's cryptographic building blocks, as fedhh/secagg/primitives.py defines them.
 *
 * SHA-256, HKDF-SHA256 and AES-256-GCM come from WebCrypto (`crypto.subtle`), which every browser
 * and Node >= 20 has. X25519 and Ed25519 come from the audited @noble/curves: the device must
 * Shamir-share the raw 32 bytes of its mask key s_u^SK and derive keys from raw seeds, and
 * WebCrypto imports and exports X25519 private keys only as PKCS#8 or JWK (and only recent
 * browsers have X25519 and Ed25519 at all). Nothing here is hand-rolled.
 *
 * Key derivations are domain separated exactly as in Python: salt = the round's session id,
 * info = a label from LABELS followed by the big-endian 32-bit ids it concerns.
 */

import { ed25519, x25519 } from "@noble/curves/ed25519.js";

import { type Bytes, concat, own, utf8 } from "./bytes.js";
import type { RandomSource } from "./random.js";

export const KEY_BYTES = 32;
export const SIGNATURE_BYTES = 64;
export const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** The labels of fedhh.secagg.primitives.LABELS, byte for byte. */
export const LABELS = {
  session: utf8("fedhh/secagg/v1/session"),
  graph: utf8("fedhh/secagg/v1/graph"),
  enc: utf8("fedhh/secagg/v2/enc"), // v2: one 64-byte output, lower-to-higher id key first
  self: utf8("fedhh/secagg/v1/self-mask"),
  pair: utf8("fedhh/secagg/v1/pair-mask"),
  commit: utf8("fedhh/secagg/v1/commit-b"),
  consistency: utf8("fedhh/secagg/v1/consistency"),
  config: utf8("fedhh/secagg/v1/round-config"),
  merkleSalt: utf8("fedhh/secagg/v2/merkle-salt"),
  merkleLeaf: utf8("fedhh/secagg/v2/merkle-leaf"),
  merkleNode: utf8("fedhh/secagg/v2/merkle-node"),
} as const;

const subtle = (): SubtleCrypto => {
  const s = globalThis.crypto?.subtle;
  if (s === undefined) {
    // Browsers expose crypto.subtle only in secure contexts (https or localhost).
    throw new Error("WebCrypto (crypto.subtle) is unavailable: serve the page over https");
  }
  return s;
};

/** SHA-256 of the concatenation of `parts` (callers use fixed-length fields only). */
export async function sha256(...parts: Uint8Array[]): Promise<Bytes> {
  return new Uint8Array(await subtle().digest("SHA-256", concat(...parts)));
}

/** HKDF-SHA256 (RFC 5869) of `ikm`. */
export async function hkdf(ikm: Uint8Array, salt: Uint8Array, info: Uint8Array,
                           length: number = KEY_BYTES): Promise<Bytes> {
  if (!Number.isInteger(length) || length < 1 || length > 255 * 32) {
    throw new RangeError(`HKDF-SHA256 output length must be in [1, 8160], got ${length}`);
  }
  const key = await subtle().importKey("raw", own(ikm), "HKDF", false, ["deriveBits"]);
  const bits = await subtle().deriveBits(
    { name: "HKDF", hash: "SHA-256", salt: own(salt), info: own(info) }, key, 8 * length);
  return new Uint8Array(bits);
}

async function gcmKey(key: Uint8Array, usage: KeyUsage): Promise<CryptoKey> {
  if (key.length !== KEY_BYTES) {
    throw new RangeError(`an AES-256-GCM key is ${KEY_BYTES} bytes, got ${key.length}`);
  }
  return subtle().importKey("raw", own(key), "AES-GCM", false, [usage]);
}

/** AES-256-GCM: `nonce (12 bytes) || ciphertext || tag (16 bytes)`, the nonce from `rand`. */
export async function aeadEncrypt(key: Uint8Array, plaintext: Uint8Array, aad: Uint8Array,
                                  rand: RandomSource): Promise<Bytes> {
  const nonce = rand(NONCE_BYTES);
  const sealed = await subtle().encrypt(
    { name: "AES-GCM", iv: nonce, additionalData: own(aad), tagLength: 8 * TAG_BYTES },
    await gcmKey(key, "encrypt"), own(plaintext));
  return concat(nonce, new Uint8Array(sealed));
}

/** Inverse of aeadEncrypt; `null` if the blob is short or fails authentication. */
export async function aeadDecrypt(key: Uint8Array, blob: Uint8Array,
                                  aad: Uint8Array): Promise<Bytes | null> {
  if (blob.length < NONCE_BYTES + TAG_BYTES) return null;
  try {
    const plain = await subtle().decrypt(
      { name: "AES-GCM", iv: own(blob.subarray(0, NONCE_BYTES)), additionalData: own(aad),
        tagLength: 8 * TAG_BYTES },
      await gcmKey(key, "decrypt"), own(blob.subarray(NONCE_BYTES)));
    return new Uint8Array(plain);
  } catch (error) {
    // WebCrypto reports a failed tag check as a DOMException named OperationError; anything
    // else is a bug.
    if ((error as { name?: unknown } | null)?.name === "OperationError") return null;
    throw error;
  }
}

/**
 * An X25519 key pair from 32 uniformly random bytes. `secret` keeps the bytes as given (like
 * pyca's private_bytes_raw); clamping happens inside every scalar multiplication.
 */
export interface X25519Pair {
  readonly secret: Bytes;
  readonly public: Bytes;
}

export function x25519FromSeed(seed: Uint8Array): X25519Pair {
  if (seed.length !== KEY_BYTES) {
    throw new RangeError(`an X25519 key needs ${KEY_BYTES} random bytes, got ${seed.length}`);
  }
  return { secret: own(seed), public: own(x25519.getPublicKey(seed)) };
}

/** X25519 shared secret; throws for a malformed or low-order peer key. */
export function agree(secret: Uint8Array, peerPublic: Uint8Array): Bytes {
  if (peerPublic.length !== KEY_BYTES) {
    throw new RangeError(`an X25519 public key is ${KEY_BYTES} bytes, got ${peerPublic.length}`);
  }
  return own(x25519.getSharedSecret(secret, peerPublic));
}

// The Python library probes with a fixed scalar and rejects a key whose output is all zero;
// noble rejects low-order points before its ladder. The vectors check that the two agree.
let probe: Bytes | undefined;

/** True iff `pub` is 32 bytes and not a low-order point (which would zero every secret). */
export async function isValidX25519Public(pub: Uint8Array): Promise<boolean> {
  if (pub.length !== KEY_BYTES) return false;
  probe ??= await sha256(utf8("fedhh/secagg/probe"));
  try {
    agree(probe, pub);
    return true;
  } catch {
    return false;
  }
}

/** The 32-byte Ed25519 verification key of a 32-byte seed (signing key). */
export function ed25519PublicFromSeed(seed: Uint8Array): Bytes {
  if (seed.length !== KEY_BYTES) {
    throw new RangeError(`an Ed25519 key needs ${KEY_BYTES} random bytes, got ${seed.length}`);
  }
  return own(ed25519.getPublicKey(seed));
}

export function ed25519Sign(seed: Uint8Array, message: Uint8Array): Bytes {
  return own(ed25519.sign(message, seed));
}

/**
 * True iff `signature` is a valid Ed25519 signature of `message` under `pub`.
 *
 * Strict RFC 8032 verification (`zip215: false`): non-canonical encodings are rejected, as
 * OpenSSL (behind pyca) rejects them, so both implementations accept the same signatures.
 */
export function ed25519Verify(pub: Uint8Array, signature: Uint8Array,
                              message: Uint8Array): boolean {
  if (pub.length !== KEY_BYTES || signature.length !== SIGNATURE_BYTES) return false;
  try {
    return ed25519.verify(signature, message, pub, { zip215: false });
  } catch {
    return false; // a public key that is not a curve point
  }
}
