/**
 * One device's side of one SecAgg+ round: the state machine of fedhh/secagg/device.py.
 *
 * Call order: advertiseKeys, shareKeys, maskedInput, consistencyCheck (only if the config
 * enables it), unmask. Each takes the server's request for its stage and returns the device's
 * message. Every check of a stage runs before the stage reveals anything, and the first failed
 * check aborts the round for good (DeviceAbort, with Python's AbortReason value) and forgets
 * every secret. The rule that protects the report: for each partner the device reveals at most
 * one of its two secrets' shares, and it answers the unmask stage once. An identical repeated
 * request (a transport retry) gets the same answer; a different one for a stage already
 * answered aborts.
 *
 * The floors (DevicePolicy) include the lying-server failure bound of src/bounds.ts when
 * `maxCorruptFraction` is set; src/floors.ts builds the policy a deployed device uses.
 */

import { boundAccepts, lyingServerBound } from "./bounds.js";
import { type Bytes, equal, toHex } from "./bytes.js";
import { type RoundConfig, ConfigError, sessionIdOf, verifyConfig } from "./config.js";
import { neighboursOf, survivorsConnected } from "./graph.js";
import { type Admission, type Member, verifyAdmission, verifyMembers } from "./merkle.js";
import type { MaskVector } from "./prg.js";
import { KEY_BYTES, ed25519PublicFromSeed, ed25519Sign, ed25519Verify } from "./primitives.js";
import { type RandomSource, systemRandom } from "./random.js";
import {
  type EncryptedShare, type NeighbourKeys, type RoundKeys, DeviceAbort, consistencyTranscript,
  decryptShare, generateRoundKeys, maskedInput, neighbourKeys, shareKeys, survivorsDigest,
  unmaskShares,
} from "./secagg.js";

export interface AdvertiseKeys {
  sessionId: Uint8Array;
  deviceId: number;
  cPk: Uint8Array;
  sPk: Uint8Array;
  admission: Admission | null;
}
/** rangeProof (device_auth): the one Merkle multiproof of every entry's keys (merkle.ts). */
export interface ShareKeysRequest {
  sessionId: Uint8Array; deviceId: number; roster: AdvertiseKeys[]; rangeProof: Uint8Array;
}
export interface ShareKeysResponse {
  sessionId: Bytes; deviceId: number; shares: EncryptedShare[]; bCommitment: Bytes;
}
export interface MaskedInputRequest { sessionId: Uint8Array; deviceId: number; shares: EncryptedShare[] }
export interface MaskedInput { sessionId: Bytes; deviceId: number; vector: MaskVector }
export interface ConsistencyRequest { sessionId: Uint8Array; deviceId: number; survivors: number[] }
export interface ConsistencyResponse { sessionId: Bytes; deviceId: number; signature: Bytes }
export interface UnmaskRequest {
  sessionId: Uint8Array; deviceId: number; alive: number[]; dropped: number[];
  signatures: Array<[number, Uint8Array]>;
}
export interface UnmaskResponse {
  sessionId: Bytes; deviceId: number; bShares: Array<[number, Bytes]>; sShares: Array<[number, Bytes]>;
}

/** Floors a device enforces on any config, whoever signed it (Python's DevicePolicy). */
export interface DevicePolicy {
  minThreshold: number;
  minNMin: number;
  maxDimension: number;
  requireDeviceAuth: boolean;
  requireConsistencyCheck: boolean;
  /** With a value: refuse configs whose lying-server bound at this corrupt fraction exceeds
   * 2^-securityBits (src/bounds.ts); absent or null: no bound check (Python's None). */
  maxCorruptFraction?: number | null;
  /** Default 40. */
  securityBits?: number;
  /** The dropout rate of the disconnection bound; default 0.3. */
  assumedDropout?: number;
}

export const PERMISSIVE_POLICY: DevicePolicy = {
  minThreshold: 1, minNMin: 1, maxDimension: 1 << 24, requireDeviceAuth: false,
  requireConsistencyCheck: false,
};

/** A report that is not strictly increasing indices in [0, D) (Python's InvalidReport). */
export class InvalidReport extends Error {
  override name = "InvalidReport";
}

export enum DeviceState { NEW, ADVERTISED, SHARED, MASKED, CHECKED, DONE, ABORTED }

export interface DeviceOptions {
  /** With device_auth: the Ed25519 identity seed, the admission and the committed round keys. */
  identitySeed?: Uint8Array;
  admission?: Admission;
  roundKeys?: RoundKeys;
  policy?: DevicePolicy;
  rand?: RandomSource;
}

function policyProblems(config: RoundConfig, policy: DevicePolicy): string[] {
  const problems: string[] = [];
  if (config.t < policy.minThreshold) problems.push(`t=${config.t} < floor ${policy.minThreshold}`);
  if (config.nMin < policy.minNMin) problems.push(`n_min=${config.nMin} < floor ${policy.minNMin}`);
  if (config.dimension > policy.maxDimension) {
    problems.push(`dimension=${config.dimension} > cap ${policy.maxDimension}`);
  }
  if (policy.requireDeviceAuth && !config.deviceAuth) problems.push("device_auth off");
  if (policy.requireConsistencyCheck && !config.consistencyCheck) problems.push("consistency_check off");
  const corrupt = policy.maxCorruptFraction ?? null;
  if (corrupt !== null) {
    const bits = policy.securityBits ?? 40;
    const dropout = policy.assumedDropout ?? 0.3;
    if (!(corrupt >= 0 && corrupt < 1)) throw new ConfigError(`max_corrupt_fraction must be in [0, 1), got ${corrupt}`);
    if (!(dropout >= 0 && dropout < 1)) throw new ConfigError(`assumed_dropout must be in [0, 1), got ${dropout}`);
    if (!(bits > 0 && bits <= 256)) throw new ConfigError(`security_bits must be in (0, 256], got ${bits}`);
    const bound = lyingServerBound(config.numDevices, config.k, config.t, dropout, corrupt);
    // Refused also where Python's bound could pass by less than the tolerance (bounds.ts).
    if (!boundAccepts(bound, config.numDevices, bits)) {
      problems.push(`(n, k, t) = (${config.numDevices}, ${config.k}, ${config.t}) fails the ` +
                    `lying-server bound: ${bound.toPrecision(2)} > 2^-${bits} with ${corrupt} ` +
                    `corrupt and ${dropout} dropout`);
    }
  }
  return problems;
}

/** A canonical text of a request, to tell a retry (identical) from a different request. */
function fingerprint(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) =>
    v instanceof Uint8Array ? `0x${toHex(v)}` : typeof v === "bigint" ? `${v}n` : v);
}

/** The same admitted keys, the proofs aside (a roster entry carries none). */
function sameAdmission(a: Admission | null, b: Admission | null): boolean {
  if (a === null || b === null) return a === b;
  return a.deviceId === b.deviceId && equal(a.identityKey, b.identityKey) && equal(a.cPk, b.cPk)
    && equal(a.sPk, b.sPk);
}

function sameAdvert(a: AdvertiseKeys, b: AdvertiseKeys): boolean {
  return equal(a.sessionId, b.sessionId) && a.deviceId === b.deviceId && equal(a.cPk, b.cPk)
    && equal(a.sPk, b.sPk) && sameAdmission(a.admission, b.admission);
}

export class SecAggDevice {
  state = DeviceState.NEW;
  private abortError: DeviceAbort | null = null;
  private keys: RoundKeys | null;
  private advert: AdvertiseKeys | null = null;
  private b: Bytes | null = null;
  private neighbours = new Map<number, NeighbourKeys & { entry: AdvertiseKeys }>();
  private received = new Map<number, readonly [bigint, bigint]>();
  private survivors: number[] | null = null;
  private survivorsHash: Bytes = new Uint8Array(0);
  private reportKey: string | null = null;
  private readonly cache = new Map<DeviceState, [string, unknown]>();

  private constructor(readonly config: RoundConfig, readonly sessionId: Bytes,
                      readonly deviceId: number, private readonly rand: RandomSource,
                      private readonly identitySeed: Uint8Array | null,
                      private readonly admission: Admission | null, roundKeys: RoundKeys | null) {
    this.keys = roundKeys;
  }

  /** Verify the signed config against the coordinator's key and the floors, then set up. */
  static async create(configBytes: Uint8Array, signature: Uint8Array,
                      coordinatorPublic: Uint8Array, deviceId: number,
                      options: DeviceOptions = {}): Promise<SecAggDevice> {
    let config: RoundConfig;
    try {
      config = verifyConfig(configBytes, signature, coordinatorPublic);
    } catch (error) {
      throw new DeviceAbort("bad_config", String(error));
    }
    const problems = policyProblems(config, options.policy ?? PERMISSIVE_POLICY);
    if (problems.length > 0) throw new DeviceAbort("bad_config", problems.join("; "));
    if (!Number.isInteger(deviceId) || deviceId < 1 || deviceId > config.numDevices) {
      throw new ConfigError(`device_id must be in [1, ${config.numDevices}], got ${deviceId}`);
    }
    const { identitySeed, admission, roundKeys } = options;
    if (config.deviceAuth) {
      if (identitySeed === undefined || admission === undefined || roundKeys === undefined) {
        throw new ConfigError("device_auth needs an identity seed, an admission and the round " +
                              "keys presented at check-in");
      }
      if (admission.deviceId !== deviceId
          || !equal(admission.identityKey, ed25519PublicFromSeed(identitySeed))
          || !equal(admission.cPk, roundKeys.c.public) || !equal(admission.sPk, roundKeys.s.public)
          || !(await verifyAdmission(admission, config))) {
        // The config is the coordinator's (verified above), so the likely cause is benign:
        // the coordinator admitted this device with the round keys of an earlier check-in (a
        // reloaded page, whose task memory is gone, takes the same task again with new keys).
        // Either way the device must not join with keys it was not admitted with.
        throw new ConfigError("the admission is not the coordinator's for this device and its " +
                              "keys: likely this device took this task before with other round " +
                              "keys (e.g. before the page was reloaded), which it no longer has");
      }
    }
    return new SecAggDevice(config, await sessionIdOf(configBytes), deviceId,
                            options.rand ?? systemRandom, identitySeed ?? null, admission ?? null,
                            roundKeys ?? null);
  }

  // -- helpers ------------------------------------------------------------------------------

  /** Enter the aborted state, forget every secret, and return the error to throw. */
  private fail(reason: string, detail: string): DeviceAbort {
    this.abortError = new DeviceAbort(reason, detail);
    this.state = DeviceState.ABORTED;
    this.forget();
    return this.abortError;
  }

  private forget(): void {
    this.keys = null;
    this.b = null;
    this.neighbours = new Map();
    this.received = new Map();
  }

  /** Common entry checks; a cached response for an identical retried request. */
  private enter(expected: DeviceState, request: { sessionId: Uint8Array; deviceId: number }
  ): { hit: boolean; response?: unknown } {
    if (this.abortError !== null) throw this.abortError;
    const cached = this.cache.get(expected);
    if (cached !== undefined) {
      if (cached[0] === fingerprint(request)) return { hit: true, response: cached[1] };
      throw this.fail("repeated_request", `a second, different ${DeviceState[expected]} request`);
    }
    if (this.state !== expected) {
      throw this.fail("wrong_state", `got a request in state ${DeviceState[this.state]}`);
    }
    if (!equal(request.sessionId, this.sessionId) || request.deviceId !== this.deviceId) {
      throw this.fail("wrong_session", "request for another round or device");
    }
    return { hit: false };
  }

  // -- stage 0 ------------------------------------------------------------------------------

  /** This round's X25519 public keys: the committed ones (device_auth) or fresh ones. */
  advertiseKeys(): AdvertiseKeys {
    if (this.abortError !== null) throw this.abortError;
    if (this.advert !== null) return this.advert;
    this.keys ??= generateRoundKeys(this.rand);
    this.advert = { sessionId: this.sessionId, deviceId: this.deviceId, cPk: this.keys.c.public,
                    sPk: this.keys.s.public, admission: this.admission };
    this.state = DeviceState.ADVERTISED;
    return this.advert;
  }

  // -- stage 1 ------------------------------------------------------------------------------

  /** Check the roster, then Shamir-share b_u and s_u^SK among the listed neighbours. */
  async shareKeys(request: ShareKeysRequest): Promise<ShareKeysResponse> {
    const entry = this.enter(DeviceState.ADVERTISED, request);
    if (entry.hit) return entry.response as ShareKeysResponse;
    const others = await this.checkRoster(request.roster, request.rangeProof);
    const keys = this.keys;
    if (keys === null) throw this.fail("wrong_state", "no round keys");
    const me = this.deviceId;
    const neighbours = new Map<number, NeighbourKeys & { entry: AdvertiseKeys }>();
    for (const e of others) {
      let derived: NeighbourKeys;
      try {
        derived = await neighbourKeys(me, keys, this.sessionId, { id: e.deviceId, cPk: e.cPk, sPk: e.sPk });
      } catch {
        throw this.fail("bad_key", `low-order key of ${e.deviceId}`);
      }
      neighbours.set(e.deviceId, { ...derived, entry: e });
    }
    const shared = await shareKeys(me, this.config.t, this.sessionId, keys, neighbours, this.rand);
    const response: ShareKeysResponse = { sessionId: this.sessionId, deviceId: me,
                                          shares: shared.shares, bCommitment: shared.commitment };
    this.b = shared.b;
    this.neighbours = neighbours;
    this.state = DeviceState.SHARED;
    this.cache.set(DeviceState.ADVERTISED, [fingerprint(request), response]);
    return response;
  }

  private async checkRoster(roster: AdvertiseKeys[], rangeProof: Uint8Array): Promise<AdvertiseKeys[]> {
    const ids = roster.map((e) => e.deviceId);
    if (new Set(ids).size !== ids.length) throw this.fail("malformed", "a device appears twice in the roster");
    if (roster.some((e) => !equal(e.sessionId, this.sessionId))) {
      throw this.fail("wrong_session", "roster entry of another round");
    }
    const own = roster.filter((e) => e.deviceId === this.deviceId);
    if (own.length !== 1 || this.advert === null || !sameAdvert(own[0]!, this.advert)) {
      throw this.fail("key_altered", "own keys missing or altered");
    }
    const others = roster.filter((e) => e.deviceId !== this.deviceId);
    const cfg = this.config;
    const allowed = new Set(await neighboursOf(cfg.graphSeed, cfg.numDevices, cfg.k, this.deviceId));
    const strangers = others.map((e) => e.deviceId).filter((id) => !allowed.has(id));
    if (strangers.length > 0) {
      throw this.fail("unexpected_neighbour", `ids not in the committed graph: ${strangers.slice(0, 5)}`);
    }
    if (others.length < cfg.t) throw this.fail("too_few_neighbours", `${others.length} neighbours < t=${cfg.t}`);
    const seen = new Set<string>();
    for (const e of roster) {
      for (const key of [e.cPk, e.sPk]) {
        if (key.length !== KEY_BYTES) throw this.fail("bad_key", `malformed key of ${e.deviceId}`);
        seen.add(toHex(key));
      }
    }
    if (seen.size !== 2 * roster.length) throw this.fail("duplicate_key", "two roster keys are equal");
    if (cfg.deviceAuth) {
      const members: Array<[number, Member]> = [];
      for (const e of roster) {
        const adm = e.admission;
        if (adm === null || adm.deviceId !== e.deviceId || !equal(adm.cPk, e.cPk)
            || !equal(adm.sPk, e.sPk)) {
          throw this.fail("bad_signature", `entry of ${e.deviceId}`);
        }
        members.push([e.deviceId, [adm.identityKey, adm.cPk, adm.sPk]]);
      }
      if (!(rangeProof instanceof Uint8Array) || !(await verifyMembers(members, rangeProof, cfg))) {
        throw this.fail("bad_signature", "the roster's keys are not the committed ones");
      }
    }
    return others;
  }

  // -- stage 2 ------------------------------------------------------------------------------

  /**
   * Decrypt the partners' shares, then send y_u = x_u + PRG(b_u) + the pairwise masks.
   * `ones`: the strictly increasing indices of the report's one bits; InvalidReport (with no
   * change of state) otherwise.
   */
  async maskedInput(request: MaskedInputRequest, ones: readonly number[]): Promise<MaskedInput> {
    for (const [i, index] of ones.entries()) {
      if (!Number.isInteger(index) || index < 0 || index >= this.config.dimension
          || (i > 0 && index <= ones[i - 1]!)) {
        throw new InvalidReport(`report indices must be strictly increasing in [0, ${this.config.dimension})`);
      }
    }
    const report = ones.join(",");
    const cached = this.cache.get(DeviceState.SHARED);
    if (this.abortError === null && cached !== undefined && cached[0] === fingerprint(request)) {
      if (report === this.reportKey) return this.mask(ones); // a retry: the same vector
      throw this.fail("report_changed", "a retry with a different report would reveal x - x'");
    }
    this.enter(DeviceState.SHARED, request);
    const me = this.deviceId;
    const received = new Map<number, readonly [bigint, bigint]>();
    for (const s of request.shares) {
      const neighbour = this.neighbours.get(s.src);
      if (s.dst !== me || neighbour === undefined) {
        throw this.fail("unexpected_neighbour", `share ${s.src}->${s.dst}`);
      }
      if (received.has(s.src)) throw this.fail("malformed", `two shares from ${s.src}`);
      try {
        received.set(s.src, await decryptShare(me, this.sessionId, neighbour, s));
      } catch (error) {
        if (error instanceof DeviceAbort) throw this.fail(error.reason, `share from ${s.src}`);
        throw error;
      }
    }
    if (received.size < this.config.t) {
      throw this.fail("too_few_neighbours", `${received.size} mask partners < t=${this.config.t}`);
    }
    this.received = received;
    this.reportKey = report;
    this.cache.set(DeviceState.SHARED, [fingerprint(request), null]);
    this.state = DeviceState.MASKED;
    return this.mask(ones);
  }

  private async mask(ones: readonly number[]): Promise<MaskedInput> {
    if (this.b === null) throw this.fail("wrong_state", "no self-mask seed");
    const partners = new Map([...this.received.keys()].map((v) => [v, this.neighbours.get(v)!.maskKey]));
    const vector = await maskedInput(this.deviceId, this.sessionId, this.b, partners, ones,
                                     this.config.dimension, this.config.modulusBits);
    return { sessionId: this.sessionId, deviceId: this.deviceId, vector };
  }

  // -- stage 3 (optional) -------------------------------------------------------------------

  /** Sign the survivor set U3 with the identity key, after checking it. */
  async consistencyCheck(request: ConsistencyRequest): Promise<ConsistencyResponse> {
    const cfg = this.config;
    if (!cfg.consistencyCheck) {
      if (this.abortError !== null) throw this.abortError;
      throw this.fail("wrong_state", "this round has no consistency check");
    }
    const entry = this.enter(DeviceState.MASKED, request);
    if (entry.hit) return entry.response as ConsistencyResponse;
    const survivors = request.survivors;
    if (survivors.some((id, i) => !Number.isInteger(id) || id < 1 || id > cfg.numDevices
                                  || (i > 0 && id <= survivors[i - 1]!))) {
      throw this.fail("malformed", "survivors must be increasing ids");
    }
    if (!survivors.includes(this.deviceId)) throw this.fail("listed_as_dropped", "own id not in the survivor set");
    if (survivors.length < cfg.nMin) {
      throw this.fail("too_few_neighbours", `${survivors.length} survivors < n_min=${cfg.nMin}`);
    }
    if (survivors.filter((id) => this.received.has(id)).length < cfg.t) {
      throw this.fail("too_few_neighbours", "fewer than t surviving partners");
    }
    if (!(await survivorsConnected(cfg.graphSeed, cfg.numDevices, cfg.k, survivors))) {
      // Unmasking would give the server the sum of each part (graph.py).
      throw this.fail("survivors_disconnected", "U3 splits the neighbour graph");
    }
    if (this.identitySeed === null) throw this.fail("wrong_state", "no identity key");
    const digest = await survivorsDigest(survivors);
    const signature = ed25519Sign(this.identitySeed,
                                  consistencyTranscript(this.sessionId, this.deviceId, digest));
    const response: ConsistencyResponse = { sessionId: this.sessionId, deviceId: this.deviceId, signature };
    this.survivors = [...survivors];
    this.survivorsHash = digest;
    this.cache.set(DeviceState.MASKED, [fingerprint(request), response]);
    this.state = DeviceState.CHECKED;
    return response;
  }

  // -- stage 4 ------------------------------------------------------------------------------

  /** Reveal b-shares of alive partners and s-shares of dropped ones, once. */
  async unmask(request: UnmaskRequest): Promise<UnmaskResponse> {
    const expected = this.config.consistencyCheck ? DeviceState.CHECKED : DeviceState.MASKED;
    const entry = this.enter(expected, request);
    if (entry.hit) return entry.response as UnmaskResponse;
    const { alive, dropped } = request;
    for (const [name, ids] of [["alive", alive], ["dropped", dropped]] as const) {
      if (new Set(ids).size !== ids.length) throw this.fail("malformed", `an id repeats in ${name}`);
    }
    if (dropped.includes(this.deviceId)) throw this.fail("listed_as_dropped", "own id in the dropped list");
    if (alive.includes(this.deviceId)) throw this.fail("inconsistent_lists", "own id in the alive list");
    if (alive.some((id) => dropped.includes(id))) {
      throw this.fail("inconsistent_lists", "a partner is both alive and dropped");
    }
    const foreign = [...alive, ...dropped].filter((id) => !this.received.has(id));
    if (foreign.length > 0) throw this.fail("foreign_id", `not mask partners: ${foreign.slice(0, 5)}`);
    if (alive.length < this.config.t) {
      throw this.fail("too_few_neighbours", `${alive.length} alive partners < t=${this.config.t}`);
    }
    if (this.config.consistencyCheck) this.checkConsistency(request);
    const shares = unmaskShares(this.received, alive, dropped);
    const response: UnmaskResponse = { sessionId: this.sessionId, deviceId: this.deviceId,
                                       bShares: shares.b, sShares: shares.s };
    this.cache.set(expected, [fingerprint(request), response]);
    this.state = DeviceState.DONE;
    this.forget();
    return response;
  }

  private checkConsistency(request: UnmaskRequest): void {
    const u3 = new Set(this.survivors ?? []);
    const partners = [...this.received.keys()].sort((a, b) => a - b);
    const sorted = (ids: number[]): string => [...ids].sort((a, b) => a - b).join(",");
    if (sorted(request.alive) !== partners.filter((v) => u3.has(v)).join(",")
        || sorted(request.dropped) !== partners.filter((v) => !u3.has(v)).join(",")) {
      throw this.fail("inconsistent_lists", "lists disagree with the signed U3");
    }
    const signers = new Set<number>();
    for (const [w, signature] of request.signatures) {
      if (signers.size >= this.config.t) break; // t valid signatures suffice
      if (!request.alive.includes(w) || signers.has(w)) throw this.fail("foreign_id", `signature from ${w}`);
      const adm = this.neighbours.get(w)?.entry.admission ?? null;
      if (adm === null || !ed25519Verify(adm.identityKey, signature,
                                         consistencyTranscript(this.sessionId, w, this.survivorsHash))) {
        throw this.fail("bad_signature", `consistency signature of ${w}`);
      }
      signers.add(w);
    }
    if (signers.size < this.config.t) {
      throw this.fail("too_few_neighbours", `${signers.size} consistency signatures < t=${this.config.t}`);
    }
  }
}

