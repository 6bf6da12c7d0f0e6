/**
 * The coordinator's commitment to a round's cohort, as fedhh/secagg/merkle.py: a Merkle tree
 * over (id, identity key, c_pk, s_pk) whose root the signed config carries. A device checks a
 * neighbour's admission by recomputing the root from the neighbour's keys and inclusion proof
 * (about log2(n) SHA-256 calls).
 *
 *   salt = SHA-256(salt label || u32(len(round_id)) || round_id || graph_seed || u32(n))
 *   leaf = SHA-256(leaf label || salt || u32(id) || identity_key || c_pk || s_pk)
 *   node = SHA-256(node label || left || right); an odd last node is carried up unchanged.
 */

import { type Bytes, equal, u32 } from "./bytes.js";
import type { RoundConfig } from "./config.js";
import { KEY_BYTES, LABELS, sha256 } from "./primitives.js";

export const HASH_BYTES = 32;

/** A member's raw 32-byte keys: Ed25519 identity key, X25519 c_pk, X25519 s_pk. */
export type Member = readonly [Uint8Array, Uint8Array, Uint8Array];

export function cohortSalt(roundId: Uint8Array, graphSeed: Uint8Array, n: number): Promise<Bytes> {
  return sha256(LABELS.merkleSalt, u32(roundId.length), roundId, graphSeed, u32(n));
}

export function leafHash(salt: Uint8Array, deviceId: number, keys: Member): Promise<Bytes> {
  return sha256(LABELS.merkleLeaf, salt, u32(deviceId), ...keys);
}

/** How many sibling hashes the proof of `deviceId` in a tree of n leaves holds. */
export function proofHashes(n: number, deviceId: number): number {
  let index = deviceId - 1;
  let size = n;
  let count = 0;
  while (size > 1) {
    if ((index ^ 1) < size) count++;
    index >>= 1;
    size = (size + 1) >> 1;
  }
  return count;
}

/** The root `proof` leads to from the leaf (deviceId, keys); null for malformed inputs. */
export async function rootFromProof(salt: Uint8Array, n: number, deviceId: number, keys: Member,
                                    proof: Uint8Array): Promise<Bytes | null> {
  if (!Number.isInteger(deviceId) || deviceId < 1 || deviceId > n
      || keys.length !== 3 || keys.some((key) => key.length !== KEY_BYTES)
      || proof.length !== HASH_BYTES * proofHashes(n, deviceId)) {
    return null;
  }
  let h = await leafHash(salt, deviceId, keys);
  let index = deviceId - 1;
  let size = n;
  let pos = 0;
  while (size > 1) {
    if ((index ^ 1) < size) {
      const sibling = proof.subarray(pos, pos + HASH_BYTES);
      pos += HASH_BYTES;
      h = await sha256(LABELS.merkleNode, ...(index & 1 ? [sibling, h] : [h, sibling]));
    }
    index >>= 1;
    size = (size + 1) >> 1;
  }
  return h;
}

/** A neighbour's proof that its keys are the ones the config's identity_root commits to. */
export interface Admission {
  readonly deviceId: number;
  readonly identityKey: Uint8Array;
  readonly cPk: Uint8Array;
  readonly sPk: Uint8Array;
  readonly proof: Uint8Array;
}

/** True iff the admission's proof leads to the config's identity root (config.verify_admission). */
export async function verifyAdmission(admission: Admission, config: RoundConfig): Promise<boolean> {
  if (!config.deviceAuth || config.identityRoot === null) return false;
  const salt = await cohortSalt(config.roundId, config.graphSeed, config.numDevices);
  const root = await rootFromProof(salt, config.numDevices, admission.deviceId,
                                   [admission.identityKey, admission.cPk, admission.sPk],
                                   admission.proof);
  return root !== null && equal(root, config.identityRoot);
}

