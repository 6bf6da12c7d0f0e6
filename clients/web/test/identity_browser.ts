/**
 * The page of tests/web/test_web_identity.py (bundled to dist/browser/identity.js): on every
 * load it runs one device (`runDevice`, its identity and budget in IndexedDB) with the same
 * one-time token from `identity.json`, stops it once it is enrolled, spends 1.5 of its local
 * epsilon, and checks in once with its identity (a 1 ms long-poll). `window.fedhhIdentity`
 * gets {deviceId, fresh, spent, checkIn} (or {error}): after a reload the device must be the
 * same one (fresh false: the spent token was not presented again) with the spent epsilon.
 */

import { create } from "@bufbuild/protobuf";

import { DeviceBudget, IndexedDbBudgetStore } from "../src/budget.js";
import { DEFAULT_FLOORS } from "../src/floors.js";
import { TaskSchema } from "../src/gen/fedhh/v1/coordinator_pb.js";
import { IndexedDbIdentityStore } from "../src/identity.js";
import { systemRandom } from "../src/random.js";
import { generateRoundKeys } from "../src/secagg.js";
import { type Identity, CoordinatorClient, connectTransport } from "../src/wire.js";
import { type PublicIdentity, runDevice } from "../src/run.js";
import { deviceDatabase } from "../src/storage.js";

const page = globalThis as unknown as { fedhhIdentity?: Record<string, unknown> };
const NAME = "reload-test";

async function main(): Promise<Record<string, unknown>> {
  const { coordinator, token } = await (await fetch("identity.json")).json() as
    { coordinator: string; token: string };
  const stop = new AbortController();
  let seen: { identity: PublicIdentity; fresh: boolean; spent: number } | undefined;
  await runDevice({ coordinatorUrl: coordinator, enrollmentToken: token, items: ["x"],
                    name: NAME, signal: stop.signal, onEvent: (event) => {
    if (event.type === "enrolled") {
      seen = event;
      stop.abort(new Error("enrolled"));
    }
  } });
  if (seen === undefined) throw new Error("the device stopped before it was enrolled");
  const budget = await DeviceBudget.open(new IndexedDbBudgetStore(deviceDatabase(NAME)),
                                         DEFAULT_FLOORS.lifetimeEpsLocal,
                                         DEFAULT_FLOORS.budgetPeriodS);
  await budget.report(create(TaskSchema, { runId: `load-${seen.spent}`, round: 1, epsLocal: 1.5,
                                           codec: "bytes", maxBits: 8 }), () => [3]);
  const keys = generateRoundKeys(systemRandom);
  // (the stored credential: the page's events carry the public part of the identity only)
  const identity: Identity | null = await new IndexedDbIdentityStore(deviceDatabase(NAME)).load();
  if (identity === null || identity.deviceId !== seen.identity.deviceId) {
    throw new Error("the stored identity is not the enrolled device's");
  }
  const answer = await new CoordinatorClient(connectTransport(coordinator)).checkIn(
    identity, { cPk: keys.c.public, sPk: keys.s.public }, undefined, 1);
  return { deviceId: seen.identity.deviceId.toString(), fresh: seen.fresh, spent: seen.spent,
           checkIn: answer.kind };
}

main().then((out) => { page.fedhhIdentity = out; },
            (error: unknown) => { page.fedhhIdentity = { error: String(error) }; });
