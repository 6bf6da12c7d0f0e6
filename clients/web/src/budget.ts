/**
 * The device's own privacy budget and its memory of what it reported, kept on the device:
 * fedhh_device/budget.py for the web. Whoever signed a task, a device
 *
 * - refuses a report whose local epsilon would take the sum of its reports' local epsilons
 *   over the last `periodS` seconds above `cap`; by basic composition (Dwork and Roth 2014,
 *   Theorem 3.16) k reports are (sum eps_i)-LDP. The sum is exact, of the binary values the
 *   randomizer runs at, and compared with the cap without tolerance (`exceeds`, as Python's
 *   fedhh.device.budget_sums; docs/privacy.md, "Budgets are compared exactly"): ten reports of
 *   0.1 exceed a cap of 1.0, so the tenth is refused (before, a float sum was compared with the
 *   cap times 1 + 1e-9);
 * - answers every attempt of one round of one run with the same report, and refuses an attempt
 *   whose query differs from the first's (`queryDigest`: it would need a fresh report).
 *
 * The record is saved before the report is returned, so a crash (a closed tab) between the two
 * cannot lose a spend. Storage is an interface: `IndexedDbBudgetStore` in a browser,
 * `MemoryBudgetStore` in tests. The state is Python's JSON layout (spends, reports by run).
 *
 * Time (budget.py's "Time"): a spend is dated max(device clock, T) and counted while its date is
 * at or after min(device clock, T) - `periodS`, T being the task's signed last deadline
 * (`deadlineUnixMs`; the device clock alone when it is 0). So a spend is dated no earlier than it
 * happened and "now" is no later than it is if either clock is right. Before, both were the
 * browser's clock alone: a clock 40 days behind, once corrected, freed every spend made
 * meanwhile, and a clock jumping ahead freed them as well. A clock behind or jumping back only
 * counts spends longer.
 *
 * What is kept: spends while counted; a run's last report while its round's spend is, and at
 * most `MAX_REPORTS` of them, the latest spent first (before, every run's last report was kept
 * for ever). A round answered again whose report was dropped is refused while its spend is
 * counted (the coordinator's ledger charges every attempt of a round as one report); once the
 * spend has left the period it gets a fresh report, charged like any other.
 */

import { concat, toHex, u32, utf8 } from "./bytes.js";
import type { Task } from "./gen/fedhh/v1/coordinator_pb.js";
import { sha256 } from "./primitives.js";
import { StorageError, deviceDatabase, idbGet, idbPut } from "./storage.js";

/** The most reports kept, one per run (budget.py's MAX_REPORTS). */
export const MAX_REPORTS = 256;

/** A report the device's own budget or memory refuses (fedhh.errors.PrivacyError). */
export class PrivacyError extends Error {
  override name = "PrivacyError";
}

export interface DeviceSpend {
  run_id: string;
  round: number;
  eps_local: number;
  /** Unix time in seconds. */
  at: number;
}

export interface SavedReport {
  run_id: string;
  round: number;
  digest: string;
  ones: number[];
}

export interface BudgetState {
  spends: DeviceSpend[];
  reports: Record<string, SavedReport>;
}

/** Where a device keeps its budget between page loads. */
export interface BudgetStore {
  load(): Promise<BudgetState | null>;
  save(state: BudgetState): Promise<void>;
}

/** A store in memory (node tests; a page that must not persist anything). */
export class MemoryBudgetStore implements BudgetStore {
  private saved: string | null = null;

  async load(): Promise<BudgetState | null> {
    return this.saved === null ? null : (JSON.parse(this.saved) as BudgetState);
  }

  async save(state: BudgetState): Promise<void> {
    this.saved = JSON.stringify(state);
  }
}

/**
 * A store in the browser's IndexedDB: one record under `key` in object store "budget" of
 * `database` (src/storage.ts: `deviceDatabase(name)` for a named device).
 */
export class IndexedDbBudgetStore implements BudgetStore {
  constructor(private readonly database = deviceDatabase(), private readonly key = "budget") {}

  async load(): Promise<BudgetState | null> {
    return ((await idbGet(this.database, "budget", this.key)) as BudgetState | undefined) ?? null;
  }

  async save(state: BudgetState): Promise<void> {
    await idbPut(this.database, "budget", this.key, state);
  }
}

/** Python's repr of a float (the shortest round-trip digits, Python's layout). */
export function pythonFloatRepr(x: number): string {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const sign = x < 0 ? "-" : "";
  const [mantissa, exponentText] = Math.abs(x).toExponential().split("e") as [string, string];
  const digits = mantissa.replace(".", "");
  const exponent = Number(exponentText);
  if (exponent < -4 || exponent >= 16) {
    const head = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const e = Math.abs(exponent).toString().padStart(2, "0");
    return `${sign}${head}e${exponent < 0 ? "-" : "+"}${e}`;
  }
  if (exponent < 0) return `${sign}0.${"0".repeat(-exponent - 1)}${digits}`;
  const whole = digits.slice(0, exponent + 1).padEnd(exponent + 1, "0");
  const fraction = digits.slice(exponent + 1);
  return `${sign}${whole}.${fraction === "" ? "0" : fraction}`;
}

function u64s(values: readonly bigint[]): Uint8Array {
  const out = new Uint8Array(8 * values.length);
  const view = new DataView(out.buffer);
  values.forEach((v, i) => view.setBigUint64(8 * i, BigInt.asUintN(64, v), false));
  return out;
}

/** What a report depends on besides the device's data (budget.py `query_digest`), hex. */
export async function queryDigest(task: Task): Promise<string> {
  const parts = [
    utf8(task.runId), u32(task.round), u32(task.prefixBits), u32(task.segmentBits),
    u64s(task.prefixes), utf8("|"), u64s(task.denyList), utf8("|"),
    utf8(pythonFloatRepr(task.epsLocal)), utf8(task.codec), u32(task.maxBits),
    utf8(task.selection), new Uint8Array([task.prefixConditioning ? 1 : 0]),
  ];
  return toHex(await sha256(concat(...parts.flatMap((p) => [u32(p.length), p]))));
}

/**
 * Python's `format(x, f".{precision}g")`, so that a refusal reads as the Python device's: the
 * double's exact decimal value rounded half to even, in exponent notation when its exponent is
 * below -4 or at least `precision`, trailing zeros dropped. Before, toPrecision, which rounds a
 * tie up and writes no exponent where Python does: 10.125 read "10.13" (Python: 10.12), a cap
 * of 1e6 "1000000" (1e+06), an eps_local of 1e-5 "0.00001" (1e-05), of Infinity "Infinity".
 */
export function pythonG(x: number, precision: number): string {
  if (Number.isNaN(x)) return "nan";
  const sign = x < 0 || Object.is(x, -0) ? "-" : "";
  if (!Number.isFinite(x)) return `${sign}inf`;
  if (x === 0) return `${sign}0`;
  // |x| = units * 2^-1074 = units * 5^1074 * 10^-1074: its decimal digits, exactly
  const exact = (exactUnits(Math.abs(x)) * 5n ** 1074n).toString();
  let exponent = exact.length - 1 - 1074;
  let head = BigInt(exact.slice(0, precision));
  const rest = exact.slice(precision);
  const half = "5".padEnd(rest.length, "0");
  if (rest > half || (rest === half && head % 2n === 1n)) head += 1n;
  let shown = head.toString();
  if (shown.length > precision) {  // 9.99.. rounded up to 10.0..
    shown = shown.slice(0, precision);
    exponent += 1;
  }
  shown = shown.padEnd(precision, "0");
  const point = (whole: string, fraction: string) => {
    const kept = fraction.replace(/0+$/, "");
    return kept === "" ? whole : `${whole}.${kept}`;
  };
  if (exponent < -4 || exponent >= precision) {
    const e = Math.abs(exponent).toString().padStart(2, "0");
    return `${sign}${point(shown[0]!, shown.slice(1))}e${exponent < 0 ? "-" : "+"}${e}`;
  }
  if (exponent < 0) return `${sign}${point("0", "0".repeat(-exponent - 1) + shown)}`;
  return `${sign}${point(shown.slice(0, exponent + 1), shown.slice(exponent + 1))}`;
}

/**
 * What is wrong with a stored budget, or null (budget.py `_check_record`). Only its shape was
 * checked: a spend whose eps_local was NaN made `spent()` NaN, and the cap, compared with NaN,
 * never refused a report again; a string eps_local was concatenated into the sum.
 */
function corruption(state: BudgetState): string | null {
  if (typeof state !== "object" || state === null || !Array.isArray(state.spends)
      || typeof state.reports !== "object" || state.reports === null
      || Array.isArray(state.reports)) {
    return "not a list of spends and a map of reports";
  }
  const finite = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x);
  for (const [i, s] of (state.spends as unknown[]).entries()) {
    const spend = s as Partial<DeviceSpend> | null;
    if (typeof spend !== "object" || spend === null || typeof spend.run_id !== "string"
        || !Number.isSafeInteger(spend.round) || !finite(spend.eps_local)
        || spend.eps_local < 0 || !finite(spend.at)) {
      return `spend ${i} is not a run id, a round, a finite eps_local >= 0 and a finite time`;
    }
  }
  for (const [key, r] of Object.entries(state.reports as Record<string, unknown>)) {
    const report = r as Partial<SavedReport> | null;
    if (typeof report !== "object" || report === null || typeof report.run_id !== "string"
        || !Number.isSafeInteger(report.round) || typeof report.digest !== "string"
        || !Array.isArray(report.ones) || !report.ones.every((i) => Number.isSafeInteger(i))) {
      return `the report of run ${JSON.stringify(key)} is not a run id, a round, a digest and ` +
        "a list of positions";
    }
  }
  return null;
}

/** `x`, a finite double, in units of 2^-1074 (exact: every finite double is a multiple). */
export function exactUnits(x: number): bigint {
  if (!Number.isFinite(x)) throw new RangeError(`not a finite number: ${x}`);
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const biased = (view.getUint16(0) >> 4) & 0x7ff;
  const fraction = view.getBigUint64(0) & ((1n << 52n) - 1n);
  // a normal double is (2^52 + fraction) * 2^(biased - 1075), a subnormal fraction * 2^-1074
  const magnitude = biased === 0 ? fraction : (fraction | (1n << 52n)) << BigInt(biased - 1);
  return x < 0 ? -magnitude : magnitude;
}

/**
 * Whether the exact sum of `charges` is above `cap` (fedhh.device.budget_sums.exceeds): by basic
 * composition (Dwork and Roth 2014, Theorem 3.16) the charges are within the cap exactly
 * when their sum is at most it, and each double is a dyadic rational, so no tolerance is needed.
 * A charge that is not finite (Infinity, NaN) fits no cap; every finite sum fits an infinite one.
 */
export function exceeds(charges: Iterable<number>, cap: number): boolean {
  const values = [...charges];
  // a charge that is not finite fits no cap, and every finite sum fits an infinite one
  if (!values.every((v) => Number.isFinite(v)) || Number.isNaN(cap)) return true;
  if (cap === Number.POSITIVE_INFINITY) return false;
  return exactSum(values) > exactUnits(cap);
}

/** The exact sum of finite doubles, in units of 2^-1074 (budget_sums.exact_sum). */
function exactSum(values: Iterable<number>): bigint {
  let total = 0n;
  for (const value of values) total += exactUnits(value);
  return total;
}

/** 2^k as a double, exactly, for -1022 <= k <= 1023 (its exponent field alone). */
function powerOfTwo(k: number): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setUint16(0, (k + 1023) << 4);
  return view.getFloat64(0);
}

/**
 * `units` * 2^-1074 rounded to the nearest double, ties to even, Infinity past the largest (as
 * Python's float(Fraction) and math.fsum round an exact sum; fsum raises OverflowError there).
 */
function unitsToDouble(units: bigint): number {
  const magnitude = units < 0n ? -units : units;
  const bits = magnitude.toString(2).length;
  // Number(bigint) rounds to 53 bits, ties to even. Past 64 bits, the bits below the top 64
  // fold into one sticky bit, far below where it rounds, so that it rounds the same; below
  // 2^52 units (subnormals) Number is exact and so is the scaling.
  const shift = Math.max(0, bits - 64);
  const low = magnitude & ((1n << BigInt(shift)) - 1n);
  const head = Number((magnitude >> BigInt(shift)) | (low === 0n ? 0n : 1n));
  const exponent = shift - 1074;
  if (exponent > 1023) return units < 0n ? -Infinity : Infinity;
  // two exact scalings, each factor and the product between them a normal double
  const half = Math.trunc(exponent / 2);
  const value = head * powerOfTwo(half) * powerOfTwo(exponent - half);
  return units < 0n ? -value : value;
}

/**
 * `units` * 2^-1074 as Python's budget_sums._decimal writes it: str() of a Decimal quotient at
 * 34 significant digits cut towards zero ("1.000000000000000055511151231257827",
 * "9007199254740993", "1.000000000000000052504760255204420E+300"), "..." after it where cut.
 */
function decimalOfUnits(units: bigint): string {
  if (units === 0n) return "0";
  const sign = units < 0n ? "-" : "";
  // the exact decimal: |units| * 5^1074 * 10^-1074; an exact quotient takes the ideal
  // exponent 0 where it can (trailing zeros dropped only after the point)
  let digits = ((units < 0n ? -units : units) * 5n ** 1074n).toString();
  let exponent = -1074;
  const zeros = digits.length - digits.replace(/0+$/, "").length;
  const dropped = Math.min(zeros, -exponent);
  digits = digits.slice(0, digits.length - dropped);
  exponent += dropped;
  let cut = false;
  if (digits.length > 34) {
    cut = !/^0*$/.test(digits.slice(34));
    exponent += digits.length - 34;
    digits = digits.slice(0, 34);
  }
  // Decimal.__str__: positional while the exponent is at most 0 and the first digit's place
  // is above 10^-7, else one digit before the point and "E" with a signed exponent
  const left = exponent + digits.length;
  const point = exponent <= 0 && left > -6 ? left : 1;
  let text: string;
  if (point <= 0) text = `0.${"0".repeat(-point)}${digits}`;
  else if (point >= digits.length) text = digits + "0".repeat(point - digits.length);
  else text = `${digits.slice(0, point)}.${digits.slice(point)}`;
  if (left !== point) text += `E${left - point < 0 ? "-" : "+"}${Math.abs(left - point)}`;
  return sign + text + (cut ? "..." : "");
}

/** Whether finite `x` is exactly the decimal its Python repr writes (0.5 is, 0.1 is not). */
function reprIsExact(x: number): boolean {
  const [mantissa, exponentText] = pythonFloatRepr(Math.abs(x)).split("e") as [string, string?];
  const [whole, fraction = ""] = mantissa.split(".") as [string, string?];
  const scale = Number(exponentText ?? "0") - fraction.length;
  // repr = digits * 10^scale, the double = units * 2^-1074
  const digits = BigInt(whole + fraction) << 1074n;
  const units = exactUnits(Math.abs(x));
  return scale >= 0 ? digits * 10n ** BigInt(scale) === units
    : digits === units * 10n ** BigInt(-scale);
}

/**
 * Why finite `charges` exceed `cap` (`exceeds`), in figures, word for word as Python's
 * fedhh.device.budget_sums.exceeds_in_words: their exact sum and its excess over the cap, and,
 * where their float sum is within the cap, a charge's binary value.
 */
function exceedsInWords(charges: readonly number[], cap: number): string {
  const total = exactSum(charges);
  let words = `their exact sum, ${decimalOfUnits(total)}, is above the cap ` +
    `${pythonFloatRepr(cap)} by ${pythonG(unitsToDouble(total - exactUnits(cap)), 4)}`;
  const inexact = charges.find((v) => !reprIsExact(v));
  if (inexact !== undefined && unitsToDouble(total) <= cap) {
    words += ` (a charge is the binary value of its double: ${pythonFloatRepr(inexact)} is ` +
      `${decimalOfUnits(exactUnits(inexact))})`;
  }
  return words;
}

/**
 * Why `charges`, which exceed `cap`, do (budget.py `_why_above`): where their float sum (math.fsum,
 * correctly rounded) is within the cap, as ten of 0.1 under 1.0 are, in figures
 * (`exceedsInWords`); before, only "their exact sum is above the cap" beside "0.9 of 1 used".
 */
function whyAbove(charges: readonly number[], cap: number): string {
  const within = charges.every((v) => Number.isFinite(v))
    && unitsToDouble(exactSum(charges)) <= cap;
  return within ? exceedsInWords(charges, cap) : "their exact sum is above the cap";
}

/** Python's sum() of floats in 3.11: left to right from 0. */
function sum(values: Iterable<number>): number {
  let total = 0;
  for (const v of values) total += v;
  return total;
}

/**
 * `state` without the spends dated before `since`, the reports whose round's spend went with
 * them, and all but the `MAX_REPORTS` latest spent (budget.py `_prune`).
 */
function pruned(state: BudgetState, since: number): BudgetState {
  const spends = state.spends.filter((s) => s.at >= since);
  const latest = new Map<string, number>();
  spends.forEach((s, i) => latest.set(JSON.stringify([s.run_id, s.round]), i));
  const ranked: [number, string][] = [];
  for (const [key, r] of Object.entries(state.reports)) {
    const i = latest.get(JSON.stringify([r.run_id, r.round]));
    if (i !== undefined) ranked.push([i, key]);
  }
  ranked.sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  const reports: Record<string, SavedReport> = {};
  for (const [, key] of ranked.slice(-MAX_REPORTS)) reports[key] = state.reports[key]!;
  return { spends, reports };
}

/** One device's spends and its latest report per run (module docstring). */
export class DeviceBudget {
  private tail: Promise<unknown> = Promise.resolve();

  private constructor(readonly cap: number, readonly periodS: number,
                      private readonly store: BudgetStore, private state: BudgetState,
                      private readonly clock: () => number) {}

  /** The budget kept in `store`; `clock` gives Unix seconds (tests pass their own). */
  static async open(store: BudgetStore, cap: number, periodS: number,
                    clock: () => number = () => Date.now() / 1000): Promise<DeviceBudget> {
    if (!(cap > 0) || !(periodS > 0)) {
      throw new RangeError(`a device budget needs cap > 0 and a positive period, got ${cap} and ${periodS}`);
    }
    const state = (await store.load()) ?? { spends: [], reports: {} };
    const wrong = corruption(state);
    if (wrong !== null) throw new RangeError(`the stored budget is corrupt: ${wrong}`);
    return new DeviceBudget(cap, periodS, store, state, clock);
  }

  /** Local epsilon counted at `now` (the device clock if not given): every spend dated at or
   * after `now - periodS`, those dated after `now` included. */
  spent(now: number = this.clock()): number {
    const since = now - this.periodS;
    return sum(this.state.spends.filter((s) => s.at >= since).map((s) => s.eps_local));
  }

  /** [now, date of a spend] for `task`: min and max of the device clock and the task's signed
   * last deadline (module docstring, "Time"); the clock alone without one. */
  private times(task: Task): [number, number] {
    const clock = this.clock();
    if (task.deadlineUnixMs <= 0n) return [clock, clock];
    const signed = Number(task.deadlineUnixMs) / 1000;
    return [Math.min(clock, signed), Math.max(clock, signed)];
  }

  /**
   * The report for `task`: the one this round already produced, or a new one (`compute()`),
   * recorded with its spend and saved before it is returned. Calls run one at a time.
   */
  report(task: Task, compute: () => number[] | Promise<number[]>): Promise<number[]> {
    const run = this.tail.then(() => this.reportNow(task, compute));
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async reportNow(task: Task, compute: () => number[] | Promise<number[]>): Promise<number[]> {
    const digest = await queryDigest(task);
    const previous = this.state.reports[task.runId];
    if (previous !== undefined && previous.round === task.round) {
      if (previous.digest !== digest) {
        throw new PrivacyError(`round ${task.round} of run ${task.runId} came back with another ` +
                               "query; answering would need a fresh report");
      }
      return [...previous.ones];
    }
    if (!(task.epsLocal > 0)) throw new RangeError(`the task's eps_local must be > 0, got ${task.epsLocal}`);
    const [now] = this.times(task);
    if (this.state.spends.some((s) => s.run_id === task.runId && s.round === task.round
                                      && s.at >= now - this.periodS)) {
      // (the coordinator's ledger charges a retried round as one report, docs/privacy.md
      // "Retries": a fresh one would break that while the first is still counted)
      throw new PrivacyError(`round ${task.round} of run ${task.runId} was answered and its ` +
                             "report is no longer kept; answering again would need a fresh report");
    }
    const since = now - this.periodS;
    const charges = this.state.spends.filter((s) => s.at >= since).map((s) => s.eps_local);
    charges.push(task.epsLocal);
    if (exceeds(charges, this.cap)) {
      // (as budget.py words it, sums to 4 significant digits: the page showed float sums such
      // as "95.99490000000001 of 100"; the cap as Python's repr, the form the exact
      // comparison's words give it: before, "0.9 of 1 used" and "above the cap 1.0" in one)
      throw new PrivacyError(`this device's budget is spent: ${pythonG(this.spent(now), 4)} of ` +
                             `${pythonFloatRepr(this.cap)} used in the period, the task asks for ` +
                             `${pythonG(task.epsLocal, 4)}, and ${whyAbove(charges, this.cap)}`);
    }
    const ones = [...(await compute())];
    const [current, at] = this.times(task);
    const next = pruned({
      spends: [...this.state.spends,
               { run_id: task.runId, round: task.round, eps_local: task.epsLocal, at }],
      reports: { ...this.state.reports, [task.runId]:
        { run_id: task.runId, round: task.round, digest, ones } },
    }, current - this.periodS);
    try {
      await this.store.save(next);
    } catch (error) {
      // (the round ended device_aborted with the store's bare words, "QuotaExceededError: ...",
      // and nothing said whether the report had gone or the budget been spent)
      throw new StorageError("the device's budget", "the report is not sent and nothing is " +
                             "spent; the device takes the next round once the budget can be saved",
                             error);
    }
    this.state = next;
    return [...ones];
  }
}
