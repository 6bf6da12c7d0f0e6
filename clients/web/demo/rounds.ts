/**
 * What the demo page counts of a device's tasks. Split from demo.ts, which runs the page when
 * loaded, so that node's tests can load it.
 */

import type { TaskResult } from "../src/loop.js";

/** What the count reads of one task the page shows (demo.ts's ``TaskView``). */
export interface CountedTask {
  outcome: TaskResult["outcome"];
  contributed: boolean;
}

/**
 * The rounds a device contributed to: its tasks that completed with its input in. An attempt
 * that aborted after the device sent its input released nothing, and the round's next attempt
 * is a task of its own: before, each such attempt was counted, so a device that contributed to
 * 4 rounds, one of them retried once, showed 5. (Its row still names the aborted attempt's
 * outcome, "contributed (round_aborted)".)
 */
export function roundsContributed(tasks: readonly CountedTask[]): number {
  return tasks.filter((t) => t.contributed && t.outcome === "completed").length;
}
