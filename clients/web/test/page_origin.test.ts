/**
 * A page's origin and the services' CORS allow list (`--web-origin`):
 *
 * - a page with an opaque origin (opened from a file, a sandboxed frame: `location.origin` is
 *   "null") can be allowed by no service, so it is refused before anything is sent; before, it
 *   sent its enrolment again forever, every try "Failed to fetch";
 * - a call that gets no answer says, in a page, that a service which does not allow the page's
 *   origin looks the same (a browser hides the refused preflight from the page); before, the
 *   page showed "Failed to fetch" alone, as for a coordinator that is down.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { Code } from "@connectrpc/connect";

import { MemoryBudgetStore } from "../src/budget.js";
import { MemoryIdentityStore } from "../src/identity.js";
import { type DeviceEvent, UnsupportedBrowserError, runDevice } from "../src/run.js";

const scope = globalThis as { location?: { origin: string } };

async function firstFailure(coordinatorUrl = "https://fedhh.example:7080"
): Promise<{ events: DeviceEvent[]; fetched: number }> {
  const stop = new AbortController();
  const events: DeviceEvent[] = [];
  let fetched = 0;
  await assert.rejects(runDevice({
    coordinatorUrl, enrollmentToken: "ab".repeat(32),
    items: ["a"], identityStore: new MemoryIdentityStore(), budgetStore: new MemoryBudgetStore(),
    signal: stop.signal, jitter: () => 0,
    fetch: async () => { fetched += 1; throw new TypeError("Failed to fetch"); },
    onEvent: (event) => { events.push(event); stop.abort(new Error("seen")); } }), /seen/);
  return { events, fetched };
}

test("a page with an opaque origin is refused before anything is sent", async () => {
  scope.location = { origin: "null" };
  try {
    const identities = new MemoryIdentityStore();
    let fetched = 0;
    const stop = new AbortController();  // (before, the enrolment was sent again forever)
    await assert.rejects(runDevice({
      coordinatorUrl: "https://fedhh.example:7080", enrollmentToken: "ab".repeat(32),
      items: ["a"], identityStore: identities, budgetStore: new MemoryBudgetStore(),
      signal: stop.signal, jitter: () => 0,
      fetch: async () => {
        fetched += 1;
        stop.abort(new Error("sent"));
        throw new TypeError("Failed to fetch");
      } }),
      (error: Error) => error instanceof UnsupportedBrowserError
        && /no origin of its own \(it was opened from a file, or runs in a sandboxed frame\)/
          .test(error.message));
    assert.equal(fetched, 0);
    assert.equal(await identities.loadPending(), null, "the token is not even pending");
  } finally {
    delete scope.location;
  }
});

test("a call with no answer names the page's origin as a cause, in a page", async () => {
  scope.location = { origin: "https://app.example" };
  try {
    const { events, fetched } = await firstFailure();
    assert.equal(fetched, 1);
    assert.deepEqual(events, [{
      type: "enroll-failed", code: Code.Unavailable, retryInMs: 0,
      message: "Failed to fetch: the service is down or out of reach, its certificate is not " +
               "one this browser trusts, or it does not allow this page's origin " +
               "https://app.example (its --web-origin)" }]);
  } finally {
    delete scope.location;
  }
  // Outside a page (Node): the transport's words alone.
  const { events } = await firstFailure();
  assert.deepEqual(events.map((e) => e.type === "enroll-failed" ? e.message : e.type),
                   ["Failed to fetch"]);
});

test("a call with no answer from a plain-http service names no certificate", async () => {
  // (an https service's untrusted certificate fails as "Failed to fetch" too, its reason in
  // the console alone: before, the page was told only of a service down or an origin refused)
  scope.location = { origin: "http://localhost:8000" };
  try {
    const { events } = await firstFailure("http://localhost:7080");
    assert.deepEqual(events.map((e) => e.type === "enroll-failed" ? e.message : e.type), [
      "Failed to fetch: the service is down or out of reach, or it does not allow this page's " +
      "origin http://localhost:8000 (its --web-origin)"]);
  } finally {
    delete scope.location;
  }
});

test("a call with no answer from a browser that knows it is offline says so, not the origin", async () => {
  // Before, an offline page was told that the service is down or does not allow its origin.
  const page = globalThis as { location?: { origin: string }; navigator?: unknown };
  const navigator = Object.getOwnPropertyDescriptor(globalThis, "navigator");
  page.location = { origin: "https://app.example" };
  Object.defineProperty(globalThis, "navigator", { configurable: true, writable: true,
                                                   value: { onLine: false } });
  try {
    const { events } = await firstFailure();
    assert.deepEqual(events.map((e) => e.type === "enroll-failed" ? e.message : e.type),
                     ["Failed to fetch: this browser is offline"]);
  } finally {
    delete page.location;
    if (navigator === undefined) delete page.navigator;
    else Object.defineProperty(globalThis, "navigator", navigator);
  }
});

test("a call the page's Content-Security-Policy refuses names the origin to add to connect-src", async () => {
  // A browser refuses the fetch ("Failed to fetch") and then fires `securitypolicyviolation`
  // at the page, as a task. Before, the page was told the service was down or did not allow
  // its origin, and the operator looked for the fault in the services.
  const page = globalThis as { location?: { origin: string };
                               addEventListener?: EventTarget["addEventListener"] };
  const target = new EventTarget();
  page.location = { origin: "https://app.example" };
  page.addEventListener = target.addEventListener.bind(target);
  try {
    const stop = new AbortController();
    const events: DeviceEvent[] = [];
    await assert.rejects(runDevice({
      coordinatorUrl: "https://fedhh.example:7080", enrollmentToken: "ab".repeat(32),
      items: ["a"], identityStore: new MemoryIdentityStore(), budgetStore: new MemoryBudgetStore(),
      signal: stop.signal, jitter: () => 0,
      fetch: async (url) => {
        setTimeout(() => target.dispatchEvent(Object.assign(
          new Event("securitypolicyviolation"),
          { effectiveDirective: "connect-src", blockedURI: String(url) })), 0);
        throw new TypeError("Failed to fetch");
      },
      onEvent: (event) => { events.push(event); stop.abort(new Error("seen")); } }), /seen/);
    assert.deepEqual(events, [{
      type: "enroll-failed", code: Code.Unavailable, retryInMs: 0,
      message: "Failed to fetch: this page's Content-Security-Policy blocks calls to " +
               "https://fedhh.example:7080 (add https://fedhh.example:7080 to its connect-src)" }]);
  } finally {
    delete page.location;
    delete page.addEventListener;
  }
});
