/**
 * A coordinator URL that is not an absolute http(s) URL is refused before anything is sent,
 * saying what is expected. Before, "fedhh.example:7080" (the Python device's form of an
 * address: a URL of scheme "fedhh.example" to fetch), "127.0.0.1:7080", "" or "ftp://x" failed
 * every call as if the coordinator did not answer, and the device sent its enrolment again,
 * forever ("enroll-failed: fetch failed").
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { MemoryBudgetStore } from "../src/budget.js";
import { MemoryIdentityStore } from "../src/identity.js";
import { checkServiceUrl, runDevice } from "../src/run.js";

test("a coordinator URL that is no http(s) URL is refused before anything is sent", async () => {
  for (const url of ["fedhh.example:7080", "127.0.0.1:7080", "", "ftp://fedhh.example",
                     "/relative", "https://", "fedhh.example"]) {
    const identities = new MemoryIdentityStore();
    let fetched = 0;
    const events: string[] = [];
    await assert.rejects(
      runDevice({ coordinatorUrl: url, enrollmentToken: "ab".repeat(32), items: ["東京"],
                  identityStore: identities, budgetStore: new MemoryBudgetStore(),
                  fetch: async () => { fetched += 1; throw new TypeError("fetch failed"); },
                  onEvent: (event) => events.push(event.type) }),
      (error: Error) => {
        assert.ok(error instanceof RangeError, `${url}: ${error}`);
        assert.equal(error.message, "coordinatorUrl must be a service's Connect URL, such as " +
                                    `https://fedhh.example:7080, got ${JSON.stringify(url)}`);
        return true;
      });
    assert.equal(fetched, 0, `${url}: nothing is sent`);
    assert.deepEqual(events, []);
    assert.equal(await identities.loadPending(), null, `${url}: the token is not even pending`);
  }
});

test("a URL with a query, a fragment or credentials is refused, naming which, before anything is sent", async () => {
  // Before, the calls' paths were appended after the query or fragment ("https://h/?x=1/
  // fedhh.v1.DeviceService/Enroll": every call 404), and a browser refuses to fetch a URL with
  // credentials, which the device took for an unreachable coordinator and retried forever.
  const cases: [string, string, string][] = [
    ["https://fedhh.example/fedhh/?x=1", "a query (?…)", "https://fedhh.example/fedhh/?x=1"],
    ["https://fedhh.example:7080/?", "a query (?…)", "https://fedhh.example:7080/?"],
    ["https://fedhh.example:7080/#top", "a fragment (#…)", "https://fedhh.example:7080/#top"],
    ["https://alice:s3cret@fedhh.example:7080", "a user name or password",
     "https://alice:***@fedhh.example:7080/"],
    ["https://alice@fedhh.example:7080", "a user name or password", "https://alice@fedhh.example:7080"],
  ];
  for (const [url, what, shown] of cases) {
    let fetched = 0;
    await assert.rejects(
      runDevice({ coordinatorUrl: url, enrollmentToken: "ab".repeat(32), items: ["東京"],
                  identityStore: new MemoryIdentityStore(), budgetStore: new MemoryBudgetStore(),
                  fetch: async () => { fetched += 1; throw new TypeError("fetch failed"); } }),
      (error: Error) => {
        assert.ok(error instanceof RangeError, `${url}: ${error}`);
        assert.equal(error.message, "coordinatorUrl must be a service's Connect URL with at " +
                     "most a path after its host (https://fedhh.example/fedhh behind a path " +
                     `prefix), not ${what}: got ${JSON.stringify(shown)}`);
        assert.ok(!error.message.includes("s3cret"), "a password is never quoted");
        return true;
      });
    assert.equal(fetched, 0, `${url}: nothing is sent`);
  }
});

test("http and https URLs with a host are accepted", () => {
  for (const url of ["https://fedhh.example:7080", "http://127.0.0.1:7080", "https://[::1]:7080/",
                     "https://xn--bcher-kva.example", "https://fedhh.example/fedhh",
                     "https://fedhh.example/fedhh/"]) {
    checkServiceUrl(url, "coordinatorUrl");
  }
});

test("a coordinator behind a path prefix is called under it, with or without a final slash", async () => {
  for (const url of ["https://fedhh.example/fedhh", "https://fedhh.example/fedhh/"]) {
    const seen: string[] = [];
    const stop = new AbortController();
    await assert.rejects(runDevice({
      coordinatorUrl: url, enrollmentToken: "ab".repeat(32), items: ["東京"],
      identityStore: new MemoryIdentityStore(), budgetStore: new MemoryBudgetStore(),
      signal: stop.signal, jitter: () => 0,
      fetch: async (input) => {
        seen.push(String(input instanceof Request ? input.url : input));
        stop.abort(new Error("seen"));
        throw new TypeError("fetch failed");
      } }), /seen/);
    assert.deepEqual(seen, ["https://fedhh.example/fedhh/fedhh.v1.DeviceService/Enroll"]);
  }
});

test("a plain-http URL that an https page may not call (mixed content) is refused before anything is sent", async () => {
  // The browser blocks such a call before it leaves ("Failed to fetch"); before, the device
  // took it for a coordinator that is down and sent its enrolment again, forever.
  const scope = globalThis as { location?: { origin: string; protocol: string } };
  scope.location = { origin: "https://app.example", protocol: "https:" };
  try {
    let fetched = 0;
    const identities = new MemoryIdentityStore();
    const stop = new AbortController();  // (before, the enrolment was sent again forever)
    await assert.rejects(
      runDevice({ coordinatorUrl: "http://fedhh.example:7080", enrollmentToken: "ab".repeat(32),
                  items: ["a"], identityStore: identities, budgetStore: new MemoryBudgetStore(),
                  signal: stop.signal, jitter: () => 0,
                  fetch: async () => {
                    fetched += 1;
                    stop.abort(new Error("sent"));
                    throw new TypeError("Failed to fetch");
                  } }),
      (error: Error) => {
        assert.ok(error instanceof RangeError, String(error));
        assert.equal(error.message, 'coordinatorUrl is plain http ("http://fedhh.example:7080") ' +
                     "and this page is served over https: the browser blocks such calls as " +
                     'mixed content (each fails as "Failed to fetch"); give the service\'s ' +
                     "https URL");
        return true;
      });
    assert.equal(fetched, 0);
    assert.equal(await identities.loadPending(), null, "the token is not even pending");
    for (const url of ["http://10.0.0.7", "http://127.0.0.1.example", "http://localhost.example",
                       "http://[::2]:7080"]) {
      assert.throws(() => checkServiceUrl(url, "coordinatorUrl"), /mixed content/, url);
    }
    // Loopback hosts, which browsers trust over http, and https are allowed.
    for (const url of ["http://127.0.0.1:7080", "http://127.8.9.10", "http://localhost:7080",
                       "http://LOCALHOST", "http://app.localhost/fedhh", "http://[::1]:7080",
                       "https://fedhh.example:7080"]) {
      checkServiceUrl(url, "coordinatorUrl");
    }
    // A page served over http (a secure context only on loopback) calls http URLs.
    scope.location = { origin: "http://localhost:8000", protocol: "http:" };
    checkServiceUrl("http://fedhh.example:7080", "coordinatorUrl");
  } finally {
    delete scope.location;
  }
  checkServiceUrl("http://fedhh.example:7080", "coordinatorUrl");  // outside a page (Node)
});
