/**
 * TypeScript devices driven from Python (tests/web/tsdevice.py): one JSON request per line on
 * stdin, one JSON answer per line on stdout, bytes as hex. The devices are the real
 * SecAggDevice with production randomness; the Python test puts them in a simulated round next
 * to Python devices and a Python server.
 */

import { createInterface } from "node:readline";

import { fromHex, toHex } from "../src/bytes.js";
import {
  type AdvertiseKeys, type DevicePolicy, InvalidReport, SecAggDevice,
} from "../src/device.js";
import type { Admission } from "../src/merkle.js";
import { vectorBytes } from "../src/prg.js";
import { x25519FromSeed } from "../src/primitives.js";
import { DeviceAbort } from "../src/secagg.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const devices = new Map<number, SecAggDevice>();

function admissionIn(a: Json): Admission | null {
  return a === null ? null : { deviceId: a.device_id, identityKey: fromHex(a.identity_key),
                               cPk: fromHex(a.c_pk), sPk: fromHex(a.s_pk), proof: fromHex(a.proof) };
}

function admissionOut(a: Admission | null): Json {
  return a === null ? null : { device_id: a.deviceId, identity_key: toHex(a.identityKey),
                               c_pk: toHex(a.cPk), s_pk: toHex(a.sPk), proof: toHex(a.proof) };
}

function advertIn(e: Json): AdvertiseKeys {
  return { sessionId: fromHex(e.session_id), deviceId: e.device_id, cPk: fromHex(e.c_pk),
           sPk: fromHex(e.s_pk), admission: admissionIn(e.admission) };
}

function advertOut(e: AdvertiseKeys): Json {
  return { session_id: toHex(e.sessionId), device_id: e.deviceId, c_pk: toHex(e.cPk),
           s_pk: toHex(e.sPk), admission: admissionOut(e.admission) };
}

const share = (s: Json) => ({ src: s.src, dst: s.dst, ciphertext: fromHex(s.ciphertext) });

async function handle(m: Json): Promise<Json> {
  if (m.op === "create") {
    const policy: DevicePolicy | undefined = m.policy === null ? undefined : {
      minThreshold: m.policy.min_threshold, minNMin: m.policy.min_n_min,
      maxDimension: m.policy.max_dimension, requireDeviceAuth: m.policy.require_device_auth,
      requireConsistencyCheck: m.policy.require_consistency_check,
      maxCorruptFraction: m.policy.max_corrupt_fraction, securityBits: m.policy.security_bits,
      assumedDropout: m.policy.assumed_dropout };
    const device = await SecAggDevice.create(
      fromHex(m.config), fromHex(m.signature), fromHex(m.coordinator_public), m.id, {
        ...(policy === undefined ? {} : { policy }),
        ...(m.identity_seed === null ? {} : { identitySeed: fromHex(m.identity_seed) }),
        ...(m.admission === null ? {} : { admission: admissionIn(m.admission)! }),
        ...(m.round_keys === null ? {} : { roundKeys: { c: x25519FromSeed(fromHex(m.round_keys.c)),
                                                        s: x25519FromSeed(fromHex(m.round_keys.s)) } }),
      });
    devices.set(m.id, device);
    return null;
  }
  const device = devices.get(m.id);
  if (device === undefined) throw new Error(`no device ${m.id}`);
  const r = m.request;
  switch (m.op) {
    case "advertise":
      return advertOut(device.advertiseKeys());
    case "share_keys": {
      const out = await device.shareKeys({ sessionId: fromHex(r.session_id), deviceId: r.device_id,
                                           roster: r.roster.map(advertIn),
                                           rangeProof: fromHex(r.range_proof) });
      return { session_id: toHex(out.sessionId), device_id: out.deviceId,
               shares: out.shares.map((s) => ({ src: s.src, dst: s.dst, ciphertext: toHex(s.ciphertext) })),
               b_commitment: toHex(out.bCommitment) };
    }
    case "masked_input": {
      const out = await device.maskedInput({ sessionId: fromHex(r.session_id), deviceId: r.device_id,
                                             shares: r.shares.map(share) }, m.ones);
      return { session_id: toHex(out.sessionId), device_id: out.deviceId,
               vector: toHex(vectorBytes(out.vector)) };
    }
    case "consistency": {
      const out = await device.consistencyCheck({ sessionId: fromHex(r.session_id),
                                                  deviceId: r.device_id, survivors: r.survivors });
      return { session_id: toHex(out.sessionId), device_id: out.deviceId, signature: toHex(out.signature) };
    }
    case "unmask": {
      const out = await device.unmask({
        sessionId: fromHex(r.session_id), deviceId: r.device_id, alive: r.alive, dropped: r.dropped,
        signatures: r.signatures.map(([w, sig]: [number, string]) => [w, fromHex(sig)]) });
      return { session_id: toHex(out.sessionId), device_id: out.deviceId,
               b_shares: out.bShares.map(([v, y]) => [v, toHex(y)]),
               s_shares: out.sShares.map(([v, y]) => [v, toHex(y)]) };
    }
    default:
      throw new Error(`unknown op ${String(m.op)}`);
  }
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  let answer: Json;
  try {
    answer = { ok: await handle(JSON.parse(line)) };
  } catch (error) {
    answer = error instanceof DeviceAbort ? { abort: error.reason, detail: error.message }
      : error instanceof InvalidReport ? { invalid_report: error.message }
      : { error: String(error) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
