/**
 * The Python library's vectors (vectors/python.json), checked by the TypeScript implementation:
 * same inputs and the same random bytes must give the same bytes out, and what Python rejects
 * must be rejected here.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { bytesToBig, fromHex, toHex } from "../src/bytes.js";
import { ConfigError, parseRoundConfig, sessionIdOf, verifyConfig, verifyTaskSignature }
  from "../src/config.js";
import { addMask, checkModulusBits, generateMask, pairMaskKey, selfMaskKey, vectorBytes, zeros }
  from "../src/prg.js";
import {
  aeadDecrypt, aeadEncrypt, agree, ed25519PublicFromSeed, ed25519Verify, hkdf,
  isValidX25519Public, sha256, x25519FromSeed,
} from "../src/primitives.js";
import { a0Threshold, randomize } from "../src/randomizer.js";
import { AuthenticationError, taskRoundConfig, verifyTask } from "../src/task.js";
import {
  type NeighbourKeys, consistencySignature, decryptShare, generateRoundKeys, maskedInput,
  neighbourKeys, shareKeys, survivorsDigest, unmaskShares,
} from "../src/secagg.js";
import * as shamir from "../src/shamir.js";
import { fixed, replay } from "./seeded.js";
import { type Json, pythonVectors } from "./vectors.js";

const V = pythonVectors();

describe("shamir", () => {
  test("a seeded stream gives Python's shares", () => {
    for (const c of V.shamir.share) {
      const ys = shamir.share(BigInt(`0x${c.secret}`), c.threshold, c.xs, replay(c.stream_key));
      assert.deepEqual(ys.map((y) => toHex(shamir.encodeShare(y))), c.ys);
    }
  });
  test("reconstruction matches, and Python's failures fail", () => {
    for (const c of V.shamir.reconstruct) {
      const points = c.points.map(([x, y]: [number, string]) =>
        [x, shamir.decodeShare(fromHex(y))] as const);
      if (c.secret === null) {
        assert.throws(() => shamir.reconstruct(points), shamir.ShareError);
      } else {
        assert.equal(shamir.reconstruct(points), BigInt(`0x${c.secret}`));
      }
    }
  });
  test("share decoding accepts exactly [0, p) in 33 bytes", () => {
    for (const c of V.shamir.decode) {
      if (c.valid) assert.equal(toHex(shamir.encodeShare(shamir.decodeShare(fromHex(c.share)))), c.share);
      else assert.throws(() => shamir.decodeShare(fromHex(c.share)), shamir.ShareError);
    }
  });
});

describe("key agreement", () => {
  test("X25519 public keys and shared secrets", () => {
    for (const c of V.x25519.pairs) {
      const a = x25519FromSeed(fromHex(c.seed_a));
      const b = x25519FromSeed(fromHex(c.seed_b));
      assert.equal(toHex(a.public), c.public_a);
      assert.equal(toHex(b.public), c.public_b);
      assert.equal(toHex(agree(a.secret, b.public)), c.shared);
      assert.equal(toHex(agree(b.secret, a.public)), c.shared);
    }
  });
  test("low-order and edge public keys: the same verdicts as Python", async () => {
    for (const c of V.x25519.validity) {
      assert.equal(await isValidX25519Public(fromHex(c.public)), c.valid, c.public);
    }
  });
  test("HKDF-SHA256", async () => {
    for (const c of V.hkdf) {
      const okm = await hkdf(fromHex(c.ikm), fromHex(c.salt), fromHex(c.info), c.length);
      assert.equal(toHex(okm), c.okm);
    }
  });
});

describe("mask expansion", () => {
  test("self and pair mask keys", async () => {
    for (const c of V.masks.keys) {
      const key = c.kind === "self"
        ? await selfMaskKey(fromHex(c.secret), fromHex(c.session_id), c.u)
        : await pairMaskKey(fromHex(c.secret), fromHex(c.session_id), c.u, c.v);
      assert.equal(toHex(key), c.key);
    }
  });
  test("AES-128-CTR masks, small in full and large by digest", async () => {
    for (const c of V.masks.expansions) {
      const mask = vectorBytes(await generateMask(fromHex(c.key), c.dimension,
                                                  checkModulusBits(c.bits)));
      if (c.mask !== undefined) assert.equal(toHex(mask), c.mask);
      else assert.equal(toHex(await sha256(mask)), c.sha256);
    }
  });
  test("subtracting a mask undoes adding it", async () => {
    const c = V.masks.expansions[5];
    const acc = zeros(c.dimension, checkModulusBits(c.bits));
    await addMask(acc, fromHex(c.key), 1);
    await addMask(acc, fromHex(c.key), -1);
    assert.ok(acc.every((x) => x === 0));
  });
});

describe("share encryption", () => {
  test("AES-256-GCM blobs: same nonce, same bytes; a flipped bit fails", async () => {
    for (const c of V.aead) {
      const blob = fromHex(c.blob);
      const plain = await aeadDecrypt(fromHex(c.key), blob, fromHex(c.aad));
      assert.ok(plain !== null);
      assert.equal(toHex(plain), c.plaintext);
      const again = await aeadEncrypt(fromHex(c.key), plain, fromHex(c.aad), replay(c.stream_key));
      assert.equal(toHex(again), c.blob);
      for (const at of [0, 12, blob.length - 1]) {
        const bad = Uint8Array.from(blob);
        bad[at]! ^= 1;
        assert.equal(await aeadDecrypt(fromHex(c.key), bad, fromHex(c.aad)), null);
      }
      assert.equal(await aeadDecrypt(fromHex(c.key), blob.subarray(0, 27), fromHex(c.aad)), null);
    }
  });
});

describe("a Python device's round, replayed", () => {
  for (const r of V.device_rounds as Json[]) {
    const header = parseRoundConfig(fromHex(r.config));
    test(`device ${r.device_id} of a round of dimension ${header.dimension} mod 2^${header.modulusBits}`,
         async () => {
      const config = verifyConfig(fromHex(r.config), fromHex(r.config_signature),
                                  fromHex(r.coordinator_public));
      const sid = await sessionIdOf(fromHex(r.config));
      assert.equal(toHex(sid), r.session_id);
      const me: number = r.device_id;
      const rand = replay(r.stream_key);
      // Stage 0: the same round keys from the same stream.
      const keys = generateRoundKeys(rand);
      assert.equal(toHex(keys.c.public), r.advertise.c_pk);
      assert.equal(toHex(keys.s.public), r.advertise.s_pk);
      // Stage 1: the same shares, nonces and ciphertexts.
      const neighbours = new Map<number, NeighbourKeys>();
      for (const p of r.peers) {
        neighbours.set(p.id, await neighbourKeys(me, keys, sid,
                                                 { id: p.id, cPk: fromHex(p.c_pk), sPk: fromHex(p.s_pk) }));
      }
      const shared = await shareKeys(me, config.t, sid, keys, neighbours, rand);
      assert.deepEqual(shared.shares.map((s) => ({ dst: s.dst, ciphertext: toHex(s.ciphertext) })),
                       r.shares_out);
      assert.equal(toHex(shared.commitment), r.b_commitment);
      // Stage 2: decrypt the partners' shares, then the same masked vector.
      const received = new Map<number, readonly [bigint, bigint]>();
      for (const s of r.shares_in) {
        received.set(s.src, await decryptShare(me, sid, neighbours.get(s.src)!,
                                               { src: s.src, dst: me, ciphertext: fromHex(s.ciphertext) }));
      }
      const maskKeys = new Map([...received.keys()].map((v) => [v, neighbours.get(v)!.maskKey]));
      const y = await maskedInput(me, sid, shared.b, maskKeys, r.ones, config.dimension,
                                  config.modulusBits);
      assert.equal(toHex(vectorBytes(y)), r.masked_input);
      // Stage 4: the same revealed shares.
      const revealed = unmaskShares(received, r.alive, r.dropped);
      assert.deepEqual(revealed.b.map(([v, y]) => [v, toHex(y)]), r.b_shares);
      assert.deepEqual(revealed.s.map(([v, y]) => [v, toHex(y)]), r.s_shares);
      // A share that does not authenticate, or arrives under another sender's id, aborts.
      const first = r.shares_in[0];
      const bad = fromHex(first.ciphertext);
      bad[20]! ^= 1;
      await assert.rejects(decryptShare(me, sid, neighbours.get(first.src)!,
                                        { src: first.src, dst: me, ciphertext: bad }),
                           /DECRYPTION_FAILED/);
      const other = r.shares_in[1];
      await assert.rejects(decryptShare(me, sid, neighbours.get(other.src)!,
                                        { src: other.src, dst: me, ciphertext: fromHex(first.ciphertext) }),
                           /DECRYPTION_FAILED/);
    });
  }
});

describe("signatures", () => {
  test("consistency signatures are Python's, byte for byte", async () => {
    for (const c of V.consistency) {
      assert.equal(toHex(ed25519PublicFromSeed(fromHex(c.identity_seed))), c.identity_public);
      assert.equal(toHex(await survivorsDigest(c.survivors)), c.digest);
      const signature = await consistencySignature(fromHex(c.identity_seed), fromHex(c.session_id),
                                                   c.device_id, c.survivors);
      assert.equal(toHex(signature), c.signature);
    }
  });
  test("signed round configs: verified and parsed as Python does, or refused", async () => {
    const pub = fromHex(V.signed.coordinator_public);
    for (const c of V.signed.configs) {
      const payload = fromHex(c.payload);
      const signature = fromHex(c.signature);
      if (!c.valid) {
        // Malformed encodings carry a valid signature: the parse must refuse them.
        assert.throws(() => verifyConfig(payload, signature, pub), ConfigError,
                      c.name ?? "a bad signature");
        continue;
      }
      const config = verifyConfig(payload, signature, pub);
      assert.equal(toHex(await sessionIdOf(payload)), c.session_id);
      const f = c.fields;
      assert.deepEqual({
        round_id: toHex(config.roundId), num_devices: config.numDevices,
        dimension: config.dimension, modulus_bits: config.modulusBits, n_min: config.nMin,
        k: config.k, t: config.t, graph_seed: toHex(config.graphSeed),
        deadlines: config.deadlines.map(String), device_auth: config.deviceAuth,
        consistency_check: config.consistencyCheck,
        identity_root: config.identityRoot === null ? null : toHex(config.identityRoot),
      }, f);
    }
  });
  test("signed tasks: the context-prefixed signature and nothing else", () => {
    const pub = fromHex(V.signed.coordinator_public);
    for (const c of V.signed.tasks) {
      assert.equal(verifyTaskSignature(fromHex(c.task), fromHex(c.signature), pub), c.valid);
    }
    assert.equal(ed25519Verify(pub.subarray(1), new Uint8Array(64), new Uint8Array(0)), false);
  });
  test("a signed task decodes to Python's fields and carries a signed round config", () => {
    const pub = fromHex(V.signed.coordinator_public);
    const [good, ...bad] = V.signed.tasks;
    const task = verifyTask(fromHex(good.task), fromHex(good.signature), pub);
    assert.deepEqual({
      run_id: task.runId, round: task.round, attempt: task.attempt,
      device_id: String(task.deviceId), prefix_bits: task.prefixBits,
      prefixes: task.prefixes.map(String), eps_local: task.epsLocal, codec: task.codec,
      max_bits: task.maxBits, selection: task.selection, secagg_id: task.secaggId,
      deadline_unix_ms: String(task.deadlineUnixMs), round_config: toHex(task.roundConfig),
    }, good.fields);
    assert.equal(taskRoundConfig(task, pub).t, 3);
    for (const c of bad) {
      assert.throws(() => verifyTask(fromHex(c.task), fromHex(c.signature), pub), AuthenticationError);
    }
  });
});

describe("randomizer", () => {
  test("a0 thresholds equal Python's 120-digit ones", () => {
    for (const c of V.randomizer.thresholds) assert.equal(a0Threshold(c.eps), c.threshold0, String(c.eps));
  });
  test("the same words give the same report", () => {
    for (const c of V.randomizer.randomize) {
      const words = { uint32: (n: number) => { assert.equal(n, c.dim); return Uint32Array.from(c.words); } };
      assert.deepEqual(randomize(c.eps, c.index, c.dim, words), c.ones);
    }
  });
});

test("bigint helpers round-trip", () => {
  assert.equal(bytesToBig(fromHex("0102")), 258n);
  assert.equal(toHex(fixed(fromHex("abcd"))(2)), "abcd");
});
