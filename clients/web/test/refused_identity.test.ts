/**
 * A device the coordinator will not know says why, in words a page can show its user: its
 * token refused while the browser holds no identity for it (the site's data cleared after it
 * enrolled, so the token is spent), or its credential refused (the coordinator's data reset).
 * The page showed the coordinator's words alone: "[unauthenticated] unknown or already used
 * enrollment token".
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";

import { MemoryBudgetStore } from "../src/budget.js";
import { MemoryIdentityStore } from "../src/identity.js";
import type { Coordinator } from "../src/loop.js";
import { runDevice } from "../src/run.js";
import type { CheckIn, Identity } from "../src/wire.js";

const REFUSED = "unknown or already used enrollment token";

function refusing(): Coordinator & { enrolls: number; checkIns: number } {
  return {
    enrolls: 0,
    checkIns: 0,
    async enroll(): Promise<Identity> {
      this.enrolls += 1;
      throw new ConnectError(REFUSED, Code.Unauthenticated);
    },
    async checkIn(): Promise<CheckIn> {
      this.checkIns += 1;
      throw new ConnectError("unknown device or wrong credential", Code.Unauthenticated);
    },
  };
}

const base = { coordinatorUrl: "https://unused.test", items: ["a"], name: "demo/s/0",
               budgetStore: new MemoryBudgetStore(), jitter: () => 0 };

test("a spent token in a browser that lost the device's storage says so", async () => {
  const coordinator = refusing();
  await assert.rejects(
    runDevice({ ...base, coordinator, enrollmentToken: "spent",
                identityStore: new MemoryIdentityStore() }),
    (error: ConnectError) => {
      assert.ok(error instanceof ConnectError);
      assert.equal(error.code, Code.Unauthenticated);
      assert.match(error.rawMessage, new RegExp(`enrolment token of device fedhh-device/demo/s/0 \\(${REFUSED}\\)`));
      assert.match(error.rawMessage, /holds no identity .* the site's data \(IndexedDB\) was cleared/);
      assert.match(error.rawMessage, /needs a new enrolment token/);
      return true;
    });
  assert.equal(coordinator.enrolls, 1, "a refused token is not presented again");
});

test("a credential the coordinator no longer knows says so", async () => {
  const coordinator = refusing();
  const identities = new MemoryIdentityStore();
  await identities.save({ deviceId: 39n, credential: new Uint8Array(32).fill(1),
                          identitySeed: new Uint8Array(32).fill(2),
                          coordinatorPublic: new Uint8Array(32) });
  await assert.rejects(
    runDevice({ ...base, coordinator, enrollmentToken: "", identityStore: identities }),
    (error: ConnectError) => {
      assert.equal(error.code, Code.Unauthenticated);
      assert.match(error.rawMessage, /refused the credential of device fedhh-device\/demo\/s\/0 \(device id 39: unknown device/);
      assert.match(error.rawMessage, /no longer knows this device .* needs a new enrolment token/);
      return true;
    });
  assert.equal(coordinator.enrolls, 0);
  assert.equal(coordinator.checkIns, 1);
});
