/**
 * The coordinator's commitment to a round's cohort, as fedhh/secagg/merkle.py: a Merkle tree
 * over (id, identity key, c_pk, s_pk) whose root the signed config carries. Leaf position p
 * holds the leaf of the device at ring position p (graph.ts ringOrder), so a device's
 * neighbours are one run of leaves, and its roster is proven by one multiproof.
 *
 *   salt = SHA-256(salt label || u32(len(round_id)) || round_id || graph_seed || u32(n))
 *   leaf = SHA-256(leaf label || salt || u32(id) || identity_key || c_pk || s_pk)
 *   node = SHA-256(node label || left || right); an odd last node is carried up unchanged.
 *
 * A proof for a set of positions is the hashes of the nodes its leaves cannot give: level by
 * level from the leaves, in increasing index within a level, the sibling of each held node
 * whose sibling is neither held nor absent (an odd last node). Its length is fixed by n and the
 * positions; no other length is accepted.
 */

import { type Bytes, equal, u32 } from "./bytes.js";
import type { RoundConfig } from "./config.js";
import { ringOrder } from "./graph.js";
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

/** How many hashes the proof for `positions` (strictly increasing, in [0, n)) holds. */
export function proofHashes(n: number, positions: readonly number[]): number {
  let runs: Array<[number, number]> = [];
  for (const p of positions) {
    const last = runs[runs.length - 1];
    if (last !== undefined && last[1] + 1 === p) last[1] = p;
    else runs.push([p, p]);
  }
  let size = n;
  let count = 0;
  while (size > 1) {
    const above: Array<[number, number]> = [];
    for (const [first, last] of runs) {
      if (first & 1) count++;
      if (!(last & 1) && last + 1 < size) count++;
      const [a, b] = [first >> 1, last >> 1];
      const prev = above[above.length - 1];
      if (prev !== undefined && prev[1] + 1 >= a) prev[1] = Math.max(prev[1], b);
      else above.push([a, b]);
    }
    runs = above;
    size = (size + 1) >> 1;
  }
  return count;
}

/** The root `proof` leads to from `leaves` ([position, leaf hash], positions strictly
 * increasing in [0, n)); null for malformed inputs (merkle.root_from_leaves). */
export async function rootFromLeaves(n: number, leaves: ReadonlyArray<readonly [number, Uint8Array]>,
                                     proof: Uint8Array): Promise<Bytes | null> {
  const positions = leaves.map(([p]) => p);
  if (!Number.isInteger(n) || n < 1 || positions.length === 0
      || positions.some((p, i) => !Number.isInteger(p) || p < 0 || p >= n
                                  || (i > 0 && p <= positions[i - 1]!))
      || proof.length !== HASH_BYTES * proofHashes(n, positions)) {
    return null;
  }
  let level: Array<[number, Uint8Array]> = leaves.map(([p, h]) => [p, h]);
  let size = n;
  let pos = 0;
  while (size > 1) {
    const above: Array<[number, Uint8Array]> = [];
    for (let j = 0; j < level.length; j++) {
      const [i, h] = level[j]!;
      const next = level[j + 1];
      if (!(i & 1) && next !== undefined && next[0] === i + 1) {
        above.push([i >> 1, await sha256(LABELS.merkleNode, h, next[1])]);
        j++;
      } else if ((i ^ 1) < size) {
        const sibling = proof.subarray(pos, pos + HASH_BYTES);
        pos += HASH_BYTES;
        above.push([i >> 1, await sha256(LABELS.merkleNode, ...(i & 1 ? [sibling, h] : [h, sibling]))]);
      } else {
        above.push([i >> 1, h]);
      }
    }
    level = above;
    size = (size + 1) >> 1;
  }
  return level[0]![1] as Bytes;
}

/** A neighbour's proof that its keys are the ones the config's identity_root commits to. */
export interface Admission {
  readonly deviceId: number;
  readonly identityKey: Uint8Array;
  readonly cPk: Uint8Array;
  readonly sPk: Uint8Array;
  readonly proof: Uint8Array;  // empty in a roster entry: the roster's one proof covers it
}

const positionsOf = new Map<string, Map<number, number>>();

/** The leaf position (ring position) of each id of the config's cohort, derived once. */
async function ringPositions(config: RoundConfig): Promise<Map<number, number>> {
  const key = `${Array.from(config.graphSeed).join(",")}/${config.numDevices}`;
  let positions = positionsOf.get(key);
  if (positions === undefined) {
    const order = await ringOrder(config.graphSeed, config.numDevices);
    positions = new Map(order.map((id, p) => [id, p]));
    if (positionsOf.size >= 16) positionsOf.clear();
    positionsOf.set(key, positions);
  }
  return positions;
}

/** True iff `proof` proves each [id, keys] of `members` (distinct ids of the cohort) is the
 * committed leaf under the config's identity root (config.verify_members). */
export async function verifyMembers(members: ReadonlyArray<readonly [number, Member]>,
                                    proof: Uint8Array, config: RoundConfig): Promise<boolean> {
  if (!config.deviceAuth || config.identityRoot === null || members.length === 0) return false;
  const positions = await ringPositions(config);
  const salt = await cohortSalt(config.roundId, config.graphSeed, config.numDevices);
  const leaves: Array<[number, Uint8Array]> = [];
  for (const [deviceId, keys] of members) {
    const position = positions.get(deviceId);
    if (position === undefined || keys.length !== 3 || keys.some((k) => k.length !== KEY_BYTES)) {
      return false;
    }
    leaves.push([position, await leafHash(salt, deviceId, keys)]);
  }
  leaves.sort((a, b) => a[0] - b[0]);
  const root = await rootFromLeaves(config.numDevices, leaves, proof);
  return root !== null && equal(root, config.identityRoot);
}

/** True iff the admission's proof leads to the config's identity root (config.verify_admission). */
export function verifyAdmission(admission: Admission, config: RoundConfig): Promise<boolean> {
  return verifyMembers([[admission.deviceId, [admission.identityKey, admission.cPk, admission.sPk]]],
                       admission.proof, config);
}
