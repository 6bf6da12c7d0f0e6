/**
 * The demo page's rounds across reloads (demo/kept.ts): a load keeps a device's tasks, and the
 * round it is in, under the device's name and id; the next load shows and counts them with its
 * own. Before, a reloaded page counted its own load's rounds alone.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { KEPT_TASKS, type KeptTask, keepTasks, keptTasks } from "../demo/kept.js";
import { roundsContributed } from "../demo/rounds.js";

function memoryStorage() {
  const items = new Map<string, string>();
  return {
    items,
    getItem: (key: string) => items.get(key) ?? null,
    setItem: (key: string, value: string) => { items.set(key, value); },
  };
}

const done = (round: number): KeptTask => ({
  task: `demo round ${round}.1`, query: "q", outcome: "completed", contributed: true,
  detail: "" });

test("a reloaded page counts the rounds its earlier loads showed", () => {
  const storage = memoryStorage();
  const key = "fedhh-demo-rounds/s/0";
  // The first load: round 1 completed, round 2's masked input sent when it was reloaded.
  keepTasks(storage, key, { deviceId: "41", tasks: [done(1)],
                            current: { task: "demo round 2.1", query: "q", stage: "unmask",
                                       sent: true } });
  const earlier = keptTasks(storage, key, "41");
  assert.deepEqual(earlier, [done(1), {
    task: "demo round 2.1", query: "q", outcome: "dropped", contributed: true,
    detail: "the page was reloaded or closed in unmask, its masked input sent" }]);
  // Round 2 released with its input: counted once, though the second load was handed its
  // task again (and refused it).
  const second: KeptTask = { task: "demo round 2.1", query: "q", outcome: "device_aborted",
                             contributed: false, detail: "budget" };
  const all = [...earlier, second, done(3)];
  assert.equal(roundsContributed(all, new Set(["demo round 2.1"])), 3);
  assert.equal(roundsContributed(all), 2);
  assert.equal(roundsContributed([...all, done(3)]), 2);

  // The second load keeps them all, and the third starts from them.
  keepTasks(storage, key, { deviceId: "41", tasks: all, current: null });
  assert.deepEqual(keptTasks(storage, key, "41"), all);
});

test("another device's, unreadable or missing rounds are none", () => {
  const storage = memoryStorage();
  const key = "fedhh-demo-rounds/s/0";
  assert.deepEqual(keptTasks(storage, key, "41"), []);
  assert.deepEqual(keptTasks(undefined, key, "41"), []);
  keepTasks(storage, key, { deviceId: "41", tasks: [done(1)], current: null });
  // Its storage cleared, the device enrolled anew (another id): not its rounds.
  assert.deepEqual(keptTasks(storage, key, "42"), []);
  for (const text of ["{", "[]", "7", "null", '{"deviceId": "41", "tasks": 3}']) {
    storage.items.set(key, text);
    assert.deepEqual(keptTasks(storage, key, "41"), [], text);
  }
  // A task not as the page keeps it is left out, the others kept.
  storage.items.set(key, JSON.stringify({ deviceId: "41", current: { task: "" },
                                          tasks: [done(1), { ...done(2), outcome: "won" }, 5] }));
  assert.deepEqual(keptTasks(storage, key, "41"), [done(1)]);
});

test("what is kept is bounded, and a storage that refuses is no error", () => {
  const storage = memoryStorage();
  const tasks = Array.from({ length: KEPT_TASKS + 20 }, (_, i) => done(i));
  keepTasks(storage, "k", { deviceId: "1", tasks, current: null });
  assert.deepEqual(keptTasks(storage, "k", "1"), tasks.slice(-KEPT_TASKS));
  keepTasks({ getItem: () => null, setItem: () => { throw new Error("QuotaExceededError"); } },
            "k", { deviceId: "1", tasks, current: null });
});
