/**
 * A task whose eps_local is above the device's limit is refused in the Python device's words
 * (fleet.py `_perform`: its f-string writes each float as Python's repr), so a page shows what
 * a Python device logs.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { ConfigError } from "../src/config.js";
import { DEFAULT_FLOORS, checkEpsLocal } from "../src/floors.js";

test("an eps_local above the limit is refused with Python's numbers", () => {
  // (the messages of fleet.py for the same eps_local and max_eps_local)
  const cases: [number, number, string][] = [
    [12, 10, "task asks for eps_local 12.0, above this device's limit 10.0"],
    [1e-5, 1e-6, "task asks for eps_local 1e-05, above this device's limit 1e-06"],
    [Number.POSITIVE_INFINITY, 10, "task asks for eps_local inf, above this device's limit 10.0"],
    [1e16, 1e15, "task asks for eps_local 1e+16, above this device's limit 1000000000000000.0"],
  ];
  for (const [eps, limit, message] of cases) {
    assert.throws(() => checkEpsLocal(eps, { ...DEFAULT_FLOORS, maxEpsLocal: limit }),
                  (error: Error) => error instanceof ConfigError && error.message === message,
                  `eps_local ${eps} under ${limit}`);
  }
  checkEpsLocal(10, DEFAULT_FLOORS);
});

test("an eps_local of zero, below zero or NaN is refused as not positive", () => {
  // (Floors.check_eps_local's messages for the same eps_local)
  const cases: [number, string][] = [
    [0, "task asks for eps_local 0.0, not a positive number"],
    [-1, "task asks for eps_local -1.0, not a positive number"],
    [Number.NaN, "task asks for eps_local nan, not a positive number"],
  ];
  for (const [eps, message] of cases) {
    assert.throws(() => checkEpsLocal(eps, DEFAULT_FLOORS),
                  (error: Error) => error instanceof ConfigError && error.message === message,
                  `eps_local ${eps}`);
  }
});
