/**
 * The wire to the services: the Connect protocol (unary calls, binary protobuf) over the
 * browser's fetch, to the Connect ports the coordinator and the aggregator serve beside gRPC
 * (`--web-listen`, fedhh/rpc/connect.py). The clients are generated from the same service
 * descriptors as the messages (`src/gen`), so a path or a type cannot drift from `proto/`.
 *
 * `CoordinatorClient` is the device's side of fedhh.v1.DeviceService, as
 * fedhh_device/fleet.py uses it over gRPC: enrol once with a one-time token, then check in
 * with fresh round keys until a task comes, and act on a task only once the coordinator's
 * signatures over it and its round config verify (`verifyTask`).
 */

import { create } from "@bufbuild/protobuf";
import { type Client, Code, ConnectError, type Transport, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";

import { type Bytes, concat, own, toHex, utf8 } from "./bytes.js";
import { SecureAggregation } from "./gen/fedhh/v1/aggregator_pb.js";
import {
  DeviceService,
  EnrollRequestSchema,
  GetTaskRequestSchema,
  type Task,
} from "./gen/fedhh/v1/coordinator_pb.js";
import { KEY_BYTES, ed25519PublicFromSeed, ed25519Sign, sha256 } from "./primitives.js";
import { type RandomSource, systemRandom } from "./random.js";
import { AuthenticationError, verifyTask } from "./task.js";

/** The domain of the enrolment proof: the bytes of "fedhh/v1/enrollment-proof\0". */
export const ENROLLMENT_PROOF_DOMAIN = utf8("fedhh/v1/enrollment-proof\0");

/**
 * What an enrolment request's `enrollmentSignature` signs with the identity key
 * (proto EnrollRequest; fedhh/rpc/device_users.py `enrollment_proof`, byte for byte): the
 * domain, SHA-256 of the token, the identity public key, SHA-256 of the label's UTF-8 and
 * SHA-256 of the attestation. It proves that the enrolling caller holds the key: a leaked
 * token with the device's public key cannot enrol it (or have its credential re-issued).
 */
export async function enrollmentProof(token: Uint8Array, identityPublicKey: Uint8Array,
                                      label: string, attestation: Uint8Array): Promise<Bytes> {
  return concat(ENROLLMENT_PROOF_DOMAIN, await sha256(token), identityPublicKey,
                await sha256(utf8(label)), await sha256(attestation));
}

/**
 * The most bytes of one answer a device reads: the Python device's channels' cap
 * (fedhh/rpc/serving.py MAX_MESSAGE_BYTES, `grpc.max_receive_message_length`).
 */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

// (statuses whose Response cannot be made with a body)
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

function tooLarge(url: string, size: string, cap: number): ConnectError {
  return new ConnectError(`the answer of ${url} is ${size}, over the device's cap of ${cap} ` +
                          "bytes: not read", Code.ResourceExhausted);
}

/**
 * A call the page's own Content-Security-Policy kept from being sent (its `connect-src` does
 * not name the service): a TypeError, as fetch's "Failed to fetch", so the device retries it as
 * a call that got no answer, but its message says which origin the policy must allow.
 */
export class BlockedByPagePolicy extends TypeError {
  constructor(message: string, readonly blockedOrigin: string) {
    super(message);
    this.name = "BlockedByPagePolicy";
  }
}

interface Violation { effectiveDirective?: unknown; violatedDirective?: unknown;
                      blockedURI?: unknown; disposition?: unknown }

// The origins whose calls the page's policy refused (`securitypolicyviolation` events), per
// global that fired them (a page, a worker, a test's stand-in).
const blockedOrigins = new WeakMap<object, Set<string>>();

function originOf(url: string): string | undefined {
  try {
    const origin = new URL(url).origin;
    return origin === "null" ? undefined : origin;
  } catch {
    return undefined;
  }
}

/** Starts recording the connect-src violations of this global (a page or a worker), once. */
function watchPolicy(): Set<string> | undefined {
  const scope = globalThis as { addEventListener?: (type: string, listener: (event: Violation) => void) => void };
  if (typeof scope.addEventListener !== "function") return undefined; // Node: no policy
  let seen = blockedOrigins.get(scope);
  if (seen === undefined) {
    const origins = new Set<string>();
    seen = origins;
    blockedOrigins.set(scope, origins);
    scope.addEventListener("securitypolicyviolation", (event: Violation) => {
      // A Content-Security-Policy-Report-Only policy fires the same event (disposition
      // "report") and blocks nothing: its fetch failed for another reason. (Before, such a
      // report named the policy as the cause of any later failed call to that origin.)
      if (event.disposition === "report") return;
      const directive = String(event.effectiveDirective ?? event.violatedDirective ?? "");
      const origin = originOf(String(event.blockedURI ?? ""));
      if (directive.startsWith("connect-src") && origin !== undefined) origins.add(origin);
    });
  }
  return seen;
}

/**
 * What a fetch that failed with a TypeError is: when the page's Content-Security-Policy
 * refused it, a `BlockedByPagePolicy` naming the origin to add to `connect-src`; else the
 * error as it came. The browser fires the violation as a task after the fetch's rejection, so
 * this waits one task for it. (Before, such a call read "Failed to fetch", and the page was
 * told the service was down or did not allow its origin: an operator whose CSP left out the
 * coordinator's or the aggregator's port looked for the fault in the services.)
 */
async function policyRefusal(error: unknown, url: string, seen: Set<string> | undefined): Promise<unknown> {
  if (!(error instanceof TypeError) || seen === undefined) return error;
  const origin = originOf(url);
  if (origin === undefined) return error;
  if (!seen.has(origin)) await new Promise((resolve) => setTimeout(resolve, 0));
  if (!seen.has(origin)) return error;
  return new BlockedByPagePolicy(
    `${error.message}: this page's Content-Security-Policy blocks calls to ${origin} ` +
    `(add ${origin} to its connect-src)`, origin);
}

/**
 * `fetchImpl` whose answers are read at most `cap` bytes far: one whose Content-Length is
 * larger fails at once, unread, and one that streams past it fails there, as
 * `resource_exhausted` (the code a gRPC channel gives an answer over its cap; a round's call
 * is not made again for it, as the same answer would come). The body is read here, before the
 * answer is handed on: a stream cut by an error shows in Chromium only as "Failed to fetch", an
 * answer that never came. (The device
 * makes unary calls only, whose answers connect-web reads whole anyway.) Before, connect-web
 * read a whole answer of any size into memory: a coordinator or aggregator (or whatever
 * answers in its place) could make the tab run out of memory with one answer, where the Python
 * device refuses anything over 16 MiB.
 */
export function cappedFetch(fetchImpl: typeof globalThis.fetch,
                            cap = MAX_ANSWER_BYTES): typeof globalThis.fetch {
  const refusals = watchPolicy();
  return async (input, init) => {
    const asked = String(input instanceof Request ? input.url : input);
    let answer: Response;
    try {
      answer = await fetchImpl(input, init);
    } catch (error) {
      throw await policyRefusal(error, asked, refusals);
    }
    const url = answer.url || asked;
    const declared = Number(answer.headers.get("Content-Length") ?? "");
    if (declared > cap) {
      await answer.body?.cancel().catch(() => undefined);
      throw tooLarge(url, `${declared} bytes`, cap);
    }
    if (answer.body === null || NULL_BODY_STATUSES.has(answer.status)) return answer;
    const reader = answer.body.getReader();
    const chunks: Uint8Array[] = [];
    let seen = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      seen += value.byteLength;
      if (seen > cap) {
        await reader.cancel().catch(() => undefined);
        throw tooLarge(url, `over ${cap} bytes`, cap);
      }
      chunks.push(value);
    }
    const body = new Uint8Array(seen);
    let at = 0;
    for (const chunk of chunks) { body.set(chunk, at); at += chunk.byteLength; }
    return new Response(body, { status: answer.status, statusText: answer.statusText,
                                headers: answer.headers });
  };
}

/**
 * A Connect transport to one service's port (`https://host:port`), binary protobuf, its
 * answers capped at `MAX_ANSWER_BYTES` (`cappedFetch`), a call the page's Content-Security-Policy
 * refuses named so (`BlockedByPagePolicy`). `fetch` is the global one unless given
 * (a page's, or Node's).
 */
export function connectTransport(baseUrl: string, fetchImpl?: typeof globalThis.fetch): Transport {
  return createConnectTransport({
    baseUrl,
    useBinaryFormat: true,
    fetch: cappedFetch(fetchImpl ?? ((input, init) => globalThis.fetch(input, init))),
  });
}

/** The aggregator's device calls (AdvertiseKeys, AwaitStage, SubmitShares, ...). */
export function aggregatorClient(transport: Transport): Client<typeof SecureAggregation> {
  return createClient(SecureAggregation, transport);
}

/** What enrolment gives a device, kept for its lifetime (the page stores it). */
export interface Identity {
  deviceId: bigint;
  credential: Bytes;
  /** The 32-byte Ed25519 seed of the device's identity key. */
  identitySeed: Bytes;
  /** The coordinator's raw Ed25519 key, pinned at enrolment: it signs every task. */
  coordinatorPublic: Bytes;
}

/** The round keys' public halves a check-in presents (fresh X25519 keys for each round). */
export interface RoundPublicKeys {
  cPk: Uint8Array;
  sPk: Uint8Array;
}

/**
 * What one check-in brought: a verified task; a task the device refused (`refused`: not
 * signed by the coordinator key it pinned at enrolment, another device's, or malformed), with
 * the digest to name it by as known, so the next check-in waits for the round's next task; or
 * how long to wait before the next.
 */
export type CheckIn =
  | { kind: "task"; task: Task; taskBytes: Bytes; digest: Bytes }
  | { kind: "refused"; error: AuthenticationError; digest: Bytes }
  | { kind: "wait"; retryAfterMs: number };

// A GetTask long-poll asks to be held this long (the coordinator holds one at most 30 min,
// service.py's MAX_WAIT_MS; a browser asks for less, under the idle timeouts of proxies on the
// way); the call's own deadline leaves room for the answer to travel back.
export const GET_TASK_WAIT_MS = 55_000;
const ANSWER_MARGIN_MS = 10_000;

export class CoordinatorClient {
  private readonly client: Client<typeof DeviceService>;

  constructor(transport: Transport, private readonly random: RandomSource = systemRandom) {
    this.client = createClient(DeviceService, transport);
  }

  /**
   * Enrol with the operator's one-time token: a fresh identity key (or `identitySeed`'s: the
   * one an enrolment whose answer was lost presented, to be enrolled again as the same
   * device), bound to a device id.
   */
  async enroll(token: string, label = "", identitySeed: Bytes = this.random(KEY_BYTES),
               signal?: AbortSignal, timeoutMs?: number): Promise<Identity> {
    if (identitySeed.length !== KEY_BYTES) {
      throw new RangeError(`an identity seed has ${KEY_BYTES} bytes, not ${identitySeed.length}`);
    }
    const enrollmentToken = new TextEncoder().encode(token);
    const identityPublicKey = ed25519PublicFromSeed(identitySeed);
    const attestation = new Uint8Array();
    const proof = await enrollmentProof(enrollmentToken, identityPublicKey, label, attestation);
    const response = await this.client.enroll(create(EnrollRequestSchema, {
      enrollmentToken,
      identityPublicKey,
      label,
      attestation,
      // (proof that this device holds the key it enrols; a retry signs the same bytes again)
      enrollmentSignature: ed25519Sign(identitySeed, proof),
    }), { ...(signal === undefined ? {} : { signal }),
          ...(timeoutMs === undefined ? {} : { timeoutMs }) });
    if (response.credential.length !== 32 || response.coordinatorPublicKey.length !== KEY_BYTES) {
      throw new AuthenticationError("the enrolment answer is malformed");
    }
    return {
      deviceId: response.deviceId,
      credential: own(response.credential),
      identitySeed,
      coordinatorPublic: own(response.coordinatorPublicKey),
    };
  }

  /**
   * One check-in: waits up to `waitMs` for this device's task. A task is returned only if the
   * coordinator signed it and it is this device's; any other is `refused`, with why and its
   * digest. `knownTask` (the digest of the last task got, taken or refused) makes the
   * coordinator hold the call while that task is still current.
   */
  async checkIn(identity: Identity, keys: RoundPublicKeys, knownTask: Uint8Array = new Uint8Array(),
                waitMs = GET_TASK_WAIT_MS, signal?: AbortSignal): Promise<CheckIn> {
    const response = await this.client.getTask(create(GetTaskRequestSchema, {
      deviceId: identity.deviceId, waitMs, knownTask, cPk: keys.cPk, sPk: keys.sPk,
    }), {
      headers: { Authorization: bearer(identity) },
      timeoutMs: waitMs + ANSWER_MARGIN_MS,
      ...(signal === undefined ? {} : { signal }),
    });
    if (response.outcome.case !== "task") {
      return { kind: "wait", retryAfterMs: response.outcome.value ?? 1000 };
    }
    const signed = response.outcome.value;
    const digest = await sha256(signed.task);
    let task: Task;
    try {
      task = verifyTask(signed, identity.coordinatorPublic, identity.deviceId);
    } catch (error) {
      if (!(error instanceof AuthenticationError)) throw error;
      return { kind: "refused", error, digest };
    }
    return { kind: "task", task, taskBytes: own(signed.task), digest };
  }
}

/** `Authorization` of a device's calls: `Bearer <device id>.<credential hex>`. */
export function bearer(identity: Identity): string {
  return `Bearer ${identity.deviceId.toString()}.${toHex(identity.credential)}`;
}
