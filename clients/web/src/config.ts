/**
 * The coordinator's signed round config and signed task, as fedhh/secagg/config.py and
 * fedhh/rpc/tasks.py define them: parsing the canonical config bytes, the session id, and
 * Ed25519 verification against the coordinator's key.
 *
 * Canonical config bytes: the config label, then ">HB" (version 5, len(round_id)), round_id,
 * then ">IIBIII32sB5Q32s": n, D, modulus bits, n_min, k, t, graph_seed, flags, five stage
 * deadlines (Unix ms) and identity_root (zeros without device_auth). The checks are those of
 * RoundConfig.__post_init__ and from_bytes, so both implementations accept the same configs.
 */

import { type Bytes, concat, equal, utf8 } from "./bytes.js";
import { MAX_DIMENSION } from "./prg.js";
import { LABELS, ed25519Verify, sha256 } from "./primitives.js";

const VERSION = 5;
const BODY_BYTES = 4 + 4 + 1 + 4 + 4 + 4 + 32 + 1 + 5 * 8 + 32;
const FLAG_DEVICE_AUTH = 1;
const FLAG_CONSISTENCY = 2;
export const MAX_COHORT = 1 << 24;
/** The context of a cohort's shared task signature (fedhh.rpc.tasks.COHORT_TASK_CONTEXT). */
export const COHORT_TASK_CONTEXT = utf8("fedhh/v1/cohort-task");

export class ConfigError extends Error {
  override name = "ConfigError";
}

/**
 * What a refusal says when the coordinator sent what only a newer device understands (a
 * RoundConfig version or flag, a codebook, a code width): the page runs an older bundle than
 * the services, a cached one after they were upgraded. Such a round is refused before anything
 * is spent or sent, as every refusal of the config; before, the page said only "unsupported
 * RoundConfig version 5" (or "unknown codebook ..."), every round, with nothing on what to do.
 */
export const OLDER_THAN_COORDINATOR =
  "this page's device code is older than the coordinator's: reload the page (if this persists, " +
  "the site or a cache still serves an older bundle: the operator must serve the one built " +
  "from the coordinator's fedhh version)";
/** The same, for a coordinator older than this device's code (the upgrade went the other way). */
export const NEWER_THAN_COORDINATOR =
  "the coordinator is older than this page's device code: the operator must serve the bundle " +
  "built from the coordinator's fedhh version, or upgrade the coordinator";

export interface RoundConfig {
  readonly roundId: Bytes;
  readonly numDevices: number;
  readonly dimension: number;
  readonly modulusBits: 16 | 32;
  readonly nMin: number;
  readonly k: number;
  readonly t: number;
  readonly graphSeed: Bytes;
  /** advertise_keys, share_keys, masked_input, consistency_check, unmask (Unix ms). */
  readonly deadlines: readonly bigint[];
  readonly deviceAuth: boolean;
  readonly consistencyCheck: boolean;
  readonly identityRoot: Bytes | null;
}

function checkInt(name: string, value: number, lo: number, hi: number): void {
  if (!(value >= lo && value <= hi)) {
    throw new ConfigError(`${name} must be an integer in [${lo}, ${hi}], got ${value}`);
  }
}

/** Parse the canonical bytes exactly (RoundConfig.from_bytes); throws ConfigError. */
export function parseRoundConfig(data: Uint8Array): RoundConfig {
  const label = LABELS.config;
  if (data.length < label.length || !equal(data.subarray(0, label.length), label)) {
    throw new ConfigError("not a RoundConfig encoding");
  }
  let offset = label.length;
  if (data.length < offset + 3) throw new ConfigError("truncated RoundConfig");
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const version = view.getUint16(offset, false);
  const idLength = view.getUint8(offset + 2);
  if (version !== VERSION) {
    throw new ConfigError(`unsupported RoundConfig version ${version} (this device reads ` +
                          `version ${VERSION}): ` +
                          (version > VERSION ? OLDER_THAN_COORDINATOR : NEWER_THAN_COORDINATOR));
  }
  offset += 3;
  if (data.length !== offset + idLength + BODY_BYTES) {
    throw new ConfigError("RoundConfig encoding has the wrong length");
  }
  const roundId = data.slice(offset, offset + idLength);
  offset += idLength;
  const u32At = (at: number): number => view.getUint32(offset + at, false);
  const numDevices = u32At(0);
  const dimension = u32At(4);
  const bits = view.getUint8(offset + 8);
  const nMin = u32At(9);
  const k = u32At(13);
  const t = u32At(17);
  const graphSeed = data.slice(offset + 21, offset + 53);
  const flags = view.getUint8(offset + 53);
  const deadlines = [0, 1, 2, 3, 4].map((i) => view.getBigUint64(offset + 54 + 8 * i, false));
  const root = data.slice(offset + 94, offset + 126);
  if (flags & ~(FLAG_DEVICE_AUTH | FLAG_CONSISTENCY)) {
    throw new ConfigError(`unknown RoundConfig flags 0x${flags.toString(16)}: ` +
                          OLDER_THAN_COORDINATOR);
  }
  const deviceAuth = (flags & FLAG_DEVICE_AUTH) !== 0;
  const consistencyCheck = (flags & FLAG_CONSISTENCY) !== 0;
  if (!deviceAuth && !equal(root, new Uint8Array(32))) {
    throw new ConfigError("identity_root without device_auth");
  }
  // The validation of RoundConfig.__post_init__.
  if (idLength < 1 || idLength > 64) throw new ConfigError("round_id must be 1..64 bytes");
  checkInt("num_devices", numDevices, 2, MAX_COHORT);
  checkInt("dimension", dimension, 1, MAX_DIMENSION);
  if (bits !== 16 && bits !== 32) throw new ConfigError(`modulus_bits must be 16 or 32, got ${bits}`);
  if (2 ** bits <= numDevices) {
    throw new ConfigError(`modulus 2^${bits} must exceed num_devices=${numDevices}, or a sum of ` +
                          "0/1 reports could wrap");
  }
  checkInt("n_min", nMin, 1, numDevices);
  checkInt("k", k, 1, numDevices - 1);
  if (k % 2 === 1 && k !== numDevices - 1) {
    throw new ConfigError(`k must be even (or n-1 for the complete graph), got ${k}`);
  }
  checkInt("t", t, 1, k);
  const maxDeadline = (1n << 63n) - 1n;
  for (const [i, d] of deadlines.entries()) {
    if (d > maxDeadline) throw new ConfigError(`deadline ${i} exceeds 2^63 - 1`);
    if (i > 0 && deadlines[i - 1]! > d) {
      throw new ConfigError(`stage deadlines must be non-decreasing, got ${deadlines.join(", ")}`);
    }
  }
  if (consistencyCheck && !deviceAuth) {
    throw new ConfigError("consistency_check needs device_auth (signed survivor sets)");
  }
  return {
    roundId, numDevices, dimension, modulusBits: bits, nMin, k, t, graphSeed, deadlines,
    deviceAuth, consistencyCheck, identityRoot: deviceAuth ? root : null,
  };
}

/** The 32-byte session id: SHA-256(session label || canonical config bytes). */
export function sessionIdOf(configBytes: Uint8Array): Promise<Bytes> {
  return sha256(LABELS.session, configBytes);
}

/** The config, if the coordinator's signature over its canonical bytes verifies. */
export function verifyConfig(payload: Uint8Array, signature: Uint8Array,
                             coordinatorPublic: Uint8Array): RoundConfig {
  if (!ed25519Verify(coordinatorPublic, signature, payload)) {
    throw new ConfigError("round config signature does not verify");
  }
  return parseRoundConfig(payload);
}

/**
 * True iff `signature` is the coordinator's over COHORT_TASK_CONTEXT || shared (the part of a
 * serialized fedhh.v1.Task that a cohort's members receive alike); the context keeps it from
 * verifying as a round-config signature.
 */
export function verifySharedTaskSignature(shared: Uint8Array, signature: Uint8Array,
                                          coordinatorPublic: Uint8Array): boolean {
  return ed25519Verify(coordinatorPublic, signature, concat(COHORT_TASK_CONTEXT, shared));
}
