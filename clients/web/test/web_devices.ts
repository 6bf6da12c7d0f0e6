/**
 * Web devices in Node for tests/web/test_web_wire.py: `node dist/test/web_devices.js '<json>'`
 * with the coordinator's and the aggregator's Connect URLs and one enrolment token per device.
 * Each device enrols (then one line `{"enrolled": n}` on stdout), checks in until it gets a
 * task, and takes part in that round (src/loop.ts); then one line `{"results": [...]}`.
 */

import { CoordinatorClient, aggregatorClient, connectTransport } from "../src/wire.js";
import { nextRound } from "../src/loop.js";

interface Fleet { coordinator: string; aggregator: string; tokens: string[] }

async function main(): Promise<void> {
  const fleet = JSON.parse(process.argv[2] ?? "{}") as Fleet;
  const coordinator = new CoordinatorClient(connectTransport(fleet.coordinator));
  const aggregator = aggregatorClient(connectTransport(fleet.aggregator));
  const identities = await Promise.all(
    fleet.tokens.map((token, i) => coordinator.enroll(token, `web-${i}`)));
  process.stdout.write(`${JSON.stringify({ enrolled: identities.length })}\n`);
  const results = await Promise.all(identities.map(async (identity) => ({
    deviceId: identity.deviceId.toString(),
    ...await nextRound(coordinator, identity, { aggregatorFor: () => aggregator }),
  })));
  process.stdout.write(`${JSON.stringify({ results })}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  process.exit(1);
});
