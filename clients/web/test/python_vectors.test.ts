/** The Python vectors under node:test (the checks themselves are in checks.ts). */

import { test } from "node:test";

import { pythonChecks } from "./checks.js";
import { fileBooks, pythonVectors } from "./vectors.js";

const vectors = pythonVectors();
for (const [name, check] of Object.entries(pythonChecks(vectors, fileBooks))) {
  test(name, () => check(vectors));
}
