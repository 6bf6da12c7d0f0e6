/**
 * test/numpy_stream.ts against numpy: the values below are
 * `NumpySource(fedhh.device.streams.device_stream(seed, round, user))`'s `below([h])`,
 * `uint32(5)`, `below([3])`, `uint32(2)` in that order (numpy 2, PCG64), covering the 32-bit
 * Lemire path, h = 1 (no draw), a 41-bit seed and a bound above 2^32 (the 64-bit path), and
 * the high half of a 64-bit output kept for the next 32-bit draw. The whole stream is checked
 * again by tests/web/test_web_discovery.py, where the run must equal the simulation.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { deviceStream } from "./numpy_stream.js";

const CASES: Array<[number, number, number, number, unknown]> = [
  [11, 0, 3, 2, [1, [2625272575, 2007788839, 1553577282, 962271199, 1492450810], 2,
                 [1605394710, 2484841002]]],
  [11, 1, 199, 1, [0, [1209277608, 3546869188, 2513547989, 3256338750, 4104077408], 0,
                   [2650807488, 2161781579]]],
  [0, 0, 0, 5, [0, [582807843, 2155011089, 775084272, 2672713707, 2537070381], 2,
                [997243076, 1561372412]]],
  [2 ** 40, 7, 123456, 1000003, [410562, [3365369025, 3401003415, 2272601636, 3844398885,
                                          1227650971], 2, [3457814073, 1737947374]]],
  [11, 2, 50, 2 ** 40, [178065767695, [2473662713, 2000619830, 2224906762, 2264844377,
                                       3722801328], 2, [4034753712, 398925736]]],
];

test("device_stream replays numpy's SeedSequence, PCG64 and Generator.integers", () => {
  for (const [seed, round, user, high, expected] of CASES) {
    const draws = deviceStream(seed, round, user);
    const got = [draws.below(high), Array.from(draws.uint32(5)), draws.below(3),
                 Array.from(draws.uint32(2))];
    assert.deepEqual(got, expected, `seed ${seed}, round ${round}, user ${user}`);
  }
  assert.throws(() => deviceStream(11, 0, 0).below(0), RangeError);
});
