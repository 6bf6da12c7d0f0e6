/**
 * Where a device keeps the identity `enroll` gave it (fleet.py keeps it in devices.json): the
 * device id, the credential, the Ed25519 identity seed and the coordinator's public key,
 * pinned at enrolment. A page that finds it stored goes on as the same device (same budget,
 * same id) and never presents its spent one-time token again.
 *
 * The identity seed is kept as raw bytes, not as a non-extractable WebCrypto key: the device
 * signs with `@noble/curves` from the seed (src/primitives.ts; each aggregator call and the
 * consistency signature, synchronously, in the state machine the vectors check), and WebCrypto
 * has Ed25519 only in recent browsers (docs/web-devices.md, "what the device stores").
 *
 * Before an enrolment is sent, its token and the fresh identity seed are kept as the pending
 * enrolment (`savePending`): if the answer is lost (the network dropped, the tab was closed),
 * the device presents the same token with the same key again, and the coordinator, which sent
 * the lost answer, enrols it as the same device with a new credential (within its reissue
 * window, 15 minutes) instead of refusing the spent token. The pending record is forgotten
 * once the identity is kept, or the coordinator refused the token.
 */

import { type Bytes, own } from "./bytes.js";
import { KEY_BYTES } from "./primitives.js";
import { deviceDatabase, idbGet, idbPut } from "./storage.js";
import type { Identity } from "./wire.js";

/** An enrolment sent and not answered yet: its one-time token and the identity seed. */
export interface PendingEnrolment {
  token: string;
  identitySeed: Bytes;
}

/** Where a device keeps its identity between page loads. */
export interface IdentityStore {
  load(): Promise<Identity | null>;
  /** Keeps `identity`; null forgets it (the device must then enrol again, as a new device). */
  save(identity: Identity | null): Promise<void>;
  /**
   * The enrolment sent last and not answered (module docstring), and keeping it (null forgets
   * it). A store without them cannot resume an enrolment whose answer a closed tab lost.
   */
  loadPending?(): Promise<PendingEnrolment | null>;
  savePending?(pending: PendingEnrolment | null): Promise<void>;
}

/** A store in memory (node tests; a page that must not persist anything). */
export class MemoryIdentityStore implements IdentityStore {
  private saved: Identity | null = null;
  private pending: PendingEnrolment | null = null;

  async load(): Promise<Identity | null> {
    return this.saved === null ? null : copy(this.saved);
  }

  async save(identity: Identity | null): Promise<void> {
    this.saved = identity === null ? null : copy(identity);
  }

  async loadPending(): Promise<PendingEnrolment | null> {
    return this.pending === null ? null
      : { token: this.pending.token, identitySeed: own(this.pending.identitySeed) };
  }

  async savePending(pending: PendingEnrolment | null): Promise<void> {
    this.pending = pending === null ? null
      : { token: pending.token, identitySeed: own(pending.identitySeed) };
  }
}

/** The stored form: structured-clone values, the id as a decimal string. */
interface StoredIdentity {
  version: 1;
  deviceId: string;
  credential: Uint8Array;
  identitySeed: Uint8Array;
  coordinatorPublic: Uint8Array;
}

/** The stored form of a pending enrolment. */
interface StoredPending {
  version: 1;
  token: string;
  identitySeed: Uint8Array;
}

/**
 * A store in IndexedDB: record "identity" of object store "identity" of `database` (and
 * "pending", the pending enrolment).
 */
export class IndexedDbIdentityStore implements IdentityStore {
  constructor(private readonly database = deviceDatabase()) {}

  async load(): Promise<Identity | null> {
    const stored = await idbGet(this.database, "identity", "identity") as StoredIdentity | undefined;
    if (stored === undefined) return null;
    if (stored.version !== 1 || typeof stored.deviceId !== "string") {
      throw new RangeError(`the identity stored in ${this.database} is not one this device reads`);
    }
    return check({ deviceId: BigInt(stored.deviceId), credential: own(stored.credential),
                   identitySeed: own(stored.identitySeed),
                   coordinatorPublic: own(stored.coordinatorPublic) }, this.database);
  }

  async save(identity: Identity | null): Promise<void> {
    const value: StoredIdentity | undefined = identity === null ? undefined : {
      version: 1, deviceId: identity.deviceId.toString(), credential: own(identity.credential),
      identitySeed: own(identity.identitySeed), coordinatorPublic: own(identity.coordinatorPublic),
    };
    await idbPut(this.database, "identity", "identity", value);
  }

  async loadPending(): Promise<PendingEnrolment | null> {
    const stored = await idbGet(this.database, "identity", "pending") as StoredPending | undefined;
    if (stored === undefined) return null;
    if (stored.version !== 1 || typeof stored.token !== "string"
        || own(stored.identitySeed).length !== KEY_BYTES) {
      throw new RangeError(`the pending enrolment stored in ${this.database} is not one this ` +
                           "device reads");
    }
    return { token: stored.token, identitySeed: own(stored.identitySeed) };
  }

  async savePending(pending: PendingEnrolment | null): Promise<void> {
    const value: StoredPending | undefined = pending === null ? undefined
      : { version: 1, token: pending.token, identitySeed: own(pending.identitySeed) };
    await idbPut(this.database, "identity", "pending", value);
  }
}

function copy(identity: Identity): Identity {
  return { deviceId: identity.deviceId, credential: own(identity.credential),
           identitySeed: own(identity.identitySeed),
           coordinatorPublic: own(identity.coordinatorPublic) };
}

function check(identity: Identity, where: string): Identity {
  const sizes: Array<[string, Bytes, number]> = [
    ["credential", identity.credential, 32], ["identity seed", identity.identitySeed, KEY_BYTES],
    ["coordinator key", identity.coordinatorPublic, KEY_BYTES]];
  for (const [name, value, size] of sizes) {
    if (value.length !== size) {
      throw new RangeError(`the ${name} stored in ${where} has ${value.length} bytes, not ${size}`);
    }
  }
  return identity;
}
