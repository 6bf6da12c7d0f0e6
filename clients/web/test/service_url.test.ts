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

test("http and https URLs with a host are accepted", () => {
  for (const url of ["https://fedhh.example:7080", "http://127.0.0.1:7080", "https://[::1]:7080/",
                     "https://xn--bcher-kva.example"]) {
    checkServiceUrl(url, "coordinatorUrl");
  }
});
