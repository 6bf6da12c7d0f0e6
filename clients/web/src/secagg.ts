/**
 * One device's SecAgg+ computations, as fedhh/secagg/device.py performs them: round keys, the
 * per-neighbour keys, the Shamir-shared and encrypted secrets of stage 1, the decryption of the
 * partners' shares, the masked input of stage 2, the answer of stage 4, and the consistency
 * signature of stage 3.
 *
 * These are the pure steps; the state machine that checks the server's requests (roster, lists,
 * retries; SECAGG.md section 3) is still to be written over them. Every function draws from the
 * RandomSource in the Python device's order, so a seeded stream reproduces its messages exactly.
 */

import { type Bytes, bytesToBig, concat, equal, u32 } from "./bytes.js";
import {
  KEY_BYTES, LABELS, type X25519Pair, aeadDecrypt, aeadEncrypt, agree, ed25519Sign, hkdf, sha256,
  x25519FromSeed,
} from "./primitives.js";
import { type MaskVector, type ModulusBits, addMask, pairMaskKey, selfMaskKey, zeros } from "./prg.js";
import type { RandomSource } from "./random.js";
import * as shamir from "./shamir.js";

const PLAINTEXT_BYTES = 8 + 2 * shamir.SHARE_BYTES;
/** nonce || ciphertext || GCM tag of one encrypted pair of shares. */
export const SHARE_CIPHERTEXT_BYTES = 12 + PLAINTEXT_BYTES + 16;

/** The device's X25519 key pairs of one round: c encrypts shares, s keys the pairwise masks. */
export interface RoundKeys {
  readonly c: X25519Pair;
  readonly s: X25519Pair;
}

/** Fresh round keys: 32 bytes for c, then 32 for s (RoundKeys.generate). */
export function generateRoundKeys(rand: RandomSource): RoundKeys {
  const c = x25519FromSeed(rand(KEY_BYTES));
  const s = x25519FromSeed(rand(KEY_BYTES));
  return { c, s };
}

/** A neighbour's advertised keys. */
export interface Peer {
  readonly id: number;
  readonly cPk: Uint8Array;
  readonly sPk: Uint8Array;
}

/** What a device derives for one neighbour. */
export interface NeighbourKeys {
  readonly id: number;
  readonly keyOut: Bytes; // AES-256-GCM key for my shares to it
  readonly keyIn: Bytes; // AES-256-GCM key for its shares to me
  readonly maskKey: Bytes; // PRG key of our pairwise mask
}

/**
 * A failed check of the server's or a neighbour's data; the device must abort the round.
 * `reason` is a value of Python's AbortReason (fedhh/secagg/errors.py), e.g. "bad_key".
 */
export class DeviceAbort extends Error {
  override name = "DeviceAbort";
  constructor(readonly reason: string, detail: string) {
    super(`${reason}: ${detail}`);
  }
}

/** The share-encryption keys of both directions and the pairwise mask key for `peer`. */
export async function neighbourKeys(me: number, keys: RoundKeys, sessionId: Uint8Array,
                                    peer: Peer): Promise<NeighbourKeys> {
  let encSecret: Bytes;
  let maskSecret: Bytes;
  try {
    encSecret = agree(keys.c.secret, peer.cPk);
    maskSecret = agree(keys.s.secret, peer.sPk);
  } catch (error) {
    throw new DeviceAbort("bad_key", `low-order or malformed key of ${peer.id}: ${String(error)}`);
  }
  // One HKDF output gives both directions: the first 32 bytes encrypt from the lower id to the
  // higher, the last 32 the other way.
  const v = peer.id;
  const [lo, hi] = me < v ? [me, v] : [v, me];
  const both = await hkdf(encSecret, sessionId, concat(LABELS.enc, u32(lo), u32(hi)), 2 * KEY_BYTES);
  const up = both.slice(0, KEY_BYTES);
  const down = both.slice(KEY_BYTES);
  const [keyOut, keyIn] = me < v ? [up, down] : [down, up];
  return { id: v, keyOut, keyIn, maskKey: await pairMaskKey(maskSecret, sessionId, me, v) };
}

/** The additional data of a share from `src` to `dst`. */
function shareAad(sessionId: Uint8Array, src: number, dst: number): Bytes {
  return concat(sessionId, u32(src), u32(dst));
}

export interface EncryptedShare {
  readonly src: number;
  readonly dst: number;
  readonly ciphertext: Bytes;
}

export interface SharedKeys {
  /** The self-mask seed b_u; the device keeps it until unmasking. */
  readonly b: Bytes;
  readonly shares: EncryptedShare[];
  /** SHA-256(commit label || session id || u32(me) || b_u). */
  readonly commitment: Bytes;
}

/**
 * Stage 1 after the roster checks: draw b_u, Shamir-share b_u and s_u^SK with threshold t among
 * the neighbours (ascending ids; the j-th holds the shares at the point j, as the server reads
 * them), and encrypt each neighbour's pair of shares to it.
 */
export async function shareKeys(me: number, t: number, sessionId: Uint8Array, keys: RoundKeys,
                                neighbours: ReadonlyMap<number, NeighbourKeys>,
                                rand: RandomSource): Promise<SharedKeys> {
  const b = rand(KEY_BYTES);
  const xs = [...neighbours.keys()].sort((x, y) => x - y);
  // Both secrets in one draw of differences, as the Python device shares them.
  const points = xs.map((_, i) => i + 1);
  const [bYs, sYs] = shamir.shareMany([bytesToBig(b), bytesToBig(keys.s.secret)], t, points,
                                      rand) as [bigint[], bigint[]];
  const shares: EncryptedShare[] = [];
  for (const [i, v] of xs.entries()) {
    const plaintext = concat(u32(me), u32(v), shamir.encodeShare(bYs[i]!),
                             shamir.encodeShare(sYs[i]!));
    const ciphertext = await aeadEncrypt(neighbours.get(v)!.keyOut, plaintext,
                                         shareAad(sessionId, me, v), rand);
    shares.push({ src: me, dst: v, ciphertext });
  }
  const commitment = await sha256(LABELS.commit, sessionId, u32(me), b);
  return { b, shares, commitment };
}

/** The pair (b-share, s-share) a partner sent, after decryption and every check. */
export async function decryptShare(me: number, sessionId: Uint8Array, neighbour: NeighbourKeys,
                                   share: EncryptedShare): Promise<[bigint, bigint]> {
  if (share.dst !== me || share.src !== neighbour.id) {
    throw new DeviceAbort("unexpected_neighbour", `share ${share.src}->${share.dst}`);
  }
  const plain = await aeadDecrypt(neighbour.keyIn, share.ciphertext,
                                  shareAad(sessionId, share.src, me));
  if (plain === null || plain.length !== PLAINTEXT_BYTES
      || !equal(plain.subarray(0, 8), concat(u32(share.src), u32(me)))) {
    throw new DeviceAbort("decryption_failed", `share from ${share.src}`);
  }
  try {
    return [shamir.decodeShare(plain.subarray(8, 8 + shamir.SHARE_BYTES)),
            shamir.decodeShare(plain.subarray(8 + shamir.SHARE_BYTES))];
  } catch (error) {
    throw new DeviceAbort("corrupt_share", `share from ${share.src}: ${String(error)}`);
  }
}

/**
 * Stage 2: y_u = x_u + PRG(b_u) + sum over partners v of (+PRG(s_uv) if u > v else -PRG(s_uv))
 * mod 2^bits, with x_u the 0/1 report given by its strictly increasing one-bit indices.
 */
export async function maskedInput(me: number, sessionId: Uint8Array, b: Uint8Array,
                                  partners: ReadonlyMap<number, Uint8Array>, ones: readonly number[],
                                  dimension: number, bits: ModulusBits): Promise<MaskVector> {
  for (const [i, index] of ones.entries()) {
    if (!Number.isInteger(index) || index < 0 || index >= dimension
        || (i > 0 && index <= ones[i - 1]!)) {
      throw new RangeError(`report indices must be strictly increasing in [0, ${dimension})`);
    }
  }
  const y = zeros(dimension, bits);
  await addMask(y, await selfMaskKey(b, sessionId, me));
  for (const v of [...partners.keys()].sort((p, q) => p - q)) {
    await addMask(y, partners.get(v)!, me > v ? 1 : -1);
  }
  for (const index of ones) y[index] = y[index]! + 1;
  return y;
}

/**
 * Stage 4: the b-shares of the alive partners and the s-shares of the dropped ones, encoded, in
 * the order the server listed them. `received` maps a partner to its (b-share, s-share).
 */
export function unmaskShares(received: ReadonlyMap<number, readonly [bigint, bigint]>,
                             alive: readonly number[], dropped: readonly number[]
): { b: Array<[number, Bytes]>; s: Array<[number, Bytes]> } {
  const pick = (ids: readonly number[], which: 0 | 1): Array<[number, Bytes]> => ids.map((v) => {
    const pair = received.get(v);
    if (pair === undefined) throw new DeviceAbort("foreign_id", `not a mask partner: ${v}`);
    return [v, shamir.encodeShare(pair[which])];
  });
  return { b: pick(alive, 0), s: pick(dropped, 1) };
}

/** SHA-256 of the survivor ids as big-endian uint32 (messages.survivors_digest). */
export function survivorsDigest(survivors: readonly number[]): Promise<Bytes> {
  return sha256(...survivors.map(u32));
}

/** What a device's identity key signs in stage 3 (messages.consistency_transcript). */
export function consistencyTranscript(sessionId: Uint8Array, deviceId: number,
                                      digest: Uint8Array): Bytes {
  return concat(LABELS.consistency, sessionId, u32(deviceId), digest);
}

/** The stage-3 signature over the survivor set with the device's Ed25519 identity seed. */
export async function consistencySignature(identitySeed: Uint8Array, sessionId: Uint8Array,
                                           deviceId: number,
                                           survivors: readonly number[]): Promise<Bytes> {
  const digest = await survivorsDigest(survivors);
  return ed25519Sign(identitySeed, consistencyTranscript(sessionId, deviceId, digest));
}
