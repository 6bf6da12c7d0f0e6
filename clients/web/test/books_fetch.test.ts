/**
 * A trained codebook the page cannot fetch refuses the round with an error that names where
 * the page looked (`fetchBooks`): before, the round's outcome said "codebook english: HTTP 404",
 * or fetch's bare "Failed to fetch", and a device without a loader did not say which option
 * gives one.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { CodecError, codebookFromSpec, fetchBooks } from "../src/codec.js";
import { fileBooks } from "./vectors.js";

async function withFetch(fake: typeof globalThis.fetch, body: () => Promise<void>): Promise<void> {
  const real = globalThis.fetch;
  globalThis.fetch = fake;
  try {
    await body();
  } finally {
    globalThis.fetch = real;
  }
}

test("a book the page cannot fetch is refused naming its URL", async () => {
  const asked: string[] = [];
  await withFetch(async (url) => {
    asked.push(String(url));
    return new Response("not here", { status: 404 });
  }, async () => {
    await assert.rejects(codebookFromSpec("english", fetchBooks("https://app.test/books/")),
                         (error: Error) => error instanceof CodecError && /codebook english could not be fetched from https:\/\/app\.test\/books\/english\.json \(HTTP 404\)/.test(error.message));
  });
  assert.deepEqual(asked, ["https://app.test/books/english.json"]);
  await withFetch(async () => { throw new TypeError("Failed to fetch"); }, async () => {
    await assert.rejects(codebookFromSpec("german", fetchBooks("https://app.test/books/")),
                         /codebook german could not be fetched from https:\/\/app\.test\/books\/german\.json \(Failed to fetch\): .*CSP/);
  });
});

test("a trained book without a loader names the option that gives one", async () => {
  await assert.rejects(codebookFromSpec("unicode"), /runDevice's `books`: fetchBooks/);
});

test("a book is checked with the server on each load, and a served book of another version says so",
     async () => {
  // A static server's Last-Modified without Cache-Control lets a browser keep a book by
  // heuristic freshness: before, fetchBooks took the kept copy after the books were upgraded.
  const modes: (RequestCache | undefined)[] = [];
  // The English book as a newer fedhh might train it: two of its codewords swapped.
  const book = JSON.parse(await fileBooks("english"));
  [book.bytes.a, book.bytes.e] = [book.bytes.e, book.bytes.a];
  const other = JSON.stringify(book);
  await withFetch(async (_url, init) => {
    modes.push(init?.cache);
    return new Response(other, { status: 200 });
  }, async () => {
    await assert.rejects(codebookFromSpec("english", fetchBooks("https://app.test/books/")),
                         (error: Error) => error instanceof CodecError && /^codebook english as loaded is english-[0-9a-f]{12}, not the expected english-[0-9a-f]{12} that this device's code pins: the served fedhh\/codec\/books\/ and the page's bundle come from different fedhh versions \(serve both from the coordinator's version, then reload the page\)$/.test(error.message));
  });
  assert.deepEqual(modes, ["no-cache"]);
});

test("the books' folder is resolved against the page's address, with or without its final slash",
     async () => {
  // Before, fetchBooks("/books/") threw "Invalid URL" in every round, and
  // fetchBooks("https://app.test/books") fetched https://app.test/english.json.
  const asked: string[] = [];
  const scope = globalThis as { location?: { href: string } };
  scope.location = { href: "https://app.test/shop/index.html?x=1" };
  try {
    await withFetch(async (url) => {
      asked.push(String(url));
      return new Response("not here", { status: 404 });
    }, async () => {
      for (const base of ["/books/", "/books", "books", "https://cdn.test/books",
                          "https://cdn.test/v2/books/"]) {
        await assert.rejects(codebookFromSpec("english", fetchBooks(base)), /HTTP 404/);
      }
    });
  } finally {
    delete scope.location;
  }
  assert.deepEqual(asked, ["https://app.test/books/english.json",
                           "https://app.test/books/english.json",
                           "https://app.test/shop/books/english.json",
                           "https://cdn.test/books/english.json",
                           "https://cdn.test/v2/books/english.json"]);
  // Outside a page a relative folder is no URL: said when the loader is made, not each round.
  assert.throws(() => fetchBooks("/books/"), (error: Error) => error instanceof RangeError
    && /^fetchBooks: "\/books\/" is not a URL \(outside a page, give an absolute one\)/.test(error.message));
  assert.throws(() => fetchBooks("ftp://app.test/books/"), /is not an http\(s\) URL/);
});

test("an inline codebook of a newer format version says the page's code is older", async () => {
  // (the coordinator reads a task's codebook before it hands the task out: a format version
  // this code does not know comes from a newer fedhh)
  await assert.rejects(codebookFromSpec(JSON.stringify({ format: "fedhh-codebook", version: 3,
                                                         name: "x", end: "1", bytes: {} })),
                       /^CodecError: inline codebook: not a fedhh-codebook version 1 or 2 codebook \(version 3: this page's device code is older than the coordinator's: reload the page/);
  // An older or malformed one is refused as before, with no such advice.
  await assert.rejects(codebookFromSpec(JSON.stringify({ format: "fedhh-codebook", version: 0,
                                                         name: "x", end: "1", bytes: {} })),
                       (error: Error) => /not a fedhh-codebook version 1 or 2 codebook$/.test(error.message));
});
