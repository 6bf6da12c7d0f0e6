/**
 * One device's SecAgg+ round over the aggregator's Connect port: the wire form of
 * fedhh/rpc/aggregator_wire.py (messages, body digests, the signed call transcript) and the
 * call sequence of fedhh/rpc/device_client.py's `participate`, over `SecAggDevice`.
 *
 * AdvertiseKeys first; then for each later stage the device's request (from the previous
 * submission's `wait_next_ms` long-poll, else AwaitStage), the state machine's answer, and its
 * submission, each but the first signed with the identity key over
 * label || kind || session id || device id || SHA-256 of the body. The masked vector goes as
 * one unary SubmitMaskedVector.
 *
 * A call the service shed or could not take (unavailable, canceled; a call that got no answer
 * at all counts as unavailable) is made again with full-jitter
 * exponential backoff, as device_client.py's RetryPolicy does: `attempts` times, and beyond
 * them for as long as the stage the call belongs to is open (`patientUntil`, from the round
 * config's deadlines: device_client.py's `DeviceSession.patient_until`), with a longer backoff
 * cap then. A call that ran out of time (deadline_exceeded: an aggregator too starved to
 * answer in time) is asked again while its stage is open. Every device call is safe to repeat
 * (the aggregator answers an identical submission `accepted: false`). A repeated submission
 * refused because its stage closed meanwhile (an earlier attempt may have got in, its answer
 * lost) goes on to ask for the next request, which tells. The device waits for a stage's
 * request until `overrunMs` after the previous stage's deadline.
 */

import { create } from "@bufbuild/protobuf";
import { type Client, Code, ConnectError } from "@connectrpc/connect";

import { type Bytes, concat, own, u32, utf8 } from "./bytes.js";
import type {
  AdvertiseKeys, ConsistencyRequest, MaskedInputRequest, SecAggDevice, ShareKeysRequest,
  ShareKeysResponse, UnmaskRequest, UnmaskResponse,
} from "./device.js";
import {
  AdvertiseKeysRequestSchema, AwaitStageRequestSchema, type AwaitStageResponse, AwaitStatus,
  type DeclineRequest, DeclineRequestSchema, type DeviceCredentials, DeviceCredentialsSchema, type DeviceKeys, DeviceKeysSchema,
  EncryptedShareSchema, MaskedInputHeaderSchema, MaskedVectorSchema, OwnerShareSchema,
  type SecAggAdmission, SecAggAdmissionSchema, SecAggStage, type SecureAggregation,
  SubmitConsistencyRequestSchema, type SubmitResponse, SubmitResponseSchema,
  SubmitSharesRequestSchema, SubmitUnmaskRequestSchema,
} from "./gen/fedhh/v1/aggregator_pb.js";
import type { Admission } from "./merkle.js";
import { vectorBytes } from "./prg.js";
import { ed25519Sign, sha256 } from "./primitives.js";
import { systemJitter } from "./random.js";
import { DeviceAbort, type EncryptedShare } from "./secagg.js";

/** The library's stages, numbered as fedhh.secagg.Stage (the wire's SecAggStage is one more). */
export enum Stage { ADVERTISE_KEYS, SHARE_KEYS, MASKED_INPUT, CONSISTENCY_CHECK, UNMASK, DONE }

export type CallKind = "await" | "shares" | "masked-input" | "consistency" | "unmask" | "decline";

const CALL_LABEL = utf8("fedhh/aggregator/v1/call");

function field(data: Uint8Array): Bytes {
  return concat(u32(data.length), data);
}

function u64(value: number): Bytes {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(value), false);
  return out;
}

// -- call transcripts (aggregator_wire.py) ---------------------------------------------------

export function callTranscript(kind: CallKind, sessionId: Uint8Array, deviceId: number,
                               bodyDigest: Uint8Array): Bytes {
  return concat(CALL_LABEL, field(utf8(kind)), field(sessionId), u32(deviceId), field(bodyDigest));
}

export function awaitDigest(stage: Stage): Promise<Bytes> {
  return sha256(u32(stage));
}

export function sharesDigest(message: ShareKeysResponse): Promise<Bytes> {
  return sha256(field(message.bCommitment), u32(message.shares.length),
                ...message.shares.map((s) => concat(u32(s.src), u32(s.dst), field(s.ciphertext))));
}

export function headerDigest(totalBytes: number, vectorSha256: Uint8Array): Promise<Bytes> {
  return sha256(u64(totalBytes), field(vectorSha256));
}

export function consistencyDigest(signature: Uint8Array): Promise<Bytes> {
  return sha256(field(signature));
}

export function unmaskDigest(message: UnmaskResponse): Promise<Bytes> {
  const parts: Uint8Array[] = [];
  for (const entries of [message.bShares, message.sShares]) {
    parts.push(u32(entries.length));
    for (const [owner, share] of entries) parts.push(u32(owner), field(share));
  }
  return sha256(...parts);
}

// -- messages ---------------------------------------------------------------------------------

export function admissionToPb(a: Admission): SecAggAdmission {
  return create(SecAggAdmissionSchema, { deviceId: a.deviceId, identityKey: a.identityKey,
                                         cPk: a.cPk, sPk: a.sPk, proof: a.proof });
}

function keysToPb(message: AdvertiseKeys): DeviceKeys {
  return create(DeviceKeysSchema, {
    deviceId: message.deviceId, cPk: message.cPk, sPk: message.sPk,
    ...(message.admission === null ? {} : { admission: admissionToPb(message.admission) }),
  });
}

function sharesFromPb(shares: Array<{ src: number; dst: number; ciphertext: Uint8Array }>
): EncryptedShare[] {
  return shares.map((s) => ({ src: s.src, dst: s.dst, ciphertext: own(s.ciphertext) }));
}

/** The ids whose bits are set in ConsistencyRequest.survivor_bits (bit i - 1 for device i,
 * least significant first), increasing. */
export function bitIds(bits: Uint8Array): number[] {
  const ids: number[] = [];
  bits.forEach((byte, at) => {
    for (let bit = 0; bit < 8; bit++) if (byte & (1 << bit)) ids.push(at * 8 + bit + 1);
  });
  return ids;
}

type ServerRequest = ShareKeysRequest | MaskedInputRequest | ConsistencyRequest | UnmaskRequest;

/** The library request in a READY answer (request_from_pb), or null. */
export function requestFromPb(sessionId: Uint8Array, deviceId: number, message: AwaitStageResponse
): ServerRequest | null {
  const request = message.request;
  switch (request.case) {
    case "shareKeys":
      // (an entry's identity key and round keys, its proof the request's one range proof)
      return { sessionId, deviceId, rangeProof: request.value.rangeProof,
               roster: request.value.entries.map((e) => ({
                 sessionId, deviceId: e.deviceId, cPk: e.cPk, sPk: e.sPk,
                 admission: e.identityKey.length === 0 ? null
                   : { deviceId: e.deviceId, identityKey: e.identityKey, cPk: e.cPk, sPk: e.sPk,
                       proof: new Uint8Array(0) } })) };
    case "maskedInput":
      return { sessionId, deviceId, shares: sharesFromPb(request.value.shares) };
    case "consistencyCheck":
      // (the ids, then the bitmap's: aggregator_wire's request_from_pb)
      return { sessionId, deviceId, survivors: [...request.value.survivors,
                                                ...bitIds(request.value.survivorBits)] };
    case "unmask":
      return { sessionId, deviceId, alive: [...request.value.alive],
               dropped: [...request.value.dropped],
               signatures: request.value.signatures.map((s) => [s.deviceId, s.signature]) };
    default:
      return null;
  }
}

// -- the round --------------------------------------------------------------------------------

/** How a device's round ended (fedhh.rpc.device_client.ParticipationEnd's values). */
export interface RoundOutcome {
  outcome: "completed" | "dropped" | "not_selected" | "late" | "round_aborted"
    | "device_aborted" | "rejected" | "not_found" | "unavailable" | "timed_out";
  reached: Stage;
  contributed: boolean;
  detail: string;
}

export interface RetryOptions {
  /** Tries of a shed or unavailable call, whether or not its stage is still open (5). */
  attempts?: number;
  /** Backoff of the first retry, and the cap, in ms (100, 2000). */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** The backoff's cap for the tries beyond `attempts` while the stage is open (30000). */
  patientMaxBackoffMs?: number;
  /** Uniform in [0, 1): only when to retry (systemJitter, crypto.getRandomValues). */
  jitter?: () => number;
  /** Unix time in ms (Date.now): compared with the round config's deadlines. */
  now?: () => number;
  /** Stops the device: no call is made again, no wait goes on (the abort's reason is thrown). */
  signal?: AbortSignal;
}

export interface RoundOptions extends RetryOptions {
  /** How long each long-poll asks to be held (the aggregator caps it). */
  pollMs?: number;
  /** Time for a call beyond its long-poll. */
  callTimeoutMs?: number;
  /** How long after the previous stage's deadline the device waits for a request (30000). */
  overrunMs?: number;
  /** Give up waiting for a stage's request after this many long-polls (no limit). */
  maxPolls?: number;
  /**
   * Test only (fedhh_device's DropPlan, device_client.py's `drop_at`): stop silently before
   * this stage, as a device that goes away mid-round; the outcome is "dropped".
   */
  dropBefore?: Stage;
  /**
   * If given, the milliseconds of the device's own work are added here by step (the state
   * machine's calls and their signing, not the calls on the wire): "advertise", "shares",
   * "masked", "consistency", "unmask"; src/loop.ts adds "config" and "report".
   */
  timings?: Record<string, number>;
  /** Told each stage as the device enters it (ADVERTISE_KEYS first), e.g. to show it. */
  onStage?: (stage: Stage) => void;
}

/** `work()`, its milliseconds added to `timings[step]` when timings are kept. */
export async function timed<T>(timings: Record<string, number> | undefined, step: string,
                               work: () => Promise<T> | T): Promise<T> {
  if (timings === undefined) return work();
  const started = performance.now();
  try {
    return await work();
  } finally {
    timings[step] = (timings[step] ?? 0) + performance.now() - started;
  }
}

// Shed or not taken: made again. The same set as the Python device's RETRIED_CODES
// (fedhh/rpc/participation.py; a test holds them equal). resource_exhausted is final: the
// aggregator answers it where asking again cannot pass (a message over its receive cap, an
// answer over the device's), and unavailable where the device's earlier call is still open
// there (an upload being read, long-polls held). Before, resource_exhausted was retried until
// the stage closed: a masked vector over the cap was sent whole again and again.
export const RETRIED: ReadonlySet<Code> = new Set([Code.Unavailable, Code.Canceled]);

/**
 * A call that got no answer at all: `fetch` itself failed (connect-web reports it as
 * `unknown` with fetch's TypeError as the cause), e.g. a keep-alive connection the server had
 * just closed, or the network gone for a moment. gRPC reports the same as UNAVAILABLE, and the
 * Python client retries it as such.
 */
export function transportFailed(error: unknown): boolean {
  return error instanceof ConnectError && error.code === Code.Unknown
    && error.cause instanceof TypeError;
}

/** A call's code, a transport failure counted as `unavailable`. */
export function codeOf(error: ConnectError): Code {
  return transportFailed(error) ? Code.Unavailable : error.code;
}

/**
 * The least rate (bytes/s) at which the aggregator reads an upload, after a grace of
 * `UPLOAD_GRACE_MS` (its defaults: fedhh_aggregator.rounds Limits.upload_min_rate and
 * upload_idle_s). A device's masked vector travels in one unary call, so the call's deadline
 * gives the body that long too (`maskedVectorTimeoutMs`).
 */
export const UPLOAD_MIN_RATE = 64 * 1024;
export const UPLOAD_GRACE_MS = 5_000;

/**
 * The deadline of a SubmitMaskedVector call of `bytes` bytes whose answer may be held
 * `waitNextMs`: the upload at the aggregator's least rate, then the hold and `callTimeoutMs`.
 * Before, it was the hold and `callTimeoutMs` alone (85 s), so a vector the aggregator would
 * still take (16 MiB, its cap, over a link of 1 Mbit/s: 134 s) was cut by the device's own
 * deadline, and made again, whole, until its stage closed: such a device never contributed.
 */
export function maskedVectorTimeoutMs(bytes: number, waitNextMs: number,
                                      callTimeoutMs: number): number {
  return UPLOAD_GRACE_MS + Math.ceil(bytes * 1000 / UPLOAD_MIN_RATE) + waitNextMs + callTimeoutMs;
}

/**
 * The longest delay a timer keeps: browsers and Node hold it in a signed 32-bit integer, and a
 * longer one (a coordinator's wait of 25 days or more; `Infinity`) fired at once, so a device
 * told to wait that long checked in again in a hot loop.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Waits `ms` (in timers of at most `MAX_TIMER_MS` each, one after the other; `Infinity`: until
 * `signal` aborts; NaN or a negative wait: none), or until `signal` aborts (then throws its
 * reason).
 */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    let left = ms > 0 ? ms : 0;  // (NaN > 0 is false)
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stop = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const step = () => {
      if (signal?.aborted) return;  // (stop has rejected)
      const now = Math.min(left, MAX_TIMER_MS);
      left -= now;
      timer = setTimeout(left > 0 ? step : () => {
        signal?.removeEventListener("abort", stop);
        resolve();
      }, now);
    };
    step();
    signal?.addEventListener("abort", stop, { once: true });
  });
}

/**
 * `call()`, made again as the module docstring says: a shed or unavailable call `attempts`
 * times, and until `patientUntil` (Unix ms: its stage's deadline) beyond them; a call that
 * ran out of time until `patientUntil` only. `closedSince`: what a repeated submission returns
 * when its stage has closed since an earlier attempt.
 */
export async function retrying<T>(call: () => Promise<T>, options: RetryOptions,
                                  closedSince?: () => T, patientUntil = 0): Promise<T> {
  const attempts = options.attempts ?? 5;
  const initial = options.initialBackoffMs ?? 100;
  const jitter = options.jitter ?? systemJitter;
  const now = options.now ?? Date.now;
  let repeated = false;
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (error) {
      if (!(error instanceof ConnectError)) throw error;
      options.signal?.throwIfAborted();
      if (repeated && closedSince !== undefined && error.code === Code.FailedPrecondition) {
        return closedSince();
      }
      repeated = true;
      const patient = now() < patientUntil;
      if (error.code === Code.DeadlineExceeded && patient) {
        attempt -= 1;  // asked again at once, as no backoff step
        continue;
      }
      if (!RETRIED.has(codeOf(error)) || (attempt + 1 >= attempts && !patient)) throw error;
    }
    const cap = attempt < attempts ? options.maxBackoffMs ?? 2000
      : Math.max(options.maxBackoffMs ?? 2000, options.patientMaxBackoffMs ?? 30_000);
    // (the exponent is capped: a patient call may be made again thousands of times)
    await pause(jitter() * Math.min(cap, initial * 2 ** Math.min(attempt, 30)), options.signal);
  }
}

class Ended extends Error {
  constructor(readonly result: Omit<RoundOutcome, "reached" | "contributed">) {
    super(result.detail);
  }
}

// Refusals that say where the round is, as device_client.py's _CODE_OUTCOMES reads them; any
// other code means the aggregator refused the message.
const CODE_OUTCOMES: Partial<Record<Code, RoundOutcome["outcome"]>> = {
  [Code.Aborted]: "round_aborted", [Code.NotFound]: "not_found",
  [Code.FailedPrecondition]: "late", [Code.Unavailable]: "unavailable",
  [Code.Canceled]: "unavailable", [Code.DeadlineExceeded]: "timed_out",
};

/** The Decline of this device's seat in round `sessionId`, signed as the admitted device. */
export function declineRequest(sessionId: Uint8Array, identitySeed: Uint8Array,
                               admission: Admission): DeclineRequest {
  return create(DeclineRequestSchema, {
    sessionId, credentials: create(DeviceCredentialsSchema, {
      admission: admissionToPb(admission),
      signature: ed25519Sign(identitySeed, callTranscript("decline", sessionId,
                                                          admission.deviceId, new Uint8Array())),
    }) });
}

/**
 * Give up this device's seat in round `sessionId` before it advertises its keys
 * (SecureAggregation.Decline, signed as the admitted device: device_client.py's `decline`), so
 * that the round's first stage stops waiting for it instead of running to its deadline. It
 * says no reason. True once the aggregator has it (a repeat's answer too); false when it could
 * not be told (an aggregator older than the call answers unimplemented; one unreachable through
 * the retries; a stage closed already): the round then goes on without the device at the
 * deadline, as before devices could decline. Throws only `options.signal`'s reason.
 */
export async function decline(aggregator: Client<typeof SecureAggregation>, sessionId: Uint8Array,
                              identitySeed: Uint8Array, admission: Admission,
                              options: RetryOptions & { callTimeoutMs?: number } = {}
                             ): Promise<boolean> {
  const request = declineRequest(sessionId, identitySeed, admission);
  const call = {
    timeoutMs: options.callTimeoutMs ?? 30_000,
    ...(options.signal === undefined ? {} : { signal: options.signal }) };
  try {
    await retrying(() => aggregator.decline(request, call), options);
    return true;
  } catch (error) {
    if (!(error instanceof ConnectError)) throw error;
    return false;
  }
}

/**
 * Run `device` through its round: `ones` is its randomized report (ascending 1-bit indices),
 * `identitySeed` and `admission` the ones the device was built with (they sign each call).
 */
export async function participate(aggregator: Client<typeof SecureAggregation>,
                                  device: SecAggDevice, ones: readonly number[],
                                  identitySeed: Uint8Array, admission: Admission,
                                  options: RoundOptions = {}): Promise<RoundOutcome> {
  const pollMs = options.pollMs ?? 55_000;
  const callTimeoutMs = options.callTimeoutMs ?? 30_000;
  const maxPolls = options.maxPolls ?? Infinity;
  const overrunMs = options.overrunMs ?? 30_000;
  const now = options.now ?? Date.now;
  // A stage's deadline (Unix ms) from the signed config, as device_client.py's _deadline_s.
  const deadline = (stage: Stage) =>
    Number(device.config.deadlines[Math.min(stage, Stage.UNMASK)] ?? 0n);
  const sessionId = device.sessionId;
  const deviceId = device.deviceId;
  const credentials = (kind: CallKind, digest: Uint8Array): DeviceCredentials =>
    create(DeviceCredentialsSchema, {
      admission: admissionToPb(admission),
      signature: ed25519Sign(identitySeed, callTranscript(kind, sessionId, deviceId, digest)),
    });
  const timeout = (waitMs: number) => ({
    timeoutMs: waitMs + callTimeoutMs,
    ...(options.signal === undefined ? {} : { signal: options.signal }) });
  // Until when a call that was shed, or ran out of time, is made again: the deadline of the
  // stage it belongs to (device_client.py's patient_until).
  let patientUntil = deadline(Stage.ADVERTISE_KEYS);
  // A submission with a next stage; a repeat that found its stage closed has no next request
  // in hand, so the device asks for it (READY if an earlier attempt got in).
  const submit = (call: () => Promise<SubmitResponse>) =>
    retrying(call, options, () => create(SubmitResponseSchema), patientUntil);

  async function requestFor(stage: Stage, first: AwaitStageResponse | undefined,
                            giveUpAt: number): Promise<ServerRequest> {
    let answer = first;
    for (let polls = 0; ; polls++) {
      if (answer === undefined || answer.status === AwaitStatus.PENDING) {
        const remaining = giveUpAt - now();
        if (remaining <= 0 || polls >= maxPolls) {
          throw new Ended({ outcome: "timed_out",
                            detail: `no ${Stage[stage]} request before the previous stage's ` +
                                    "deadline" });
        }
        const waitMs = Math.max(1, Math.min(pollMs, Math.floor(remaining)));
        const request = create(AwaitStageRequestSchema, {
          sessionId, credentials: credentials("await", await awaitDigest(stage)),
          stage: (stage + 1) as SecAggStage, waitMs });
        answer = await retrying(() => aggregator.awaitStage(request, timeout(waitMs)), options,
                                undefined, giveUpAt);
        continue;
      }
      if (answer.status === AwaitStatus.READY) {
        const request = requestFromPb(sessionId, deviceId, answer);
        if (request !== null) return request;
      }
      const outcomes: Partial<Record<AwaitStatus, RoundOutcome["outcome"]>> = {
        [AwaitStatus.NOT_SELECTED]: "not_selected", [AwaitStatus.CLOSED]: "late",
        [AwaitStatus.ABORTED]: "round_aborted" };
      throw new Ended({ outcome: outcomes[answer.status] ?? "rejected",
                        detail: answer.abortReason || `answer ${AwaitStatus[answer.status]}` });
    }
  }

  let reached = Stage.ADVERTISE_KEYS;
  let contributed = false;
  const dropped = (): RoundOutcome => ({ outcome: "dropped", reached, contributed, detail: "" });
  try {
    options.onStage?.(Stage.ADVERTISE_KEYS);
    if (options.dropBefore === Stage.ADVERTISE_KEYS) return dropped();
    const keys = await timed(options.timings, "advertise", () => keysToPb(device.advertiseKeys()));
    const advert = create(AdvertiseKeysRequestSchema, { sessionId, keys, waitNextMs: pollMs });
    let next = (await submit(() => aggregator.advertiseKeys(advert, timeout(pollMs)))).next;
    const stages = [Stage.SHARE_KEYS, Stage.MASKED_INPUT,
                    ...(device.config.consistencyCheck ? [Stage.CONSISTENCY_CHECK] : []),
                    Stage.UNMASK];
    let previous = Stage.ADVERTISE_KEYS;
    for (const stage of stages) {
      reached = stage;
      options.onStage?.(stage);
      if (options.dropBefore === stage) return dropped();
      const giveUpAt = deadline(previous) + overrunMs;
      patientUntil = giveUpAt;
      const request = await requestFor(stage, next, giveUpAt);
      patientUntil = deadline(stage);
      const waitNextMs = stage === Stage.UNMASK ? 0 : pollMs;
      if (stage === Stage.SHARE_KEYS) {
        const submission = await timed(options.timings, "shares", async () => {
          const answer = await device.shareKeys(request as ShareKeysRequest);
          return create(SubmitSharesRequestSchema, {
            sessionId, credentials: credentials("shares", await sharesDigest(answer)),
            shares: answer.shares.map((s) => create(EncryptedShareSchema, s)),
            bCommitment: answer.bCommitment, waitNextMs });
        });
        next = (await submit(() => aggregator.submitShares(submission, timeout(waitNextMs)))).next;
      } else if (stage === Stage.MASKED_INPUT) {
        const vector = await timed(options.timings, "masked", async () => {
          const masked = await device.maskedInput(request as MaskedInputRequest, ones);
          const data = vectorBytes(masked.vector);
          const vectorSha256 = await sha256(data);
          const header = create(MaskedInputHeaderSchema, {
            sessionId, credentials: credentials("masked-input",
                                                await headerDigest(data.length, vectorSha256)),
            totalBytes: BigInt(data.length), waitNextMs, vectorSha256 });
          return create(MaskedVectorSchema, { header, data });
        });
        const uploadMs = maskedVectorTimeoutMs(vector.data.length, waitNextMs, callTimeoutMs);
        next = (await submit(() => aggregator.submitMaskedVector(
          vector, { ...timeout(waitNextMs), timeoutMs: uploadMs }))).next;
        contributed = true;
      } else if (stage === Stage.CONSISTENCY_CHECK) {
        const submission = await timed(options.timings, "consistency", async () => {
          const answer = await device.consistencyCheck(request as ConsistencyRequest);
          return create(SubmitConsistencyRequestSchema, {
            sessionId, credentials: credentials("consistency",
                                                await consistencyDigest(answer.signature)),
            signature: answer.signature, waitNextMs });
        });
        next = (await submit(() => aggregator.submitConsistency(submission, timeout(waitNextMs))))
          .next;
      } else {
        const submission = await timed(options.timings, "unmask", async () => {
          const answer = await device.unmask(request as UnmaskRequest);
          const shares = (entries: Array<[number, Uint8Array]>) =>
            entries.map(([owner, share]) => create(OwnerShareSchema, { owner, share }));
          return create(SubmitUnmaskRequestSchema, {
            sessionId, credentials: credentials("unmask", await unmaskDigest(answer)),
            bShares: shares(answer.bShares), sShares: shares(answer.sShares) });
        });
        await retrying(() => aggregator.submitUnmask(submission, timeout(0)), options,
                       undefined, patientUntil);
      }
      previous = stage;
    }
    return { outcome: "completed", reached: Stage.DONE, contributed, detail: "" };
  } catch (error) {
    options.signal?.throwIfAborted();  // the device is stopping: no outcome
    if (error instanceof Ended) return { ...error.result, reached, contributed };
    if (error instanceof DeviceAbort) {
      return { outcome: "device_aborted", reached, contributed, detail: error.message };
    }
    if (error instanceof ConnectError) {
      // "late" with `contributed`: the stage closed before this answer, after the masked
      // input was accepted (its report is in the sum if the round is released).
      return { outcome: CODE_OUTCOMES[codeOf(error)] ?? "rejected", reached, contributed,
               detail: `${Code[error.code]}: ${error.rawMessage}` };
    }
    throw error;
  }
}
