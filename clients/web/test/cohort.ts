/**
 * Test-only: a round as the coordinator makes it for one device (fedhh/secagg/config.py,
 * merkle.py and fedhh/rpc/tasks.py): the canonical RoundConfig bytes with device
 * authentication and the consistency check, the identity root over the cohort's keys (the
 * device's own: the round keys it presented at check-in), its admission proof, the
 * coordinator's signature over the config, and the cohort task signed as the coordinator signs
 * it (the shared part once, the device's own fields after it). No deployed device uses it.
 */

import { create, toBinary } from "@bufbuild/protobuf";

import { type Bytes, concat, u32, utf8 } from "../src/bytes.js";
import { COHORT_TASK_CONTEXT } from "../src/config.js";
import { type SignedTask, type Task, SignedTaskSchema, TaskSchema
} from "../src/gen/fedhh/v1/coordinator_pb.js";
import { ringOrder } from "../src/graph.js";
import { type Member, cohortSalt, leafHash } from "../src/merkle.js";
import { LABELS, ed25519Sign, sha256 } from "../src/primitives.js";

/** What the test chooses of a round (the rest is fixed: 16-bit modulus, round id "r"). */
export interface RoundSpec {
  n: number;
  nMin: number;
  k: number;
  t: number;
  dimension: number;
  /** The five stage deadlines, Unix ms. */
  deadlines: readonly bigint[];
  /** The encoding's version (5, the current one, if left out) and flags (3 if left out): a
   * coordinator of another fedhh version. */
  version?: number;
  flags?: number;
}

function u8(value: number): Bytes {
  return Uint8Array.of(value);
}

function u16(value: number): Bytes {
  return Uint8Array.of(value >> 8, value & 0xff);
}

function u64(value: bigint): Bytes {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, value, false);
  return out;
}

/**
 * The identity root over members 1..n (`member(id)`'s keys, each leaf at the member's ring
 * position) and the inclusion proof of member `id` (merkle.py: an odd last node is carried up
 * unchanged).
 */
async function rootAndProof(salt: Uint8Array, graphSeed: Uint8Array, n: number,
                            member: (id: number) => Member, id: number
): Promise<{ root: Bytes; proof: Bytes }> {
  const order = await ringOrder(graphSeed, n);
  let level = await Promise.all(order.map((u) => leafHash(salt, u, member(u))));
  let index = order.indexOf(id);
  const proof: Bytes[] = [];
  while (level.length > 1) {
    const sibling = level[index ^ 1];
    if (sibling !== undefined) proof.push(sibling);
    const next: Bytes[] = [];
    for (let i = 0; i < level.length; i += 2) {
      const right = level[i + 1];
      const left = level[i]!;
      next.push(right === undefined ? left : await sha256(LABELS.merkleNode, left, right));
    }
    level = next;
    index >>= 1;
  }
  return { root: level[0]!, proof: concat(...proof) };
}

/**
 * The config of `spec` with device 1 of the cohort holding `own` (its identity key and the
 * round keys it presented), signed with `coordinatorSeed`, and device 1's admission proof.
 */
export async function signedRound(spec: RoundSpec, own: Member, coordinatorSeed: Uint8Array
): Promise<{ config: Bytes; signature: Bytes; admission: Bytes }> {
  const roundId = utf8("r");
  const graphSeed = new Uint8Array(32).fill(9);
  const salt = await cohortSalt(roundId, graphSeed, spec.n);
  // The other members' keys: any 32 bytes (the tree only hashes them).
  const key = (byte: number) => new Uint8Array(32).fill(byte);
  const member = (id: number): Member => id === 1 ? own : [key(id), key(id + 1), key(id + 2)];
  const { root, proof } = await rootAndProof(salt, graphSeed, spec.n, member, 1);
  const config = concat(
    LABELS.config, u16(spec.version ?? 5), u8(roundId.length), roundId,
    u32(spec.n), u32(spec.dimension), u8(16), u32(spec.nMin), u32(spec.k), u32(spec.t),
    graphSeed, u8(spec.flags ?? 3 /* device_auth | consistency_check */),
    ...spec.deadlines.map(u64), root);
  return { config, signature: ed25519Sign(coordinatorSeed, config), admission: proof };
}

/**
 * `task` as the coordinator hands it to device `deviceId` (fedhh.rpc.tasks.CohortTasks): the
 * shared part (every field but the member's own) signed with `signerSeed` under the cohort
 * task context, then the member's own fields.
 */
export function signTask(task: Task, signerSeed: Uint8Array): SignedTask {
  const shared = toBinary(TaskSchema, create(TaskSchema, {
    ...task, deviceId: 0n, secaggId: 0, admission: new Uint8Array() }));
  const ownPart = toBinary(TaskSchema, create(TaskSchema, {
    deviceId: task.deviceId, secaggId: task.secaggId, admission: task.admission }));
  return create(SignedTaskSchema, {
    task: concat(shared, ownPart), sharedLength: shared.length,
    sharedSignature: ed25519Sign(signerSeed, concat(COHORT_TASK_CONTEXT, shared)) });
}
