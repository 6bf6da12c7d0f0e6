/**
 * The web client's wire against the real services (tests/web/test_web_wire.py starts them),
 * given the coordinator's and the aggregator's Connect URLs and a fresh enrolment token: it
 * enrols, checks in with fresh round keys, and makes the calls the services must refuse, and
 * returns what happened; the Python test checks it against the services' state. Run in Node
 * (`node dist/test/wire_probe.js '<json>'`, one JSON line on stdout) and in a Chromium page
 * (test/wire_browser.ts).
 */

import { ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";

import { toHex } from "../src/bytes.js";
import { AwaitStageRequestSchema } from "../src/gen/fedhh/v1/aggregator_pb.js";
import { x25519FromSeed } from "../src/primitives.js";
import { systemRandom } from "../src/random.js";
import {
  CoordinatorClient, aggregatorClient, connectTransport,
} from "../src/wire.js";

export interface Probe { coordinator: string; aggregator: string; token: string }

async function refusal(call: () => Promise<unknown>): Promise<string> {
  try {
    await call();
    return "ok";
  } catch (error) {
    return error instanceof ConnectError ? `${error.code}:${error.rawMessage}` : String(error);
  }
}

export async function runProbe(probe: Probe): Promise<Record<string, unknown>> {
  const coordinator = new CoordinatorClient(connectTransport(probe.coordinator));
  const out: Record<string, unknown> = {};
  out.wrongToken = await refusal(() => coordinator.enroll("ab".repeat(32)));
  const identity = await coordinator.enroll(probe.token, "web probe");
  out.deviceId = identity.deviceId.toString();
  out.credential = toHex(identity.credential);
  out.coordinatorPublic = toHex(identity.coordinatorPublic);
  out.replay = await refusal(() => coordinator.enroll(probe.token));
  const keys = { cPk: x25519FromSeed(systemRandom(32)).public,
                 sPk: x25519FromSeed(systemRandom(32)).public };
  const first = await coordinator.checkIn(identity, keys, new Uint8Array(), 1);
  out.checkIn = first.kind === "wait" ? `wait:${first.retryAfterMs}` : "task";
  out.cPk = toHex(keys.cPk);
  const stranger = { ...identity, credential: new Uint8Array(32) };
  out.wrongCredential = await refusal(() => coordinator.checkIn(stranger, keys, new Uint8Array(), 1));
  out.lowOrderKeys = await refusal(() => coordinator.checkIn(
    identity, { cPk: keys.cPk, sPk: new Uint8Array(32) }, new Uint8Array(), 1));
  const aggregator = aggregatorClient(connectTransport(probe.aggregator));
  out.unknownRound = await refusal(() => aggregator.awaitStage(create(AwaitStageRequestSchema, {
    sessionId: new Uint8Array(32).fill(1), stage: 1, waitMs: 1 })));
  return out;
}
