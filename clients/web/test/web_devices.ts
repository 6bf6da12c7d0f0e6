/**
 * Web devices for tests/web/test_web_wire.py, given the coordinator's and the aggregator's
 * Connect URLs and one enrolment token and one user's items per device: each device enrols,
 * checks in until it gets a task, makes its report from its items (src/report.ts, a budget in
 * memory) and takes part in that round (src/loop.ts). Run in Node (test/web_devices_node.ts)
 * and in a Chromium page (test/web_devices_browser.ts).
 */

import { DeviceBudget, MemoryBudgetStore } from "../src/budget.js";
import { DEFAULT_FLOORS } from "../src/floors.js";
import { nextRound, type TaskResult } from "../src/loop.js";
import { reportForTask } from "../src/report.js";
import { CoordinatorClient, aggregatorClient, connectTransport } from "../src/wire.js";

/** One token and one user's items (each held once) per device. */
export interface Fleet { coordinator: string; aggregator: string; tokens: string[]; items: string[][] }

/** `onEnrolled(n)` once all are enrolled (they check in from then on). */
export async function runFleet(fleet: Fleet, onEnrolled: (n: number) => void
): Promise<Array<TaskResult & { deviceId: string }>> {
  const coordinator = new CoordinatorClient(connectTransport(fleet.coordinator));
  const aggregators = new Map<string, ReturnType<typeof aggregatorClient>>();
  // The aggregator each task names by its Connect URL (the test's services name this one).
  const aggregatorFor = (webUrl: string) => {
    if (webUrl !== fleet.aggregator) throw new Error(`the task names ${webUrl || "no URL"}`);
    let client = aggregators.get(webUrl);
    if (client === undefined) {
      client = aggregatorClient(connectTransport(webUrl));
      aggregators.set(webUrl, client);
    }
    return client;
  };
  const identities = await Promise.all(
    fleet.tokens.map((token, i) => coordinator.enroll(token, `web-${i}`)));
  onEnrolled(identities.length);
  return Promise.all(identities.map(async (identity, i) => {
    const budget = await DeviceBudget.open(new MemoryBudgetStore(), DEFAULT_FLOORS.lifetimeEpsLocal,
                                           DEFAULT_FLOORS.budgetPeriodS);
    const items = fleet.items[i] ?? [];
    const data = { items, counts: items.map(() => 1) };
    return {
      deviceId: identity.deviceId.toString(),
      ...await nextRound(coordinator, identity, {
        aggregatorFor,
        report: (task) => reportForTask(task, data, budget, DEFAULT_FLOORS),
      }),
    };
  }));
}
