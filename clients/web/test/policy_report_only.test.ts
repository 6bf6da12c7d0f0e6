/**
 * A call that fails is named blocked by the page's Content-Security-Policy only when an
 * enforced policy refused it: a Content-Security-Policy-Report-Only policy fires the same
 * `securitypolicyviolation` event (disposition "report") and blocks nothing, so a call to that
 * origin that fails then failed for another reason. Before, the report-only event was taken
 * for a block: an operator trying a report-only policy without an aggregator's origin, the
 * aggregator then down, was told to add the origin to connect-src.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { BlockedByPagePolicy, cappedFetch } from "../src/wire.js";

type Listener = (event: object) => void;

test("only an enforced policy's violation names the policy as the cause", async () => {
  const scope = globalThis as { addEventListener?: (type: string, listener: Listener) => void };
  const listeners: Listener[] = [];
  scope.addEventListener = (type, listener) => {
    if (type === "securitypolicyviolation") listeners.push(listener);
  };
  try {
    const failing = cappedFetch(async () => { throw new TypeError("Failed to fetch"); });
    const violation = (origin: string, disposition: string): void => {
      for (const listener of listeners) {
        listener({ effectiveDirective: "connect-src", blockedURI: `${origin}/fedhh.v1.X/Y`,
                   disposition });
      }
    };
    violation("https://report.example:7180", "report");
    await assert.rejects(failing("https://report.example:7180/fedhh.v1.X/Y"),
      (error: Error) => !(error instanceof BlockedByPagePolicy)
        && error.message === "Failed to fetch");
    violation("https://enforce.example:7180", "enforce");
    await assert.rejects(failing("https://enforce.example:7180/fedhh.v1.X/Y"),
      (error: Error) => error instanceof BlockedByPagePolicy
        && error.message === "Failed to fetch: this page's Content-Security-Policy blocks " +
          "calls to https://enforce.example:7180 (add https://enforce.example:7180 to its " +
          "connect-src)");
  } finally {
    delete scope.addEventListener;
  }
});
