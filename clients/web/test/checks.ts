/**
 * The Python library's vectors (vectors/python.json), checked by the TypeScript implementation:
 * same inputs and the same random bytes must give the same bytes out, and what Python rejects
 * must be rejected here. Framework-free, so the same checks run under node:test
 * (python_vectors.test.ts) and in headless Chromium (browser.ts, tests/web/test_web_browser.py).
 */

import { create } from "@bufbuild/protobuf";

import { boundAccepts, boundTolerance, lyingServerBound } from "../src/bounds.js";
import { DeviceBudget, MemoryBudgetStore, pythonFloatRepr, queryDigest } from "../src/budget.js";
import { fromHex, toHex } from "../src/bytes.js";
import { type Task, TaskSchema } from "../src/gen/fedhh/v1/coordinator_pb.js";
import { type DrawSource, type SelectionRule, makeReport, queryOfTask, selectEntry }
  from "../src/selection.js";
import {
  type BookLoader, type Codebook, BUILTIN_BOOK_KEYS, Codec, CodecError, codebookFromJson,
  codebookFromSpec, codebookKey,
} from "../src/codec.js";
import { ConfigError, parseRoundConfig, sessionIdOf, verifyConfig } from "../src/config.js";
import { GraphError, checkGraphParameters, neighboursOf, ringOrder, survivorsConnected }
  from "../src/graph.js";
import { cohortSalt, leafHash, proofHashes, rootFromLeaves, verifyAdmission } from "../src/merkle.js";
import { addMask, checkModulusBits, generateMask, pairMaskKey, selfMaskKey, vectorBytes, zeros }
  from "../src/prg.js";
import {
  aeadDecrypt, aeadEncrypt, agree, ed25519PublicFromSeed, ed25519Verify, hkdf,
  isValidX25519Public, sha256, x25519FromSeed,
} from "../src/primitives.js";
import { a0Threshold, randomize } from "../src/randomizer.js";
import {
  type NeighbourKeys, consistencySignature, decryptShare, generateRoundKeys, maskedInput,
  neighbourKeys, shareKeys, survivorsDigest, unmaskShares,
} from "../src/secagg.js";
import * as shamir from "../src/shamir.js";
import { AuthenticationError, taskRoundConfig, verifyTask } from "../src/task.js";
import { equal, ok, rejects, throws } from "./expect.js";
import { replay } from "./seeded.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;
export type Check = (vectors: Json) => Promise<void>;

async function shamirShares(V: Json): Promise<void> {
  for (const c of V.shamir.share) {
    const ys = shamir.share(BigInt(`0x${c.secret}`), c.threshold, c.xs, await replay(c.stream_key));
    equal(ys.map((y) => toHex(shamir.encodeShare(y))), c.ys, `shares of ${c.xs}`);
  }
}

async function shamirReconstruct(V: Json): Promise<void> {
  for (const c of V.shamir.reconstruct) {
    const points = c.points.map(([x, y]: [number, string]) =>
      [x, shamir.decodeShare(fromHex(y))] as const);
    if (c.secret === null) {
      throws(() => shamir.reconstruct(points), shamir.ShareError, "a corrupt set of shares");
    } else {
      equal(shamir.reconstruct(points), BigInt(`0x${c.secret}`), "the reconstructed secret");
    }
  }
  for (const c of V.shamir.decode) {
    if (c.valid) equal(toHex(shamir.encodeShare(shamir.decodeShare(fromHex(c.share)))), c.share);
    else throws(() => shamir.decodeShare(fromHex(c.share)), shamir.ShareError, c.share);
  }
}

async function keyAgreement(V: Json): Promise<void> {
  for (const c of V.x25519.pairs) {
    const a = x25519FromSeed(fromHex(c.seed_a));
    const b = x25519FromSeed(fromHex(c.seed_b));
    equal(toHex(a.public), c.public_a, "public key a");
    equal(toHex(b.public), c.public_b, "public key b");
    equal(toHex(agree(a.secret, b.public)), c.shared, "shared secret (a)");
    equal(toHex(agree(b.secret, a.public)), c.shared, "shared secret (b)");
  }
  for (const c of V.x25519.validity) {
    equal(await isValidX25519Public(fromHex(c.public)), c.valid, `validity of ${c.public}`);
  }
  for (const c of V.hkdf) {
    const okm = await hkdf(fromHex(c.ikm), fromHex(c.salt), fromHex(c.info), c.length);
    equal(toHex(okm), c.okm, `HKDF of length ${c.length}`);
  }
}

async function masks(V: Json): Promise<void> {
  for (const c of V.masks.keys) {
    const key = c.kind === "self"
      ? await selfMaskKey(fromHex(c.secret), fromHex(c.session_id), c.u)
      : await pairMaskKey(fromHex(c.secret), fromHex(c.session_id), c.u, c.v);
    equal(toHex(key), c.key, `${c.kind} mask key`);
  }
  for (const c of V.masks.expansions) {
    const mask = vectorBytes(await generateMask(fromHex(c.key), c.dimension,
                                                checkModulusBits(c.bits)));
    const what = `mask of dimension ${c.dimension} mod 2^${c.bits}`;
    if (c.mask !== undefined) equal(toHex(mask), c.mask, what);
    else equal(toHex(await sha256(mask)), c.sha256, what);
  }
  const c = V.masks.expansions[5];
  const acc = zeros(c.dimension, checkModulusBits(c.bits));
  await addMask(acc, fromHex(c.key), 1);
  await addMask(acc, fromHex(c.key), -1);
  ok(acc.every((x) => x === 0), "subtracting a mask undoes adding it");
}

async function shareEncryption(V: Json): Promise<void> {
  for (const c of V.aead) {
    const blob = fromHex(c.blob);
    const plain = await aeadDecrypt(fromHex(c.key), blob, fromHex(c.aad));
    ok(plain !== null, "a Python blob decrypts");
    equal(toHex(plain!), c.plaintext, "plaintext");
    const again = await aeadEncrypt(fromHex(c.key), plain!, fromHex(c.aad), await replay(c.stream_key));
    equal(toHex(again), c.blob, "the blob from the same nonce");
    for (const at of [0, 12, blob.length - 1]) {
      const bad = Uint8Array.from(blob);
      bad[at]! ^= 1;
      equal(await aeadDecrypt(fromHex(c.key), bad, fromHex(c.aad)), null, `bit flipped at ${at}`);
    }
    equal(await aeadDecrypt(fromHex(c.key), blob.subarray(0, 27), fromHex(c.aad)), null, "short");
  }
}

/** A Python device's round, replayed: the same stream must give the same messages. */
async function deviceRound(r: Json): Promise<void> {
  const config = verifyConfig(fromHex(r.config), fromHex(r.config_signature),
                              fromHex(r.coordinator_public));
  const sid = await sessionIdOf(fromHex(r.config));
  equal(toHex(sid), r.session_id, "session id");
  const me: number = r.device_id;
  const rand = await replay(r.stream_key);
  // Stage 0: the same round keys from the same stream.
  const keys = generateRoundKeys(rand);
  equal(toHex(keys.c.public), r.advertise.c_pk, "c_pk");
  equal(toHex(keys.s.public), r.advertise.s_pk, "s_pk");
  // Stage 1: the same shares, nonces and ciphertexts.
  const neighbours = new Map<number, NeighbourKeys>();
  for (const p of r.peers) {
    neighbours.set(p.id, await neighbourKeys(me, keys, sid,
                                             { id: p.id, cPk: fromHex(p.c_pk), sPk: fromHex(p.s_pk) }));
  }
  const shared = await shareKeys(me, config.t, sid, keys, neighbours, rand);
  equal(shared.shares.map((s) => ({ dst: s.dst, ciphertext: toHex(s.ciphertext) })), r.shares_out,
        "encrypted shares");
  equal(toHex(shared.commitment), r.b_commitment, "commitment to b_u");
  // Stage 2: decrypt the partners' shares, then the same masked vector.
  const received = new Map<number, readonly [bigint, bigint]>();
  for (const s of r.shares_in) {
    received.set(s.src, await decryptShare(me, sid, neighbours.get(s.src)!,
                                           { src: s.src, dst: me, ciphertext: fromHex(s.ciphertext) }));
  }
  const maskKeys = new Map([...received.keys()].map((v) => [v, neighbours.get(v)!.maskKey]));
  const y = await maskedInput(me, sid, shared.b, maskKeys, r.ones, config.dimension,
                              config.modulusBits);
  equal(toHex(vectorBytes(y)), r.masked_input, "masked input");
  // Stage 4: the same revealed shares.
  const revealed = unmaskShares(received, r.alive, r.dropped);
  equal(revealed.b.map(([v, s]) => [v, toHex(s)]), r.b_shares, "b-shares");
  equal(revealed.s.map(([v, s]) => [v, toHex(s)]), r.s_shares, "s-shares");
  // A share that does not authenticate, or arrives under another sender's id, aborts.
  const first = r.shares_in[0];
  const bad = fromHex(first.ciphertext);
  bad[20]! ^= 1;
  await rejects(decryptShare(me, sid, neighbours.get(first.src)!,
                             { src: first.src, dst: me, ciphertext: bad }),
                /decryption_failed/, "a tampered share");
  const other = r.shares_in[1];
  await rejects(decryptShare(me, sid, neighbours.get(other.src)!,
                             { src: other.src, dst: me, ciphertext: fromHex(first.ciphertext) }),
                /decryption_failed/, "a share under another sender's id");
}

async function consistency(V: Json): Promise<void> {
  for (const c of V.consistency) {
    equal(toHex(ed25519PublicFromSeed(fromHex(c.identity_seed))), c.identity_public, "identity key");
    equal(toHex(await survivorsDigest(c.survivors)), c.digest, "survivors digest");
    const signature = await consistencySignature(fromHex(c.identity_seed), fromHex(c.session_id),
                                                 c.device_id, c.survivors);
    equal(toHex(signature), c.signature, "consistency signature");
  }
}

async function signedConfigs(V: Json): Promise<void> {
  const pub = fromHex(V.signed.coordinator_public);
  for (const c of V.signed.configs) {
    const payload = fromHex(c.payload);
    const signature = fromHex(c.signature);
    if (!c.valid) {
      // Malformed encodings carry a valid signature: the parse must refuse them.
      throws(() => verifyConfig(payload, signature, pub), ConfigError, c.name ?? "a bad signature");
      continue;
    }
    const config = verifyConfig(payload, signature, pub);
    equal(toHex(await sessionIdOf(payload)), c.session_id, "session id");
    equal({
      round_id: toHex(config.roundId), num_devices: config.numDevices,
      dimension: config.dimension, modulus_bits: config.modulusBits, n_min: config.nMin,
      k: config.k, t: config.t, graph_seed: toHex(config.graphSeed),
      deadlines: config.deadlines.map(String), device_auth: config.deviceAuth,
      consistency_check: config.consistencyCheck,
      identity_root: config.identityRoot === null ? null : toHex(config.identityRoot),
    }, c.fields, "parsed config");
  }
}

async function signedTasks(V: Json): Promise<void> {
  const pub = fromHex(V.signed.coordinator_public);
  equal(ed25519Verify(pub.subarray(1), new Uint8Array(64), new Uint8Array(0)), false, "short key");
  // A cohort's tasks: the shared part signed once, then each member's own fields (protobuf
  // reads the concatenation as one Task); each refused case refused here too.
  for (const c of V.signed.tasks) {
    const signed = { task: fromHex(c.task), sharedSignature: fromHex(c.shared_signature),
                     sharedLength: c.shared_length };
    if (!c.valid) {
      throws(() => verifyTask(signed, pub, BigInt(c.device_id)), AuthenticationError, c.why);
      continue;
    }
    const task = verifyTask(signed, pub, BigInt(c.device_id));
    equal({
      codec: task.codec, max_bits: task.maxBits, prefix_bits: task.prefixBits,
      prefixes: task.prefixes.map(String), segment_bits: task.segmentBits,
      deny_list: task.denyList.map(String), selection: task.selection,
      prefix_conditioning: task.prefixConditioning, eps_local: task.epsLocal,
      round_config: toHex(task.roundConfig), run_id: task.runId, round: task.round,
      attempt: task.attempt, device_id: String(task.deviceId), secagg_id: task.secaggId,
      admission: toHex(task.admission), deadline_unix_ms: String(task.deadlineUnixMs),
    }, c.fields, c.why);
    equal(taskRoundConfig(task, pub).t, 3, "the task's round config");
  }
}

async function randomizer(V: Json): Promise<void> {
  for (const c of V.randomizer.thresholds) equal(a0Threshold(c.eps), c.threshold0, `a0 at ${c.eps}`);
  for (const c of V.randomizer.randomize) {
    const words = {
      uint32: (n: number) => {
        equal(n, c.dim, "words drawn");
        return Uint32Array.from(c.words);
      },
    };
    equal(randomize(c.eps, c.index, c.dim, words), c.ones, `report at eps ${c.eps}`);
  }
}

async function graph(V: Json): Promise<void> {
  for (const c of V.graph.orders) {
    const order = await ringOrder(fromHex(c.graph_seed), c.n);
    if (c.order !== undefined) {
      equal(order, c.order, `ring order of ${c.n}`);
    } else {
      const bytes = new Uint8Array(4 * c.n);
      order.forEach((id, i) => new DataView(bytes.buffer).setUint32(4 * i, id, false));
      equal(toHex(await sha256(bytes)), c.sha256, `ring order of ${c.n}`);
    }
  }
  for (const c of V.graph.neighbours) {
    equal(await neighboursOf(fromHex(c.graph_seed), c.n, c.k, c.device_id), c.neighbours,
          `neighbours of ${c.device_id} in H(${c.k}, ${c.n})`);
  }
  for (const c of V.graph.connectivity) {
    equal(await survivorsConnected(fromHex(c.graph_seed), c.n, c.k, c.survivors), c.connected,
          `connectivity of ${c.survivors.length} survivors in H(${c.k}, ${c.n})`);
  }
  throws(() => checkGraphParameters(10, 3), GraphError, "odd k below n - 1");
  throws(() => checkGraphParameters(10, 10), GraphError, "k = n");
}

async function merkle(V: Json): Promise<void> {
  for (const c of V.merkle.trees) {
    const salt = await cohortSalt(fromHex(c.round_id), fromHex(c.graph_seed), c.n);
    equal(toHex(salt), c.salt, "cohort salt");
    const order = await ringOrder(fromHex(c.graph_seed), c.n);
    const leaves: Uint8Array[] = [];
    for (const [i, proofHex] of c.proofs.entries()) {
      const keys = c.members[i].map(fromHex);
      const position: number = c.positions[i];
      equal(order[position], i + 1, `device ${i + 1} at its ring position`);
      const leaf = await leafHash(salt, i + 1, keys);
      leaves[position] = leaf;
      const root = await rootFromLeaves(c.n, [[position, leaf]], fromHex(proofHex));
      equal(root === null ? null : toHex(root), c.root, `root from device ${i + 1}'s proof`);
      if (c.n > 1) {
        const other = keys.map((k: Uint8Array) => Uint8Array.from(k));
        other[1][0] ^= 1; // another c_pk: another leaf, another root
        const forged = await rootFromLeaves(c.n, [[position, await leafHash(salt, i + 1, other)]],
                                            fromHex(proofHex));
        ok(forged !== null && toHex(forged) !== c.root, "a substituted key changes the root");
        equal(await rootFromLeaves(c.n, [[position, leaf]], fromHex(proofHex).subarray(32)), null,
              "a proof one hash short");
      }
    }
    for (const m of c.multiproofs) {
      const proof = fromHex(m.proof);
      equal(proofHashes(c.n, m.positions) * 32, proof.length, "a multiproof's length");
      const held = m.positions.map((p: number) => [p, leaves[p]!] as const);
      const root = await rootFromLeaves(c.n, held, proof);
      equal(root === null ? null : toHex(root), c.root, `multiproof of ${m.positions.length} leaves`);
      if (proof.length > 0) {
        const flipped = Uint8Array.from(proof);
        flipped[proof.length - 1]! ^= 1;
        const forged = await rootFromLeaves(c.n, held, flipped);
        ok(forged === null || toHex(forged) !== c.root, "a multiproof with a flipped byte");
        equal(await rootFromLeaves(c.n, held, proof.subarray(32)), null, "a multiproof one hash short");
      }
    }
    for (const m of c.misshapen) {
      const held = m.positions.map((p: number) => [p, leaves[p] ?? new Uint8Array(32)] as const);
      const root = await rootFromLeaves(c.n, held, fromHex(m.proof));
      equal(root === null ? null : toHex(root), m.root,
            `Python's verdict on a misshapen multiproof of [${m.positions}] in ${c.n} leaves`);
    }
  }
  const config = parseRoundConfig(fromHex(V.merkle.cohort.config));
  for (const a of V.merkle.cohort.admissions) {
    const admission = { deviceId: a.device_id, identityKey: fromHex(a.identity_key),
                        cPk: fromHex(a.c_pk), sPk: fromHex(a.s_pk), proof: fromHex(a.proof) };
    ok(await verifyAdmission(admission, config), `admission of ${a.device_id}`);
    ok(!(await verifyAdmission({ ...admission, deviceId: (a.device_id % 6) + 1 }, config)),
       "an admission under another id");
  }
}

/** Every built-in codec and two inline ones on every item and width, byte for byte. */
async function codecs(V: Json, load: BookLoader): Promise<void> {
  const items: string[] = V.codec.items;
  const books = new Map<string, Codebook>();
  for (const c of V.codec.cases) {
    if (!books.has(c.spec)) books.set(c.spec, await codebookFromSpec(c.spec, load));
    const codec = new Codec(books.get(c.spec)!, c.max_bits);
    const got = items.map((item) => codec.encodeItem(item));
    const name = c.spec.startsWith("{") ? "inline" : c.spec;
    equal(got.map((g) => g.code.toString(16)), c.codes, `codes of ${name} at ${c.max_bits} bits`);
    equal(got.map((g) => g.length), c.lengths, `lengths of ${name} at ${c.max_bits} bits`);
    equal(got.map((g) => g.truncated), c.truncated, `truncation of ${name} at ${c.max_bits} bits`);
  }
  for (const b of V.codec.boundaries) {
    if (!books.has(b.spec)) books.set(b.spec, await codebookFromSpec(b.spec, load));
    const item: string = V.codec.prefix_families[b.item];
    const got = new Codec(books.get(b.spec)!, b.max_bits).encodeItem(item);
    const what = `${JSON.stringify(item)} in ${b.spec} at ${b.max_bits} bits`;
    equal(got.code.toString(16), b.code, `the code of ${what}`);
    equal(got.length, b.length, `the length of ${what}`);
    equal(got.truncated, b.truncated, `the truncation of ${what}`);
  }
  for (const [name, key] of Object.entries(BUILTIN_BOOK_KEYS)) {
    equal(key, V.codec.keys[name], `the pinned key of ${name} (update BUILTIN_BOOK_KEYS)`);
  }
  for (const [name, key] of Object.entries(V.codec.keys)) {
    const spec = name === "inline" ? V.codec.cases.at(-1).spec : name;
    equal(await codebookKey(await codebookFromSpec(spec, load)), key, `key of codebook ${name}`);
  }
  const unicode = await Codec.fromSpec("unicode", 60, load);
  for (const item of V.codec.refused_items) {
    throws(() => unicode.encode(item), CodecError, `the item ${JSON.stringify(item)}`);
  }
  for (const c of V.codec.refused_books) {
    throws(() => codebookFromJson(c.json), CodecError, `the codebook with ${c.name}`);
  }
  await rejects(codebookFromSpec("german", load, V.codec.keys.english), /not the expected/,
                "a served book that is not the expected one");
  await rejects(codebookFromSpec("klingon", load), /unknown codebook/, "an unknown codebook");
}

function taskOf(f: Json): Task {
  return create(TaskSchema, {
    runId: "run-sel", round: 2, codec: f.codec, maxBits: f.max_bits, prefixBits: f.prefix_bits,
    prefixes: f.prefixes.map(BigInt), segmentBits: f.segment_bits,
    denyList: f.deny_list.map(BigInt), selection: f.selection,
    prefixConditioning: f.prefix_conditioning, epsLocal: f.eps_local,
    roundConfig: fromHex(f.round_config),
  });
}

/** Replays recorded draws and words, and checks that they are asked for as Python asked. */
function recorded(draws: Array<number | null>, words: number[] | null = null,
                  highs: number[] = []): DrawSource {
  const left = draws.filter((d): d is number => d !== null);
  return {
    below(high: number): number {
      highs.push(high);
      if (left.length === 0) throw new Error(`an unexpected draw below ${high}`);
      return left.shift()!;
    },
    uint32(size: number): Uint32Array {
      if (words === null || words.length !== size) throw new Error(`unexpected ${size} words`);
      return Uint32Array.from(words);
    },
  };
}

/** Selection and the one-hot index with Python's draws; whole reports; refused tasks. */
async function selection(V: Json, load: BookLoader): Promise<void> {
  const books = new Map<string, Codebook>();
  const codecOf = async (f: Json) => {
    if (!books.has(f.codec)) books.set(f.codec, await codebookFromSpec(f.codec, load));
    return new Codec(books.get(f.codec)!, f.max_bits);
  };
  for (const c of V.selection.cases) {
    const task = taskOf(c.task);
    const query = queryOfTask(task);
    const codec = await codecOf(c.task);
    const codes = c.items.map((item: string) => codec.encode(item));
    for (const o of c.outcomes) {
      const highs: number[] = [];
      const got = selectEntry(codes, c.counts, query, task.selection as SelectionRule,
                              task.prefixConditioning, recorded([o.draw], null, highs));
      equal(highs, c.total === null ? [] : [c.total], "the draw's bound");
      equal(got, { entry: o.entry, index: o.index },
            `${c.task.selection} selection (conditioned ${c.task.prefix_conditioning}) of ` +
            `${JSON.stringify(c.items)} with draw ${o.draw}`);
    }
  }
  for (const r of V.selection.reports) {
    const task = taskOf(r.task);
    equal(makeReport(r.items, r.counts, task, await codecOf(r.task), recorded(r.draws, r.words)),
          r.ones, `the report of ${JSON.stringify(r.items)}`);
  }
  for (const r of V.selection.refused) {
    let refused = false;
    try {
      const task = taskOf(r.task);
      makeReport(["apple"], [1], task, await codecOf(r.task), recorded([0], new Array(8).fill(0)));
    } catch {
      refused = true;
    }
    ok(refused, `the task with ${r.name} is refused`);
  }
}

/**
 * The lying-server bound within the tolerance of Python's on every case, and the decision:
 * never an accept where Python refuses; Python's accept everywhere outside the band of twice
 * the tolerance below the target (bounds.ts), where this device may refuse. Returns the
 * largest relative difference seen and the number of cases in the band.
 */
export function floorBounds(V: Json): { worst: number; band: number } {
  let worst = 0;
  let band = 0;
  for (const c of V.floors.bounds) {
    const what = `(n, k, t) = (${c.n}, ${c.k}, ${c.t}), dropout ${c.dropout}, corrupt ${c.corrupt}`;
    const ours = lyingServerBound(c.n, c.k, c.t, c.dropout, c.corrupt);
    const tolerance = boundTolerance(c.n);
    const difference = Math.abs(ours - c.bound);
    ok(difference <= tolerance * c.bound + 1e-300,
       `${what}: bound ${ours} is not within ${tolerance} of Python's ${c.bound}`);
    if (c.bound > 0) worst = Math.max(worst, difference / c.bound);
    const accepts = boundAccepts(ours, c.n, c.security_bits);
    if (!c.accept) ok(!accepts, `${what}: accepted at 2^-${c.security_bits}, Python refuses`);
    else if (c.bound <= 2 ** -c.security_bits * (1 - 2 * tolerance)) {
      ok(accepts, `${what}: refused at 2^-${c.security_bits}, Python accepts`);
    } else {
      band++; // Python accepts, its bound within twice the tolerance below the target: either way
    }
  }
  ok(band > 0, "some cases lie in the band");
  return { worst, band };
}

/** The lifetime budget step by step as the Python device's, and Python's query digests. */
async function budget(V: Json): Promise<void> {
  const B = V.budget;
  let now = 0;
  const store = new MemoryBudgetStore();
  let budget = await DeviceBudget.open(store, B.cap, B.period_s, () => now);
  for (const [i, step] of B.steps.entries()) {
    now = step.at;
    const f = step.task;
    const task = create(TaskSchema, {
      runId: f.run_id, round: f.round, epsLocal: f.eps_local, codec: f.codec, maxBits: f.max_bits,
      prefixBits: f.prefix_bits, prefixes: f.prefixes.map(BigInt), segmentBits: f.segment_bits,
      selection: f.selection, prefixConditioning: f.prefix_conditioning,
    });
    let outcome: unknown;
    try {
      outcome = await budget.report(task, () => [i, i + 10]);
    } catch (error) {
      outcome = (error as Error).name === "RangeError" ? "ConfigError" : (error as Error).name;
    }
    equal(outcome, step.outcome, `step ${i} (run ${f.run_id}, eps ${f.eps_local} at ${step.at})`);
    equal(budget.spent(), step.spent_after, `spent after step ${i}`);
    if (i === 6) budget = await DeviceBudget.open(store, B.cap, B.period_s, () => now); // a reload
  }
  // A wrong clock (make_vectors.py budget_clock_steps): spends dated and "now" taken with the
  // task's signed deadline, and the reports kept, as the Python device.
  let clock = 0;
  const clocked = new MemoryBudgetStore();
  const skewed = await DeviceBudget.open(clocked, B.cap, B.period_s, () => clock);
  const base = B.steps[0].task;
  for (const [i, step] of B.clock_steps.entries()) {
    clock = step.clock;
    const task = create(TaskSchema, {
      runId: step.run_id, round: step.round, epsLocal: step.eps_local, codec: base.codec,
      maxBits: base.max_bits, prefixBits: base.prefix_bits, prefixes: base.prefixes.map(BigInt),
      segmentBits: base.segment_bits, selection: base.selection,
      prefixConditioning: base.prefix_conditioning, deadlineUnixMs: BigInt(step.deadline_unix_ms),
    });
    let outcome: unknown;
    try {
      outcome = await skewed.report(task, () => [i]);
    } catch (error) {
      outcome = (error as Error).name === "RangeError" ? "ConfigError" : (error as Error).name;
    }
    equal(outcome, step.outcome, `clock step ${i} (run ${step.run_id} at ${step.clock})`);
    equal(skewed.spent(), step.spent_after, `spent after clock step ${i}`);
    equal(Object.keys((await clocked.load())!.reports).sort(), step.reports,
          `reports kept after clock step ${i}`);
  }
  for (const d of B.digests) {
    const f = d.task;
    equal(pythonFloatRepr(f.eps_local), d.repr, `repr of ${f.eps_local}`);
    const task = create(TaskSchema, {
      runId: f.run_id, round: f.round, prefixBits: f.prefix_bits, prefixes: f.prefixes.map(BigInt),
      denyList: f.deny_list.map(BigInt), segmentBits: f.segment_bits, epsLocal: f.eps_local,
      codec: f.codec, maxBits: f.max_bits, selection: f.selection,
      prefixConditioning: f.prefix_conditioning,
    });
    equal(await queryDigest(task), d.digest, `query digest at eps ${f.eps_local}`);
  }
  // A spent budget's refusal, worded as the Python device's to the character (its numbers in
  // Python's :.4g and :g).
  const number = (x: number | string) =>
    (typeof x === "string" ? Number(x.replace("inf", "Infinity")) : x);
  for (const r of B.refusals) {
    const refusing = await DeviceBudget.open(new MemoryBudgetStore(), r.cap, B.period_s, () => 0);
    const made = (runId: string, epsLocal: number) => create(TaskSchema, {
      runId, round: 1, epsLocal, codec: base.codec, maxBits: base.max_bits,
      prefixBits: base.prefix_bits, prefixes: base.prefixes.map(BigInt),
      segmentBits: base.segment_bits, selection: base.selection,
      prefixConditioning: base.prefix_conditioning,
    });
    for (const [i, eps] of (r.spends as number[]).entries()) {
      await refusing.report(made(`s${i}`, eps), () => [i]);
    }
    let message = "(taken)";
    try {
      await refusing.report(made("ask", number(r.eps_local)), () => [0]);
    } catch (error) {
      message = (error as Error).message;
    }
    equal(message, r.message, `the refusal of ${r.eps_local} after ${r.spends} under ${r.cap}`);
  }
}

/** Every check, by name (what the test runners report); `load` reads the trained books. */
export function pythonChecks(V: Json, load: BookLoader): Record<string, Check> {
  const checks: Record<string, Check> = {
    "shamir: a seeded stream gives Python's shares": shamirShares,
    "shamir: reconstruction and decoding as Python, failures included": shamirReconstruct,
    "X25519, its low-order check, and HKDF": keyAgreement,
    "mask keys and AES-128-CTR masks": masks,
    "AES-256-GCM share encryption": shareEncryption,
    "consistency signatures, byte for byte": consistency,
    "signed round configs: verified and parsed, or refused": signedConfigs,
    "signed tasks: verified, decoded, or refused": signedTasks,
    "randomizer: thresholds and reports": randomizer,
    "neighbour graph: ring order, neighbours, survivor connectivity": graph,
    "cohort Merkle tree: salts, roots from proofs, admissions": merkle,
    "codecs: every built-in and inline codebook, items of every kind": (v) => codecs(v, load),
    "selection: the entry, the one-hot index and the report, from Python's draws":
      (v) => selection(v, load),
    "floors: the lying-server bound within tolerance, never accepting what Python refuses":
      async (v) => { floorBounds(v); },
    "lifetime budget: spends, retries and refusals as the Python device; query digests": budget,
  };
  for (const r of V.device_rounds) {
    const header = parseRoundConfig(fromHex(r.config));
    checks[`a Python device's round replayed: device ${r.device_id}, D=${header.dimension}, ` +
           `mod 2^${header.modulusBits}`] = () => deviceRound(r);
  }
  return checks;
}
