/**
 * A refused enrolment token is explained by its cause. Every refusal used to be explained as a
 * spent token in a browser that lost the device's storage ("it never enrolled here, or the
 * site's data was cleared"), also an expired token and one the page mangled (a line break read
 * with it), neither of which was ever used: the operator looked for cleared site data.
 * The coordinator's words are those of server/fedhh_coordinator (store.py, enrollment.py).
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";

import { MemoryBudgetStore } from "../src/budget.js";
import { MemoryIdentityStore } from "../src/identity.js";
import type { Coordinator } from "../src/loop.js";
import { runDevice } from "../src/run.js";
import type { CheckIn, Identity } from "../src/wire.js";

function refusing(why: string): Coordinator & { enrolls: number } {
  return {
    enrolls: 0,
    async enroll(): Promise<Identity> {
      this.enrolls += 1;
      throw new ConnectError(why, Code.Unauthenticated);
    },
    async checkIn(): Promise<CheckIn> {
      throw new Error("a device that did not enrol checked in");
    },
  };
}

async function refusal(why: string, token: string): Promise<string> {
  const coordinator = refusing(why);
  const identities = new MemoryIdentityStore();
  let message = "";
  await assert.rejects(
    runDevice({ coordinatorUrl: "https://unused.test", items: ["😀", "東京", "https://a.example/?q=1"],
                name: "shop", coordinator, enrollmentToken: token, identityStore: identities,
                budgetStore: new MemoryBudgetStore(), jitter: () => 0 }),
    (error: ConnectError) => {
      assert.ok(error instanceof ConnectError);
      assert.equal(error.code, Code.Unauthenticated);
      message = error.rawMessage;
      return true;
    });
  assert.equal(coordinator.enrolls, 1, "a refused token is not presented again");
  assert.equal(await identities.load(), null);
  assert.equal(await identities.loadPending(), null, "nothing pending for a refused token");
  assert.doesNotMatch(message, /😀|東京|a\.example/, "the device's items are never in it");
  return message;
}

const TOKEN = "ab".repeat(32);

test("an expired token is explained as expired, not as lost storage", async () => {
  const message = await refusal("expired enrollment token", TOKEN);
  assert.match(message, /enrolment token of device fedhh-device\/shop \(expired enrollment token\)/);
  assert.match(message, /expired before this device enrolled with it: it needs a new enrolment token/);
  assert.doesNotMatch(message, /IndexedDB|cleared/);
});

test("a token not as the coordinator issued it says to check how the page got it", async () => {
  const message = await refusal("an enrollment token is 64 hex digits", `${TOKEN}\n`);
  assert.match(message, /not as the coordinator issued it .* no space or line break .* check how the page was given it/);
  assert.doesNotMatch(message, /IndexedDB|cleared/);
});

test("an unknown or used token is explained as lost storage", async () => {
  const message = await refusal("unknown or already used enrollment token", TOKEN);
  assert.match(message, /holds no identity .* the site's data \(IndexedDB\) was cleared .* needs a new enrolment token/);
});

test("an enrolment signature the coordinator cannot verify is explained as a version mismatch",
     async () => {
  // Before, as a used token and cleared site data: the token, checked after the signature, was
  // never spent, and a new one met the same refusal from the same page.
  for (const why of [
    "enrollment_signature is missing: an enrollment request must be signed with the identity " +
      "key it enrolls (proof that the caller holds it; a device older than this check must be " +
      "updated)",
    "enrollment_signature does not verify under identity_public_key: the request was not " +
      "signed by the holder of that key (or token, label or attestation differ from what was " +
      "signed)"]) {
    const message = await refusal(why, TOKEN);
    assert.match(message, /could not verify this device's enrolment signature: the page's device code and the coordinator come from different fedhh versions\. Reload the page .* the token was not spent$/);
    assert.doesNotMatch(message, /IndexedDB|cleared|new enrolment token/);
  }
});

test("another refusal (an attestation) is left to the operator, not explained as a used token",
     async () => {
  const message = await refusal("attestation refused: unknown app id", TOKEN);
  assert.match(message, /\(attestation refused: unknown app id\)\. The coordinator refused the enrolment for the reason it gives, not as a used token/);
  assert.doesNotMatch(message, /IndexedDB|cleared|new enrolment token/);
});
