/**
 * Assertions that run in Node and in the browser alike (node:assert does not exist in a page),
 * so the vector checks are one module for both.
 */

function canonical(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) => (typeof v === "bigint" ? `${v}n` : v));
}

export function equal(actual: unknown, expected: unknown, what = "value"): void {
  const a = canonical(actual);
  const e = canonical(expected);
  if (a !== e) throw new Error(`${what}: expected ${e.slice(0, 300)}, got ${a.slice(0, 300)}`);
}

export function ok(condition: boolean, what: string): void {
  if (!condition) throw new Error(`not true: ${what}`);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type ErrorClass = new (...args: any[]) => Error;

export function throws(run: () => unknown, kind: ErrorClass, what: string): void {
  try {
    run();
  } catch (error) {
    if (error instanceof kind) return;
    throw new Error(`${what}: expected a ${kind.name}, got ${String(error)}`);
  }
  throw new Error(`${what}: expected a ${kind.name}, nothing was thrown`);
}

export async function rejects(run: Promise<unknown>, pattern: RegExp, what: string): Promise<void> {
  try {
    await run;
  } catch (error) {
    if (pattern.test(String(error))) return;
    throw new Error(`${what}: expected an error matching ${pattern}, got ${String(error)}`);
  }
  throw new Error(`${what}: expected an error matching ${pattern}, nothing was thrown`);
}
