/** Loading the vector files (vectors/python.json, written by vectors/make_vectors.py). */

import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

// dist/test/ -> the package root
export const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export function pythonVectors(): Json {
  return JSON.parse(readFileSync(join(PACKAGE_ROOT, "vectors", "python.json"), "utf8"));
}

/** The trained built-in codebooks, read from the Python package (fedhh/codec/books). */
export const fileBooks = (name: string): Promise<string> =>
  readFile(join(PACKAGE_ROOT, "..", "..", "fedhh", "codec", "books", `${name}.json`), "utf8");
