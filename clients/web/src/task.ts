/**
 * The device's task, as fedhh/rpc/tasks.py and fedhh/rpc/device_client.py read it: the
 * coordinator signs "fedhh/v1/task" || the serialized fedhh.v1.Task, and inside the task signs
 * the round's canonical config bytes. A device acts on neither before both verify.
 */

import { fromBinary } from "@bufbuild/protobuf";

import { type RoundConfig, ConfigError, verifyConfig, verifyTaskSignature } from "./config.js";
import { type Task, TaskSchema } from "./gen/fedhh/v1/coordinator_pb.js";

/** The task is not the coordinator's, or not a Task (fedhh.errors.AuthenticationError). */
export class AuthenticationError extends Error {
  override name = "AuthenticationError";
}

/** The task, if the coordinator's signature verifies and the bytes are a Task. */
export function verifyTask(task: Uint8Array, signature: Uint8Array,
                           coordinatorPublic: Uint8Array): Task {
  if (!verifyTaskSignature(task, signature, coordinatorPublic)) {
    throw new AuthenticationError("the task's signature or encoding is invalid (bad signature)");
  }
  try {
    return fromBinary(TaskSchema, task);
  } catch (error) {
    throw new AuthenticationError(`the task's signature or encoding is invalid (${String(error)})`);
  }
}

/** The round config the task carries, if the coordinator signed it too. */
export function taskRoundConfig(task: Task, coordinatorPublic: Uint8Array): RoundConfig {
  if (task.roundConfig.length === 0) throw new ConfigError("the task carries no round config");
  return verifyConfig(task.roundConfig, task.roundConfigSignature, coordinatorPublic);
}
