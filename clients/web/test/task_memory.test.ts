/**
 * A web device remembers the last tasks it took, not every one (fleet.py's TakenTasks): `done`
 * kept every (run, round, attempt) for as long as the page ran.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { REMEMBERED_TASKS, newTaskMemory, rememberTask } from "../src/loop.js";

test("the last tasks are remembered and the oldest forgotten", () => {
  const memory = newTaskMemory();
  const keys = Array.from({ length: 10 * REMEMBERED_TASKS }, (_, i) => `run-${i % 3}/${i}/1`);
  for (const key of keys) {
    rememberTask(memory, key);
    assert.ok(memory.done.has(key));
  }
  assert.equal(memory.done.size, REMEMBERED_TASKS);
  assert.ok(keys.slice(-REMEMBERED_TASKS).every((key) => memory.done.has(key)));
  assert.ok(!keys.slice(0, -REMEMBERED_TASKS).some((key) => memory.done.has(key)));
});

test("a task taken again is not counted twice", () => {
  const memory = newTaskMemory();
  rememberTask(memory, "r/1/1");
  rememberTask(memory, "r/1/1");
  assert.equal(memory.done.size, 1);
});
