/** Properties and validation of the TypeScript device that the vectors do not pin down. */

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { bigToBytes, bytesToBig, fromHex, toHex, u32 } from "../src/bytes.js";
import { codebookFromSpec, pythonStrip } from "../src/codec.js";
import { addMask, zeros } from "../src/prg.js";
import { isValidX25519Public } from "../src/primitives.js";
import { systemJitter, systemRandom, systemWords } from "../src/random.js";
import { A1_THRESHOLD, a0Threshold, randomize } from "../src/randomizer.js";
import { generateRoundKeys, maskedInput, neighbourKeys } from "../src/secagg.js";
import * as shamir from "../src/shamir.js";

test("every t of n shares reconstruct the secret (production randomness)", () => {
  const secret = bytesToBig(systemRandom(32));
  const xs = [1, 2, 3, 5, 8, 13];
  const ys = shamir.share(secret, 4, xs, systemRandom);
  const points = xs.map((x, i) => [x, ys[i]!] as const);
  for (let skip = 0; skip < xs.length; skip++) {
    const chosen = points.filter((_, i) => i !== skip && i !== (skip + 1) % xs.length);
    assert.equal(shamir.reconstruct(chosen), secret);
  }
});

test("shamir refuses bad parameters", () => {
  assert.throws(() => shamir.share(shamir.PRIME, 1, [1], systemRandom), shamir.ShareError);
  assert.throws(() => shamir.share(1n, 0, [1], systemRandom), shamir.ShareError);
  assert.throws(() => shamir.share(1n, 3, [1, 2], systemRandom), shamir.ShareError);
  assert.throws(() => shamir.share(1n, 2, [1, 1], systemRandom), shamir.ShareError);
  assert.throws(() => shamir.share(1n, 1, [0], systemRandom), shamir.ShareError);
  assert.throws(() => shamir.reconstruct([]), shamir.ShareError);
  assert.throws(() => shamir.reconstruct([[1, shamir.PRIME]]), shamir.ShareError);
});

test("byte helpers are Python's encodings", () => {
  assert.equal(toHex(u32(258)), "00000102");
  assert.throws(() => u32(2 ** 32), RangeError);
  assert.equal(toHex(bigToBytes(258n, 3)), "000102");
  assert.throws(() => bigToBytes(256n, 1), RangeError);
  assert.throws(() => fromHex("abc"), RangeError);
});

test("the randomizer's thresholds and validation", () => {
  assert.equal(a0Threshold(1e-300), A1_THRESHOLD); // eps -> 0: a0 -> 1/2
  assert.equal(a0Threshold(50), 1); // never below one word in 2^32
  for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(() => a0Threshold(bad), RangeError);
  }
  assert.throws(() => randomize(1, 5, 5, systemWords), RangeError);
  assert.throws(() => randomize(1, null, 0, systemWords), RangeError);
  const ones = randomize(2, 3, 4096, systemWords);
  assert.ok(ones.every((v, i) => i === 0 || v > ones[i - 1]!));
  assert.ok(ones.every((v) => v >= 0 && v < 4096));
});

test("a word source gets exactly one word per coordinate", () => {
  let asked = 0;
  const words = { uint32: (n: number) => { asked = n; return new Uint32Array(n); } };
  // Every word is 0, below every threshold: all coordinates are ones.
  assert.equal(randomize(3, 1, 10, words).length, 10);
  assert.equal(asked, 10);
  const short = { uint32: (n: number) => new Uint32Array(n - 1) };
  assert.throws(() => randomize(3, 1, 10, short), /gave 9 of 10 words/);
});

test("systemRandom draws more than getRandomValues's 65536-byte limit", () => {
  const big = systemRandom(200_000);
  assert.equal(big.length, 200_000);
  assert.ok(big.subarray(150_000).some((b) => b !== 0));
});

test("every draw of the device's code comes from crypto.getRandomValues, none from Math.random", () => {
  // The sources of the package (src/, the demo page), read from the checkout: tsc compiles
  // test/ into dist/test/, so the sources are two folders up.
  const root = fileURLToPath(new URL("../../", import.meta.url));
  const sources: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".ts")) sources.push(path);
    }
  };
  walk(join(root, "src"));
  walk(join(root, "demo"));
  assert.ok(sources.length > 20, `found ${sources.length} sources under ${root}`);
  const users = sources.filter((path) => /Math\.random/.test(readFileSync(path, "utf8")));
  assert.deepEqual(users, []);
  for (let i = 0; i < 1000; i++) {
    const x = systemJitter();
    assert.ok(x >= 0 && x < 1, String(x));
  }
});

test("a mask vector wraps modulo 2^bits", async () => {
  const acc = zeros(3, 16);
  acc[0] = 0xffff;
  const key = new Uint8Array(16);
  await addMask(acc, key);
  await addMask(acc, key, -1);
  assert.equal(acc[0], 0xffff);
  assert.throws(() => zeros(0, 16), RangeError);
  await assert.rejects(addMask(acc, new Uint8Array(15)), RangeError);
});

test("masked input refuses a report that is not strictly increasing indices", async () => {
  const b = systemRandom(32);
  const sid = systemRandom(32);
  for (const ones of [[3, 3], [5, 2], [-1], [10], [1.5]]) {
    await assert.rejects(maskedInput(1, sid, b, new Map(), ones, 10, 16), RangeError);
  }
});

test("a low-order neighbour key aborts the key agreement", async () => {
  const keys = generateRoundKeys(systemRandom);
  const peer = { id: 2, cPk: new Uint8Array(32), sPk: generateRoundKeys(systemRandom).s.public };
  await assert.rejects(neighbourKeys(1, keys, systemRandom(32), peer), /bad_key/);
  assert.equal(await isValidX25519Public(new Uint8Array(31)), false);
});

test("a shed call is made again, a refused one is not, a closed stage asks what happened", async () => {
  const { Code, ConnectError } = await import("@connectrpc/connect");
  const { retrying } = await import("../src/round.js");
  const fast = { jitter: () => 0 };
  let calls = 0;
  const flaky = async () => {
    calls += 1;
    if (calls < 3) throw new ConnectError("shed", Code.Unavailable);
    return "ok";
  };
  assert.equal(await retrying(flaky, fast), "ok");
  assert.equal(calls, 3);
  calls = 0;
  await assert.rejects(retrying(async () => {
    calls += 1;
    throw new ConnectError("no", Code.InvalidArgument);
  }, fast), /no/);
  assert.equal(calls, 1);
  calls = 0;
  await assert.rejects(retrying(async () => {
    calls += 1;
    throw new ConnectError("down", Code.Unavailable);
  }, { ...fast, attempts: 4 }), /down/);
  assert.equal(calls, 4);
  // The first attempt got in but its answer was lost; the repeat finds the stage closed.
  calls = 0;
  const closed = await retrying(async () => {
    calls += 1;
    throw new ConnectError(calls === 1 ? "lost" : "closed",
                           calls === 1 ? Code.Unavailable : Code.FailedPrecondition);
  }, fast, () => "ask for the next request");
  assert.equal(closed, "ask for the next request");
  // A first attempt refused as late is late: nothing of it got in.
  await assert.rejects(retrying(async () => {
    throw new ConnectError("late", Code.FailedPrecondition);
  }, fast, () => "no"), /late/);
  // A call that got no answer (fetch failed: connect-web's `unknown` caused by a TypeError) is
  // made again like an unavailable one; an `unknown` the server answered is not.
  calls = 0;
  assert.equal(await retrying(async () => {
    calls += 1;
    if (calls < 2) throw ConnectError.from(new TypeError("Failed to fetch"));
    return "ok";
  }, fast), "ok");
  assert.equal(calls, 2);
  calls = 0;
  await assert.rejects(retrying(async () => {
    calls += 1;
    throw new ConnectError("server said unknown", Code.Unknown);
  }, fast), /server said unknown/);
  assert.equal(calls, 1);
});

test("a codec spec is stripped as Python's str.strip() strips it", async () => {
  // [c for c in range(0x110000) if chr(c).isspace()] in Python 3.11 (codebook_from_spec strips
  // with it). Before, trim() kept U+001C-U+001F and U+0085, and removed U+FEFF: a task whose
  // spec the Python devices took was refused, and one they refuse taken.
  const python = [0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680,
                  0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009,
                  0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000];
  for (let c = 0; c < 0x110000; c++) {
    if (c >= 0xd800 && c < 0xe000) continue;
    const space = String.fromCodePoint(c);
    assert.equal(pythonStrip(`${space}a${space}`) === "a", python.includes(c), `U+${c.toString(16)}`);
  }
  assert.equal((await codebookFromSpec("\x1cbytes\x85")).name, "bytes");
  await assert.rejects(codebookFromSpec("bytes\ufeff"), /unknown codebook "bytes\ufeff"/);
});

test("a codec spec with a long run of spaces inside is stripped in linear time", () => {
  // Before, /^S+|S+$/g tried S+$ from every space of the run: 100,000 spaces took 28 s (a
  // page's thread held), where a scan from each end takes milliseconds; the bound is 2 s.
  const inside = " ".repeat(100_000);
  const started = performance.now();
  const stripped = pythonStrip(`\x1c{${inside}}\x85`);
  const took = performance.now() - started;
  assert.equal(stripped, `{${inside}}`);
  assert.ok(took < 2000, `${took.toFixed(0)} ms`);
  assert.equal(pythonStrip(" \u3000 "), "");
  assert.equal(pythonStrip("\ud83d\ude00 "), "\ud83d\ude00");
});
