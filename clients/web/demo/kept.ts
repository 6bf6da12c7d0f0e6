/**
 * The rounds the demo page shows of a device across reloads: each load keeps the device's
 * tasks, and the round it is in, in the browser's localStorage under the device's name with
 * its id, and the next load starts from them. Before, a reloaded page counted its own load's
 * rounds alone ("0 rounds contributed" after a reload, where `fedhh up`'s summary kept every
 * load's). Split from demo.ts, which runs the page when loaded, so that node's tests can load
 * it.
 */

import type { TaskResult } from "../src/loop.js";

/** A task as the page shows it (demo.ts's TaskView). */
export interface KeptTask {
  task: string;
  query: string;
  outcome: TaskResult["outcome"];
  contributed: boolean;
  detail: string;
}

/** The round a device was in, as the page last showed it. */
export interface CurrentRound {
  task: string;
  query: string;
  stage: string;
  /** Whether its masked input was accepted. */
  sent: boolean;
}

/** What a load keeps of one device. */
export interface KeptRounds {
  deviceId: string;
  tasks: KeptTask[];
  current: CurrentRound | null;
}

/** The part of `localStorage` the page uses. */
export type KeptStorage = Pick<Storage, "getItem" | "setItem">;

/** Kept per device at most (the oldest dropped): a run has tens of rounds, not thousands. */
export const KEPT_TASKS = 500;

// (a Record, so that an outcome added to RoundOutcome must be named here)
const OUTCOMES: Record<TaskResult["outcome"], true> = {
  completed: true, dropped: true, not_selected: true, late: true, round_aborted: true,
  device_aborted: true, rejected: true, not_found: true, unavailable: true, timed_out: true };

function isTask(value: unknown): value is KeptTask {
  const t = value as Partial<Record<keyof KeptTask, unknown>> | null;
  return typeof t === "object" && t !== null && typeof t.task === "string" &&
    typeof t.query === "string" && typeof t.outcome === "string" && Object.hasOwn(OUTCOMES, t.outcome) &&
    typeof t.contributed === "boolean" && typeof t.detail === "string";
}

function isCurrent(value: unknown): value is CurrentRound {
  const c = value as Partial<Record<keyof CurrentRound, unknown>> | null;
  return typeof c === "object" && c !== null && typeof c.task === "string" && c.task !== "" &&
    typeof c.query === "string" && typeof c.stage === "string" && typeof c.sent === "boolean";
}

/**
 * The tasks earlier loads kept for device `deviceId` under `key`; none where nothing is kept,
 * it is another device's (its storage was cleared and it enrolled anew) or unreadable. The
 * round a load was in when it went is a task of its own, `dropped` as a device that went
 * mid-round is, and contributed if its masked input was accepted (counted once `fedhh up`
 * says its round was released, as rounds.ts's inTheSum counts).
 */
export function keptTasks(storage: KeptStorage | undefined, key: string, deviceId: string
): KeptTask[] {
  let kept: Partial<Record<keyof KeptRounds, unknown>>;
  try {
    kept = JSON.parse(storage?.getItem(key) ?? "null") ?? {};
  } catch {
    return [];
  }
  if (typeof kept !== "object" || kept.deviceId !== deviceId || !Array.isArray(kept.tasks)) {
    return [];
  }
  const tasks = kept.tasks.filter(isTask);
  if (isCurrent(kept.current)) {
    const c = kept.current;
    tasks.push({ task: c.task, query: c.query, outcome: "dropped", contributed: c.sent,
                 detail: `the page was reloaded or closed in ${c.stage || "it"}` +
                         (c.sent ? ", its masked input sent" : "") });
  }
  return tasks;
}

/** Keeps `rounds` under `key` for the next load; a browser that refuses (full, blocked) keeps
 * nothing, and the next load counts its own rounds alone. */
export function keepTasks(storage: KeptStorage | undefined, key: string, rounds: KeptRounds
): void {
  try {
    storage?.setItem(key, JSON.stringify({ ...rounds, tasks: rounds.tasks.slice(-KEPT_TASKS) }));
  } catch {
    // (QuotaExceededError, SecurityError: the page goes on; the count is this load's)
  }
}

/** The page's localStorage, or none where the browser refuses it (site data blocked). */
export function pageStorage(): KeptStorage | undefined {
  try {
    return (globalThis as { localStorage?: KeptStorage }).localStorage;
  } catch {
    return undefined;
  }
}
