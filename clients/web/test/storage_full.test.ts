/**
 * A device whose browser storage is full (or refused) says so and acts on nothing it could not
 * keep: a budget that cannot be saved sends no report and spends nothing; a pending enrolment
 * that cannot be kept sends nothing (the token stays unspent); an identity that cannot be kept
 * after enrolling says how the same token and key enrol it again. Before, each ended with the
 * store's bare "QuotaExceededError: ..." and nothing said what had been sent or spent.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { type BudgetState, DeviceBudget, MemoryBudgetStore } from "../src/budget.js";
import type { Bytes } from "../src/bytes.js";
import { TaskSchema } from "../src/gen/fedhh/v1/coordinator_pb.js";
import { MemoryIdentityStore, type PendingEnrolment } from "../src/identity.js";
import type { Coordinator } from "../src/loop.js";
import { UnsupportedBrowserError, runDevice } from "../src/run.js";
import { StorageError } from "../src/storage.js";
import type { Identity } from "../src/wire.js";

const quota = () => new DOMException("The quota has been exceeded.", "QuotaExceededError");

class FullBudgetStore extends MemoryBudgetStore {
  full = true;
  override async save(state: BudgetState): Promise<void> {
    if (this.full) throw quota();
    await super.save(state);
  }
}

test("a budget that cannot be saved sends no report and spends nothing", async () => {
  const store = new FullBudgetStore();
  const budget = await DeviceBudget.open(store, 10, 86_400);
  const task = create(TaskSchema, { runId: "r", round: 1, epsLocal: 2, codec: "bytes", maxBits: 8 });
  await assert.rejects(budget.report(task, () => [3]), (error: Error) => {
    assert.ok(error instanceof StorageError, String(error));
    assert.equal(error.message, "the device's budget could not be saved (QuotaExceededError: " +
      "The quota has been exceeded.; the browser's storage for this site may be full or " +
      "refused): the report is not sent and nothing is spent; the device takes the next round " +
      "once the budget can be saved");
    return true;
  });
  assert.equal(budget.spent(), 0);
  assert.equal(await store.load(), null);
  // Once it can be saved, the round's report is made afresh and spent once.
  store.full = false;
  assert.deepEqual(await budget.report(task, () => [5]), [5]);
  assert.equal(budget.spent(), 2);
});

/** A coordinator that enrols any token, counting the enrolments and the seeds presented. */
function coordinator(): Coordinator & { seeds: Uint8Array[] } {
  return {
    seeds: [],
    async enroll(_token: string, _label?: string, seed?: Bytes): Promise<Identity> {
      this.seeds.push(seed!);
      return { deviceId: 41n, credential: new Uint8Array(32).fill(1), identitySeed: seed!,
               coordinatorPublic: new Uint8Array(32).fill(9) };
    },
    async checkIn(): Promise<never> { throw new Error("not reached"); },
  };
}

class FlakyIdentityStore extends MemoryIdentityStore {
  pendingFull = false;
  identityFull = false;
  override async save(identity: Identity | null): Promise<void> {
    if (this.identityFull && identity !== null) throw quota();
    await super.save(identity);
  }
  override async savePending(pending: PendingEnrolment | null): Promise<void> {
    if (this.pendingFull && pending !== null) throw quota();
    await super.savePending(pending);
  }
}

const base = { coordinatorUrl: "https://unused.test", enrollmentToken: "token-1", items: ["a"],
               budgetStore: new MemoryBudgetStore(), tasks: 0 };

test("a pending enrolment that cannot be kept sends nothing: the token is not spent", async () => {
  const identities = new FlakyIdentityStore();
  identities.pendingFull = true;
  const service = coordinator();
  await assert.rejects(runDevice({ ...base, identityStore: identities, coordinator: service }),
    (error: Error) => {
      assert.ok(error instanceof StorageError, String(error));
      assert.match(error.message, /^the pending enrolment of device fedhh-device could not be saved \(QuotaExceededError: .*\): nothing was sent and the token is not spent/);
      return true;
    });
  assert.equal(service.seeds.length, 0);
});

test("an identity that cannot be kept after enrolling says how the same token enrols it again", async () => {
  const identities = new FlakyIdentityStore();
  identities.identityFull = true;
  const service = coordinator();
  await assert.rejects(runDevice({ ...base, identityStore: identities, coordinator: service }),
    (error: Error) => {
      assert.ok(error instanceof StorageError, String(error));
      assert.match(error.message, /^the identity of device fedhh-device \(enrolled as device id 41\) could not be saved \(QuotaExceededError: .*\): reload the page within 15 minutes/);
      return true;
    });
  // The reload once the site can store data: the same token with the same key.
  identities.identityFull = false;
  const summary = await runDevice({ ...base, identityStore: identities, coordinator: service });
  assert.equal(summary.identity.deviceId, 41n);
  assert.equal(service.seeds.length, 2);
  assert.deepEqual(service.seeds[1], service.seeds[0]);
  assert.equal(await identities.loadPending(), null);
});

test("a browser that refuses the site IndexedDB (site data blocked, a private window) says so; nothing is sent", async () => {
  // The database's open fails as Firefox fails it with site data blocked. Before, runDevice
  // threw the store's "SecurityError: The operation is insecure." alone.
  const page = globalThis as { indexedDB?: unknown; isSecureContext?: boolean };
  const navigator = Object.getOwnPropertyDescriptor(globalThis, "navigator");
  page.indexedDB = {
    open: () => {
      const request: { error?: DOMException; onerror?: () => void } = {};
      setTimeout(() => {
        request.error = new DOMException("The operation is insecure.", "SecurityError");
        request.onerror?.();
      }, 0);
      return request;
    },
  };
  Object.defineProperty(globalThis, "navigator", { configurable: true, writable: true, value: {
    locks: { request: async (_name: string, _options: unknown, body: (lock: unknown) => unknown) =>
      body({ name: _name }) } } });
  let fetched = 0;
  try {
    await assert.rejects(runDevice({
      coordinatorUrl: "https://fedhh.example:7080", enrollmentToken: "ab".repeat(32),
      items: ["a"], fetch: async () => { fetched += 1; throw new TypeError("Failed to fetch"); },
    }), (error: Error) => {
      assert.ok(error instanceof UnsupportedBrowserError, String(error));
      assert.equal(error.message, "this browser refuses the device's storage to this site " +
        "(IndexedDB: SecurityError: The operation is insecure.): the device keeps its identity " +
        "and budget there. Allow the site to store data (cookies and site data), or open the " +
        "page outside a private window; nothing was sent");
      assert.ok(error.cause instanceof DOMException);
      return true;
    });
    assert.equal(fetched, 0);
  } finally {
    delete page.indexedDB;
    if (navigator === undefined) delete (globalThis as { navigator?: unknown }).navigator;
    else Object.defineProperty(globalThis, "navigator", navigator);
  }
});

test("a database another tab holds open at an older version is told in its own words, not as a refusal", async () => {
  // Only the errors with which a browser refuses a site its IndexedDB are told as a refusal.
  // Before, every failure of the identity's load was, this one with the advice to allow site
  // data or leave a private window, though another tab of the page is what holds it.
  const page = globalThis as { indexedDB?: unknown };
  const navigator = Object.getOwnPropertyDescriptor(globalThis, "navigator");
  page.indexedDB = {
    open: () => {
      const request: { onblocked?: () => void } = {};
      setTimeout(() => request.onblocked?.(), 0);
      return request;
    },
  };
  Object.defineProperty(globalThis, "navigator", { configurable: true, writable: true, value: {
    locks: { request: async (_name: string, _options: unknown, body: (lock: unknown) => unknown) =>
      body({ name: _name }) } } });
  let fetched = 0;
  try {
    await assert.rejects(runDevice({
      coordinatorUrl: "https://fedhh.example:7080", enrollmentToken: "ab".repeat(32),
      items: ["a"], fetch: async () => { fetched += 1; throw new TypeError("Failed to fetch"); },
    }), (error: Error) => {
      assert.ok(!(error instanceof UnsupportedBrowserError), String(error));
      assert.equal(error.message, "fedhh-device is held open at an older version by another " +
        "tab of this site (one still running an older version of this page): close the site's " +
        "other tabs, then reload this one");
      return true;
    });
    assert.equal(fetched, 0);
  } finally {
    delete page.indexedDB;
    if (navigator === undefined) delete (globalThis as { navigator?: unknown }).navigator;
    else Object.defineProperty(globalThis, "navigator", navigator);
  }
});

test("a database a newer bundle upgraded says the page's code is older and to reload", async () => {
  // A cached bundle, or a site rolled back, after a newer one upgraded the device's database:
  // before, the page showed the browser's VersionError alone, on every load.
  const page = globalThis as { indexedDB?: unknown };
  const navigator = Object.getOwnPropertyDescriptor(globalThis, "navigator");
  page.indexedDB = {
    open: () => {
      const request: { error?: DOMException; onerror?: () => void } = {};
      setTimeout(() => {
        request.error = new DOMException(
          "The requested version (2) is less than the existing version (3).", "VersionError");
        request.onerror?.();
      }, 0);
      return request;
    },
  };
  Object.defineProperty(globalThis, "navigator", { configurable: true, writable: true, value: {
    locks: { request: async (_name: string, _options: unknown, body: (lock: unknown) => unknown) =>
      body({ name: _name }) } } });
  let fetched = 0;
  try {
    await assert.rejects(runDevice({
      coordinatorUrl: "https://fedhh.example:7080", enrollmentToken: "ab".repeat(32),
      items: ["a"], fetch: async () => { fetched += 1; throw new TypeError("Failed to fetch"); },
    }), (error: Error) => {
      assert.ok(!(error instanceof UnsupportedBrowserError), String(error));
      assert.equal(error.message, "fedhh-device was last kept by a newer version of this " +
        "page's device code (VersionError: The requested version (2) is less than the existing " +
        "version (3).; this code reads version 2): reload the page (if this persists, the site " +
        "or a cache still serves an older bundle: the operator must serve the current one); " +
        "the storage is left as it is");
      assert.ok(error.cause instanceof DOMException);
      return true;
    });
    assert.equal(fetched, 0);
  } finally {
    delete page.indexedDB;
    if (navigator === undefined) delete (globalThis as { navigator?: unknown }).navigator;
    else Object.defineProperty(globalThis, "navigator", navigator);
  }
});
