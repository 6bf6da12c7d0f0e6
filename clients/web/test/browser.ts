/**
 * The Python vectors in a browser page (bundled to dist/browser/checks.js by `npm run bundle`;
 * tests/web/test_web_browser.py serves it with python.json and reads the result). Results go to
 * `window.fedhhResults` and, for a person looking at the page, into its body.
 */

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import { DeviceBudget, IndexedDbBudgetStore, PrivacyError } from "../src/budget.js";
import { fetchBooks } from "../src/codec.js";
import { TaskSchema } from "../src/gen/fedhh/v1/coordinator_pb.js";
import {
  BlockedByPagePolicy, CoordinatorClient, MAX_ANSWER_BYTES, connectTransport,
} from "../src/wire.js";
import { pythonChecks } from "./checks.js";

interface Result {
  name: string;
  ok: boolean;
  error?: string;
  ms: number;
}

/** The budget in IndexedDB: a spend and a report survive reopening the store (a page reload). */
async function indexedDbBudget(): Promise<void> {
  const name = `fedhh-test-${Date.now()}`;
  const task = (run: string, eps: number) => create(TaskSchema, { runId: run, round: 1, epsLocal: eps });
  const first = await DeviceBudget.open(new IndexedDbBudgetStore(name), 1.0, 3600);
  const ones = await first.report(task("a", 0.75), () => [3, 5]);
  const again = await DeviceBudget.open(new IndexedDbBudgetStore(name), 1.0, 3600);
  if (Math.abs(again.spent() - 0.75) > 1e-12) throw new Error(`spent ${again.spent()} after reopening`);
  const retried = await again.report(task("a", 0.75), () => [9]);
  if (JSON.stringify(retried) !== JSON.stringify(ones)) throw new Error("a retry got another report");
  let refused = false;
  try {
    await again.report(task("b", 0.5), () => [1]);
  } catch (error) {
    refused = error instanceof PrivacyError;
  }
  if (!refused) throw new Error("a report beyond the budget was not refused");
  indexedDB.deleteDatabase(name);
}

/**
 * An answer streamed past the device's cap (src/wire.ts `cappedFetch`) fails as
 * resource_exhausted once the cap is passed, unread beyond it, in the browser's fetch and
 * streams as in Node's.
 */
async function answerCap(): Promise<void> {
  let pulled = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (pulled === 64) controller.close();
      else { pulled += 1; controller.enqueue(new Uint8Array(1 << 20)); }
    },
  }, { highWaterMark: 0 });
  const client = new CoordinatorClient(connectTransport("https://coordinator.test", async () =>
    new Response(body, { headers: { "Content-Type": "application/proto" } })));
  const keys = { cPk: new Uint8Array(32), sPk: new Uint8Array(32) };
  const identity = { deviceId: 1n, credential: new Uint8Array(32), identitySeed: new Uint8Array(32),
                     coordinatorPublic: new Uint8Array(32) };
  try {
    await client.checkIn(identity, keys);
  } catch (error) {
    if (!(error instanceof ConnectError) || error.code !== Code.ResourceExhausted
        || !error.rawMessage.includes(`over ${MAX_ANSWER_BYTES} bytes`)) {
      throw new Error(`an answer over the cap failed as ${String(error)}`);
    }
    if (pulled > 18) throw new Error(`${pulled} MiB of a 64 MiB answer read`);
    return;
  }
  throw new Error("an answer over the cap was read");
}

/**
 * The page is served with a strict Content-Security-Policy (tests/web/test_web_browser.py:
 * `script-src 'self'`, `connect-src 'self'`), under which the whole library runs (no eval, no
 * WebAssembly). A call to a service its connect-src leaves out (here another port) is refused
 * by the browser, and the device's error names the origin to add (`BlockedByPagePolicy`), where
 * it read "Failed to fetch" alone.
 */
async function pagePolicy(): Promise<void> {
  const blocked = `${location.protocol}//${location.hostname}:1`;
  const client = new CoordinatorClient(connectTransport(blocked));
  const keys = { cPk: new Uint8Array(32), sPk: new Uint8Array(32) };
  const identity = { deviceId: 1n, credential: new Uint8Array(32), identitySeed: new Uint8Array(32),
                     coordinatorPublic: new Uint8Array(32) };
  try {
    await client.checkIn(identity, keys);
  } catch (error) {
    if (!(error instanceof ConnectError) || !(error.cause instanceof BlockedByPagePolicy)
        || !error.rawMessage.includes(`(add ${blocked} to its connect-src)`)) {
      throw new Error(`a call the page's policy refuses failed as ${String(error)}`);
    }
    return;
  }
  throw new Error("a call the page's policy refuses was answered");
}

async function run(): Promise<Result[]> {
  const vectors = await (await fetch("python.json")).json();
  const results: Result[] = [];
  const books = fetchBooks(new URL("books/", location.href).href); // the page's server
  for (const [name, check] of Object.entries(pythonChecks(vectors, books))) {
    const start = performance.now();
    try {
      await check(vectors);
      results.push({ name, ok: true, ms: performance.now() - start });
    } catch (error) {
      results.push({ name, ok: false, error: String(error), ms: performance.now() - start });
    }
  }
  const own: Record<string, () => Promise<void>> = {
    "lifetime budget in IndexedDB: a spend survives reopening": indexedDbBudget,
    "an answer over the device's cap is cut there": answerCap,
    "a call the page's Content-Security-Policy refuses names its connect-src": pagePolicy,
  };
  for (const [name, check] of Object.entries(own)) {
    const start = performance.now();
    try {
      await check();
      results.push({ name, ok: true, ms: performance.now() - start });
    } catch (error) {
      results.push({ name, ok: false, error: String(error), ms: performance.now() - start });
    }
  }
  return results;
}

const page = globalThis as unknown as { fedhhResults?: Result[] | { error: string } };
run().then((results) => {
  page.fedhhResults = results;
  document.body.textContent = results.map((r) => `${r.ok ? "ok" : "FAIL"} ${r.name}`).join("\n");
}, (error: unknown) => {
  page.fedhhResults = { error: String(error) };
  document.body.textContent = `error: ${String(error)}`;
});
