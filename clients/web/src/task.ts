/**
 * The device's task, as fedhh/rpc/tasks.py reads it: the coordinator signs
 * "fedhh/v1/cohort-task" || the part of the serialized fedhh.v1.Task that every member of the
 * cohort receives alike, once for them all, and inside it the round's canonical config bytes.
 * The rest is the device's own part: device_id, secagg_id and admission only, canonically
 * encoded; the device checks device_id here and the admission (its own keys under the signed
 * config's identity root) before it takes part. A device acts on neither before both
 * signatures verify.
 */

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";

import { equal } from "./bytes.js";
import { type RoundConfig, ConfigError, verifyConfig, verifySharedTaskSignature } from "./config.js";
import { type SignedTask, type Task, TaskSchema } from "./gen/fedhh/v1/coordinator_pb.js";

/** The task is not the coordinator's, or not a Task (fedhh.errors.AuthenticationError). */
export class AuthenticationError extends Error {
  override name = "AuthenticationError";
}

/**
 * The task of `deviceId`, if the coordinator signed its shared part and its own part is only
 * that device's fields (fedhh.rpc.tasks.verify_task).
 */
export function verifyTask(signed: Pick<SignedTask, "task" | "sharedSignature" | "sharedLength">,
                           coordinatorPublic: Uint8Array, deviceId: bigint): Task {
  const { task: bytes, sharedSignature, sharedLength } = signed;
  if (sharedLength > bytes.length) {
    throw new AuthenticationError("the task's shared part is longer than the task");
  }
  const shared = bytes.subarray(0, sharedLength);
  const ownBytes = bytes.subarray(sharedLength);
  if (!verifySharedTaskSignature(shared, sharedSignature, coordinatorPublic)) {
    // (before, the reason stopped here, and a page whose coordinator had been started with a
    // new signing key refused every task without saying why or what to do)
    throw new AuthenticationError(
      "the task's signature is invalid: it is not by the coordinator key this device pinned " +
      "when it enrolled (a coordinator started with another signing key needs its devices " +
      "enrolled again, each with a new token)");
  }
  let task: Task;
  let own: Task;
  try {
    task = fromBinary(TaskSchema, shared);
    own = fromBinary(TaskSchema, ownBytes);
  } catch (error) {
    throw new AuthenticationError(`the task's encoding is invalid (${String(error)})`);
  }
  if (task.deviceId !== 0n || task.secaggId !== 0 || task.admission.length !== 0) {
    throw new AuthenticationError("the task's signed part sets a member's own field");
  }
  const canonical = create(TaskSchema, {
    deviceId: own.deviceId, secaggId: own.secaggId, admission: own.admission });
  if (!equal(toBinary(TaskSchema, canonical), ownBytes)) {
    throw new AuthenticationError("the task's unsigned part sets more than the device's own fields");
  }
  if (own.deviceId !== deviceId) throw new AuthenticationError("the task is for another device");
  task.deviceId = own.deviceId;
  task.secaggId = own.secaggId;
  task.admission = own.admission;
  return task;
}

/** The round config the task carries, if the coordinator signed it too. */
export function taskRoundConfig(task: Task, coordinatorPublic: Uint8Array): RoundConfig {
  if (task.roundConfig.length === 0) throw new ConfigError("the task carries no round config");
  return verifyConfig(task.roundConfig, task.roundConfigSignature, coordinatorPublic);
}
