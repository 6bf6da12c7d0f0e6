/**
 * The Python vectors in a browser page (bundled to dist/browser/checks.js by `npm run bundle`;
 * tests/web/test_web_browser.py serves it with python.json and reads the result). Results go to
 * `window.fedhhResults` and, for a person looking at the page, into its body.
 */

import { fetchBooks } from "../src/codec.js";
import { pythonChecks } from "./checks.js";

interface Result {
  name: string;
  ok: boolean;
  error?: string;
  ms: number;
}

async function run(): Promise<Result[]> {
  const vectors = await (await fetch("python.json")).json();
  const results: Result[] = [];
  for (const [name, check] of Object.entries(pythonChecks(vectors, fetchBooks(new URL("books/", location.href).href)))) {
    const start = performance.now();
    try {
      await check(vectors);
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
