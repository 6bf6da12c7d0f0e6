/**
 * Vectors produced by the TypeScript device with its production randomness
 * (crypto.getRandomValues), for the Python library to check (tests/web/test_web_vectors.py).
 *
 *     node dist/test/make_vectors.js OUT.json
 *
 * The device section plays device 2 of the Python round recorded in vectors/python.json, with
 * fresh keys: the Python test runs that round with these messages in place of device 2's and
 * checks that the real Python devices and server accept them and release the right sum.
 */

import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";

import { create, toBinary } from "@bufbuild/protobuf";

import { type Bytes, bytesToBig, fromHex, toHex } from "../src/bytes.js";
import { sessionIdOf, verifyConfig } from "../src/config.js";
import { generateMask, pairMaskKey, selfMaskKey, vectorBytes } from "../src/prg.js";
import {
  aeadEncrypt, agree, ed25519PublicFromSeed, ed25519Sign, sha256, x25519FromSeed,
} from "../src/primitives.js";
import { systemRandom, systemWords } from "../src/random.js";
import { a0Threshold, randomize } from "../src/randomizer.js";
import {
  type NeighbourKeys, consistencySignature, generateRoundKeys, maskedInput, neighbourKeys, shareKeys,
} from "../src/secagg.js";
import { EnrollRequestSchema, GetTaskRequestSchema } from "../src/gen/fedhh/v1/coordinator_pb.js";
import * as shamir from "../src/shamir.js";
import { boundAccepts, boundTolerance, lyingServerBound } from "../src/bounds.js";
import { type Codebook, BUILTIN_NAMES, Codec, codebookFromSpec } from "../src/codec.js";
import { TaskSchema } from "../src/gen/fedhh/v1/coordinator_pb.js";
import { type DrawSource, makeReport, systemDraws } from "../src/selection.js";
import { enrollmentProof } from "../src/wire.js";
import { type Json, fileBooks, pythonVectors } from "./vectors.js";

const hex = (b: Uint8Array): string => toHex(b);

function shamirCases(): Json[] {
  return [[1, [1]], [3, [1, 2, 3, 4, 5]], [5, [3, 9, 27, 81, 243, 729, 2187]], [2, [7, 1]]].map(
    ([t, xs]) => {
      const secret = bytesToBig(systemRandom(32));
      const ys = shamir.share(secret, t as number, xs as number[], systemRandom);
      return { secret: secret.toString(16).padStart(64, "0"), threshold: t, xs,
               ys: ys.map((y) => hex(shamir.encodeShare(y))) };
    });
}

function x25519Pairs(): Json[] {
  return [0, 1, 2].map(() => {
    const a = x25519FromSeed(systemRandom(32));
    const b = x25519FromSeed(systemRandom(32));
    return { seed_a: hex(a.secret), seed_b: hex(b.secret), public_a: hex(a.public),
             public_b: hex(b.public), shared: hex(agree(a.secret, b.public)) };
  });
}

async function aeadCases(): Promise<Json[]> {
  const out = [];
  for (const size of [0, 74, 300]) {
    const key = systemRandom(32);
    const plaintext = systemRandom(size);
    const aad = systemRandom(40);
    out.push({ key: hex(key), plaintext: hex(plaintext), aad: hex(aad),
               blob: hex(await aeadEncrypt(key, plaintext, aad, systemRandom)) });
  }
  return out;
}

async function masks(): Promise<Json> {
  const keys = [];
  for (const u of [1, 9, 70000]) {
    const b = systemRandom(32);
    const sid = systemRandom(32);
    keys.push({ kind: "self", secret: hex(b), session_id: hex(sid), u,
                key: hex(await selfMaskKey(b, sid, u)) });
    const secret = systemRandom(32);
    keys.push({ kind: "pair", secret: hex(secret), session_id: hex(sid), u, v: u + 3,
                key: hex(await pairMaskKey(secret, sid, u + 3, u)) });
  }
  const expansions = [];
  for (const [dimension, bits] of [[5, 16], [9, 32], [1000, 16], [300_000, 32]] as const) {
    const key = systemRandom(16);
    const mask = vectorBytes(await generateMask(key, dimension, bits));
    expansions.push({ key: hex(key), dimension, bits,
                      ...(mask.length <= 4096 ? { mask: hex(mask) } : { sha256: hex(await sha256(mask)) }) });
  }
  return { keys, expansions };
}

/** A random double in (0, 24): eps values no one chose by hand. */
function randomEps(): number {
  const word = new DataView(systemRandom(8).buffer).getBigUint64(0) >> 11n;
  return (Number(word) + 1) / 2 ** 53 * 24;
}

function randomizer(): Json {
  const thresholds = Array.from({ length: 50 }, () => {
    const eps = randomEps();
    return { eps, threshold0: a0Threshold(eps) };
  });
  const cases = [[1.0, 5, 64], [0.3, null, 200], [6.0, 0, 20]].map(([eps, index, dim]) => {
    let words: number[] = [];
    const recorder = { uint32: (n: number) => { const w = systemWords.uint32(n); words = [...w]; return w; } };
    const ones = randomize(eps as number, index as number | null, dim as number, recorder);
    return { eps, index, dim, words, ones };
  });
  return { thresholds, randomize: cases };
}

async function consistency(): Promise<Json[]> {
  const seed = systemRandom(32);
  const sid = systemRandom(32);
  const survivors = [1, 4, 5, 9];
  return [{ identity_seed: hex(seed), identity_public: hex(ed25519PublicFromSeed(seed)),
            session_id: hex(sid), device_id: 4, survivors,
            signature: hex(await consistencySignature(seed, sid, 4, survivors)) }];
}

/** Device `device_id` of python.json's first recorded round, with fresh keys and secrets. */
async function device(): Promise<Json> {
  const r = pythonVectors().device_rounds[0];
  const config = verifyConfig(fromHex(r.config), fromHex(r.config_signature),
                              fromHex(r.coordinator_public));
  const sid = await sessionIdOf(fromHex(r.config));
  const me: number = r.device_id;
  const keys = generateRoundKeys(systemRandom);
  const neighbours = new Map<number, NeighbourKeys>();
  for (const p of r.peers) {
    neighbours.set(p.id, await neighbourKeys(me, keys, sid,
                                             { id: p.id, cPk: fromHex(p.c_pk), sPk: fromHex(p.s_pk) }));
  }
  const shared = await shareKeys(me, config.t, sid, keys, neighbours, systemRandom);
  const ones = randomize(1.0, 4, config.dimension, systemWords);
  const partners = new Map<number, Bytes>([...neighbours].map(([v, n]) => [v, n.maskKey]));
  const y = await maskedInput(me, sid, shared.b, partners, ones, config.dimension, config.modulusBits);
  return {
    python_round: 0, device_id: me, c_seed: hex(keys.c.secret), s_seed: hex(keys.s.secret),
    c_pk: hex(keys.c.public), s_pk: hex(keys.s.public), b: hex(shared.b),
    shares: shared.shares.map((s) => ({ dst: s.dst, ciphertext: hex(s.ciphertext) })),
    b_commitment: hex(shared.commitment), ones, masked_input: hex(vectorBytes(y)),
  };
}

/** Device-to-coordinator requests in the generated wire code, for Python's protobuf to parse. */
async function wire(): Promise<Json> {
  const seed = systemRandom(32);
  const identity = ed25519PublicFromSeed(seed);
  const keys = generateRoundKeys(systemRandom);
  const token = new TextEncoder().encode("ab".repeat(32));
  const label = "browser-\u00e9t\u00e9";
  const attestation = systemRandom(100);
  // (signed as CoordinatorClient.enroll signs: Python checks the signature over its own proof)
  const enroll = create(EnrollRequestSchema, {
    enrollmentToken: token, identityPublicKey: identity, label, attestation,
    enrollmentSignature: ed25519Sign(seed, await enrollmentProof(token, identity, label,
                                                                 attestation)) });
  const getTask = create(GetTaskRequestSchema, {
    deviceId: 2n ** 63n + 5n, waitMs: 30000, knownTask: systemRandom(32),
    cPk: keys.c.public, sPk: keys.s.public });
  return {
    enroll: { bytes: hex(toBinary(EnrollRequestSchema, enroll)), token: "ab".repeat(32),
              identity_public_key: hex(identity), label: enroll.label,
              attestation: hex(enroll.attestation),
              enrollment_signature: hex(enroll.enrollmentSignature) },
    get_task: { bytes: hex(toBinary(GetTaskRequestSchema, getTask)),
                device_id: getTask.deviceId.toString(), wait_ms: getTask.waitMs,
                known_task: hex(getTask.knownTask), c_pk: hex(getTask.cPk), s_pk: hex(getTask.sPk) },
  };
}

/** The seed of the inputs drawn below (the codecs' items, the bounds' parameters): the same
 * inputs at every run, so that a failing case is met again (the device's own randomness above
 * stays production randomness). FEDHH_VECTORS_SEED draws other inputs. */
const INPUT_SEED = process.env["FEDHH_VECTORS_SEED"] ?? "web-vectors-inputs-1";
let inputDraws = 0;

/** A uniform double in [0, 1), the next of INPUT_SEED's SHA-256 counter stream. */
function uniform(): number {
  const block = createHash("sha256").update(`${INPUT_SEED}:${inputDraws++}`).digest();
  return Number(block.readBigUInt64BE(0) >> 11n) / 2 ** 53;
}

const BLOCKS: Array<[number, number]> = [
  [0x20, 0x7e], [0x61, 0x7a], [0x61, 0x7a], [0x00, 0x1f], [0xa0, 0x17f], [0x300, 0x36f],
  [0x3040, 0x30ff], [0x4e00, 0x9fff], [0xac00, 0xd7a3], [0x1f300, 0x1faff], [0x200d, 0x200d],
  [0xe000, 0xffff], [0x10000, 0x10ffff],
  // right-to-left scripts (Hebrew, Arabic) and the bidi controls (LRM/RLM, LRE..RLO, LRI..PDI)
  [0x590, 0x6ff], [0x200e, 0x200f], [0x202a, 0x202e], [0x2066, 0x2069],
];

/** A random well-formed string of 1 to 30 code points from many scripts (no surrogates). */
function randomItem(): string {
  const length = 1 + Math.floor(uniform() * 30);
  let out = "";
  for (let i = 0; i < length; i++) {
    const [lo, hi] = BLOCKS[Math.floor(uniform() * BLOCKS.length)]!;
    out += String.fromCodePoint(lo + Math.floor(uniform() * (hi - lo + 1)));
  }
  return out;
}

/** Random items encoded by every built-in codec, for Python to encode the same. */
async function codecs(): Promise<Json[]> {
  const items = Array.from({ length: 200 }, randomItem);
  const out = [];
  for (const name of BUILTIN_NAMES) {
    const book: Codebook = await codebookFromSpec(name, fileBooks);
    for (const bits of [60, 200]) {
      const codec = new Codec(book, bits);
      out.push({ spec: name, max_bits: bits, items,
                 codes: items.map((item) => codec.encode(item).toString(16)) });
    }
  }
  return out;
}

/** Random (n, k, t) and floors, a third of them with the target at the bound itself. */
function bounds(): Json[] {
  return Array.from({ length: 150 }, (_, i) => {
    const n = Math.max(3, Math.floor(Math.exp(uniform() * Math.log(300_000))));
    const complete = n <= 5000 && uniform() < 0.15;
    const k = complete ? n - 1 : Math.min(n - 1 - ((n - 1) % 2), 2 * (1 + Math.floor(uniform() * 1000)));
    const t = 1 + Math.floor(uniform() * k);
    const dropout = uniform() * 0.6;
    const corrupt = uniform() * 0.3;
    const bound = lyingServerBound(n, k, t, dropout, corrupt);
    let bits = 1 + uniform() * 100;
    if (i % 3 === 0 && bound > 0 && bound < 1) bits = -Math.log2(bound) * (1 + (uniform() - 0.5) * 1e-9);
    return { n, k, t, dropout, corrupt, security_bits: bits, bound,
             tolerance: boundTolerance(n), accept: boundAccepts(bound, n, bits) };
  });
}

/** Python's selection tasks with fresh production draws and words, for Python to replay. */
async function reports(): Promise<Json[]> {
  const out = [];
  for (const r of pythonVectors().selection.reports) {
    const f = r.task;
    const task = create(TaskSchema, {
      runId: "run-sel", round: 2, codec: f.codec, maxBits: f.max_bits, prefixBits: f.prefix_bits,
      prefixes: f.prefixes.map(BigInt), segmentBits: f.segment_bits,
      denyList: f.deny_list.map(BigInt), selection: f.selection,
      prefixConditioning: f.prefix_conditioning, epsLocal: f.eps_local,
      roundConfig: fromHex(f.round_config),
    });
    const draws: number[] = [];
    let words: number[] = [];
    const recorder: DrawSource = {
      below: (high) => { const x = systemDraws.below(high); draws.push(x); return x; },
      uint32: (n) => { const w = systemDraws.uint32(n); words = [...w]; return w; },
    };
    const codec = new Codec(await codebookFromSpec(f.codec, fileBooks), f.max_bits);
    const ones = makeReport(r.items, r.counts, task, codec, recorder);
    out.push({ items: r.items, counts: r.counts, task: f, draws, words, ones });
  }
  return out;
}

async function main(): Promise<void> {
  const out = process.argv[2];
  if (out === undefined) throw new Error("usage: node dist/test/make_vectors.js OUT.json");
  const vectors = {
    about: "TypeScript device output with production randomness (test/make_vectors.ts)",
    inputs_seed: INPUT_SEED,
    shamir: shamirCases(),
    x25519: x25519Pairs(),
    aead: await aeadCases(),
    masks: await masks(),
    randomizer: randomizer(),
    consistency: await consistency(),
    device: await device(),
    wire: await wire(),
    codecs: await codecs(),
    bounds: bounds(),
    reports: await reports(),
  };
  writeFileSync(out, JSON.stringify(vectors, null, 1) + "\n");
}

await main();
