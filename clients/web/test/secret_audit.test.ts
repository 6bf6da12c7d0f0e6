/**
 * The secrets audit of the test fleet (test/web_devices.ts, `audit`), which
 * tests/web/test_web_wire.py runs over a whole round with the real services: it must name a
 * call that carries a drawn secret (raw in its body, in hex in its body or in a header) and
 * must not name one that does not, or its "no leak" there would prove nothing.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { concat, toHex } from "../src/bytes.js";
import { systemRandom } from "../src/random.js";
import { audit, auditedFetch, watchDraws } from "./web_devices.js";

test("the audit names each call that carries a drawn secret, and no other", async () => {
  const realFetch = globalThis.fetch;
  globalThis.fetch = async () => new Response(new Uint8Array());
  try {
    watchDraws();
    const secret = systemRandom(32);  // as an identity seed or a round key is drawn
    systemRandom(12);                 // (a nonce: not a 32-byte draw, sent in the clear)
    const clean = systemRandom(64);
    await auditedFetch("https://a.test/clean", { method: "POST", body: clean,
                                                 headers: { Authorization: "Bearer 7.00ff" } });
    await auditedFetch("https://a.test/raw", { method: "POST",
                                               body: concat(new Uint8Array([1]), secret) });
    await auditedFetch("https://a.test/hex", { method: "POST",
                                               body: new TextEncoder().encode(toHex(secret)) });
    await auditedFetch("https://a.test/header", {
      method: "POST", body: new Uint8Array([1]),
      headers: { Authorization: `Bearer 7.${toHex(secret).toUpperCase()}` } });
    const found = audit();
    assert.deepEqual(found.leaks, [
      "https://a.test/raw: its body holds a secret's bytes at 1",
      "https://a.test/hex: its body holds a secret in hex",
      "https://a.test/header: a header holds a secret in hex",
    ]);
    assert.deepEqual([found.secrets, found.calls], [1, 4]);
  } finally {
    globalThis.fetch = realFetch;
  }
});
