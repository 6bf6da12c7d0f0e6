/**
 * Web devices for tests/web/test_web_wire.py, given the coordinator's and the aggregator's
 * Connect URLs and one enrolment token per device: each device enrols, checks in until it gets
 * a task, and takes part in that round (src/loop.ts). Run in Node (test/web_devices_node.ts)
 * and in a Chromium page (test/web_devices_browser.ts).
 */

import { nextRound, type TaskResult } from "../src/loop.js";
import { CoordinatorClient, aggregatorClient, connectTransport } from "../src/wire.js";

export interface Fleet { coordinator: string; aggregator: string; tokens: string[] }

/** `onEnrolled(n)` once all are enrolled (they check in from then on). */
export async function runFleet(fleet: Fleet, onEnrolled: (n: number) => void
): Promise<Array<TaskResult & { deviceId: string }>> {
  const coordinator = new CoordinatorClient(connectTransport(fleet.coordinator));
  const aggregator = aggregatorClient(connectTransport(fleet.aggregator));
  const identities = await Promise.all(
    fleet.tokens.map((token, i) => coordinator.enroll(token, `web-${i}`)));
  onEnrolled(identities.length);
  return Promise.all(identities.map(async (identity) => ({
    deviceId: identity.deviceId.toString(),
    ...await nextRound(coordinator, identity, { aggregatorFor: () => aggregator }),
  })));
}
