/**
 * What the demo page counts of a device's tasks. Split from demo.ts, which runs the page when
 * loaded, so that node's tests can load it.
 */

import type { TaskResult } from "../src/loop.js";

/** What the count reads of one task the page shows (demo.ts's ``TaskView``). */
export interface CountedTask {
  /** The task's name, as `released` names attempts (`${runId} round ${round}.${attempt}`). */
  task?: string;
  outcome: TaskResult["outcome"];
  contributed: boolean;
}

/**
 * The rounds a device contributed to: its tasks that completed with its input in, and those
 * whose input was accepted in an attempt `fedhh up` says was released (`released`, from
 * progress.json), whatever the device's own outcome: an answer to a later stage that came late
 * leaves its input in the sum (before, such a round was left out: two of five devices showed
 * 1 round after both rounds had released all 1,387). An attempt that aborted after the device
 * sent its input released nothing, and the round's next attempt is a task of its own: before,
 * each such attempt was counted, so a device that contributed to 4 rounds, one of them retried
 * once, showed 5. (Its row still names the aborted attempt's outcome, "contributed
 * (round_aborted)".)
 */
export function roundsContributed(tasks: readonly CountedTask[],
                                  released: ReadonlySet<string> = new Set()): number {
  // An attempt is counted once: a page reloaded in it keeps it as dropped (kept.ts) and may be
  // handed its task again.
  const counted = new Set<string>();
  return tasks.filter((t) => {
    if (!inTheSum(t, released)) return false;
    if (t.task === undefined) return true;
    if (counted.has(t.task)) return false;
    counted.add(t.task);
    return true;
  }).length;
}

/** Whether the task's input is in a released sum, as far as the page knows. */
export function inTheSum(task: CountedTask, released: ReadonlySet<string>): boolean {
  return task.contributed && (task.outcome === "completed" ||
                              (task.task !== undefined && released.has(task.task)));
}

/**
 * After this many rounds in a row ended `late` with nothing contributed, the page tells the
 * user what to do, and so does `fedhh up`'s summary (fedhh/cli/webdemo.py's LATE_IN_A_ROW is
 * the same number). A device too slow for the stage windows is charged its report's ε each
 * round (the budget is spent when the report is made) and reaches no sum: before, it was told
 * "late" round after round and nothing more.
 */
export const LATE_IN_A_ROW = 3;

/** How many of the device's last tasks in a row ended late without its input in. */
export function lateInARow(tasks: readonly CountedTask[]): number {
  let count = 0;
  for (let i = tasks.length - 1; i >= 0; i--) {
    const task = tasks[i]!;
    if (task.outcome !== "late" || task.contributed) break;
    count += 1;
  }
  return count;
}

/** What the page says of a device late in its last rounds in a row, or "" under the bar. */
export function lateAdvice(tasks: readonly CountedTask[]): string {
  const count = lateInARow(tasks);
  if (count < LATE_IN_A_ROW) return "";
  return `late in its last ${count} rounds in a row: each spent its report's ε, and none ` +
         "reached the sum. This browser is too slow for the rounds' deadlines: keep this tab " +
         "in front, close other tabs and programs, or use a faster device (whoever runs " +
         "fedhh up can give the stages longer windows: --stage-ms)";
}
