/**
 * Item selection and the one-hot index: which of its items a device reports in a round, and
 * where that item's one goes in the round's vector, as fedhh/device/selection.py and
 * fedhh_device/report.py (`query_of`, `make_report`) compute them for one device.
 *
 * - The task's query: the prefix list (ascending `prefix_bits`-bit values), the deny list
 *   (ascending item codes), `segment_bits`; values of more than 64 bits travel as several
 *   64-bit words, most significant first (fedhh.codec.codes.to_wire).
 * - Eligible: an item not on the deny list whose first `prefix_bits` bits are on the prefix
 *   list. `weighted` draws an entry with probability proportional to its count, `uniform`
 *   uniformly over entries. With `prefix_conditioning` the draw is among the eligible entries;
 *   without it among the entries not denied, and an entry off the list reports nothing.
 * - The draw: one uniform integer below the total weight (`DrawSource.below`), mapped to the
 *   entry whose cumulative-weight interval holds it, as Python maps it. A device with nothing
 *   eligible draws nothing.
 * - The index: prefix index * 2^segment_bits + the segment (the `segment_bits` bits after the
 *   prefix); the report is then the randomizer's (`randomize`), drawing its words after the
 *   selection's draw from the same source.
 *
 * Randomness is passed in: a deployed device uses `systemDraws` (crypto.getRandomValues); the
 * vectors replay Python's recorded draws.
 */

import type { Task } from "./gen/fedhh/v1/coordinator_pb.js";
import { type Codec, CodecError, MAX_SUPPORTED_BITS } from "./codec.js";
import { OLDER_THAN_COORDINATOR, parseRoundConfig } from "./config.js";
import { type WordSource, systemWords } from "./random.js";
import { randomize } from "./randomizer.js";

export type SelectionRule = "uniform" | "weighted";

/** What a device draws from: uniform integers below a bound, and 32-bit words. */
export interface DrawSource extends WordSource {
  /** A uniform integer in [0, high), high a positive safe integer. */
  below(high: number): number;
}

/** The round's query as a task carries it (Python's RoundQuery, without prefix weights). */
export interface RoundQuery {
  round: number;
  prefixBits: number;
  prefixes: bigint[];
  segmentBits: number;
  deny: bigint[];
  maxBits: number;
}

const WORD_BITS = 64;

function wordsFor(bits: number): number {
  return Math.max(1, Math.ceil(bits / WORD_BITS));
}

/** Values of `bits` bits from their wire words (fedhh.codec.codes.from_wire). */
export function fromWire(words: readonly bigint[], bits: number, what: string): bigint[] {
  const width = wordsFor(bits);
  if (words.length % width !== 0) {
    throw new CodecError(`${what} holds ${words.length} words, not a multiple of the ${width} ` +
                         `words of a ${bits}-bit value`);
  }
  const top = BigInt(bits - WORD_BITS * (width - 1));
  const out: bigint[] = [];
  for (let i = 0; i < words.length; i += width) {
    if (top < 64n && words[i]! >> top !== 0n) throw new CodecError(`${what} holds a value wider than ${bits} bits`);
    let value = 0n;
    for (let j = 0; j < width; j++) value = (value << 64n) | BigInt.asUintN(64, words[i + j]!);
    out.push(value);
  }
  return out;
}

function strictlyAscending(values: readonly bigint[]): boolean {
  return values.every((v, i) => i === 0 || values[i - 1]! < v);
}

/** The query a task carries, validated as Python's `query_of` validates it. */
export function queryOfTask(task: Task): RoundQuery {
  if (!(task.maxBits >= 1 && task.maxBits <= MAX_SUPPORTED_BITS)) {
    throw new CodecError(`task max_bits ${task.maxBits} is outside [1, ${MAX_SUPPORTED_BITS}]` +
                         (task.maxBits > MAX_SUPPORTED_BITS ? `: ${OLDER_THAN_COORDINATOR}` : ""));
  }
  if (task.prefixBits + task.segmentBits > task.maxBits || task.segmentBits < 1) {
    throw new CodecError(`task has prefix_bits ${task.prefixBits} + segment_bits ` +
                         `${task.segmentBits} outside [1, max_bits ${task.maxBits}]`);
  }
  const prefixes = fromWire(task.prefixes, task.prefixBits, "task prefix list");
  const deny = fromWire(task.denyList, task.maxBits, "task deny list");
  if (prefixes.length === 0 || !strictlyAscending(prefixes) || !strictlyAscending(deny)) {
    throw new CodecError("task prefix or deny list is empty or not strictly ascending");
  }
  return { round: task.round, prefixBits: task.prefixBits, prefixes, segmentBits: task.segmentBits,
           deny, maxBits: task.maxBits };
}

/** The number of entries of the round's vector: prefixes * 2^segment_bits. */
export function domainSize(query: RoundQuery): number {
  return query.prefixes.length * 2 ** query.segmentBits;
}

function search(sorted: readonly bigint[], value: bigint): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]! < value) lo = mid + 1;
    else hi = mid;
  }
  return lo < sorted.length && sorted[lo] === value ? lo : -1;
}

/** The index of the code's prefix on the list, or -1 when it is off the list or denied. */
export function prefixIndex(code: bigint, query: RoundQuery): number {
  if (search(query.deny, code) >= 0) return -1;
  if (query.prefixBits === 0) return 0;
  return search(query.prefixes, code >> BigInt(query.maxBits - query.prefixBits));
}

/** The code's element of the round's domain, given its prefix index (>= 0). */
export function domainIndex(code: bigint, index: number, query: RoundQuery): number {
  const shift = BigInt(query.maxBits - query.prefixBits - query.segmentBits);
  const segment = Number((code >> shift) & ((1n << BigInt(query.segmentBits)) - 1n));
  const element = index * 2 ** query.segmentBits + segment;
  if (!Number.isSafeInteger(element)) throw new CodecError(`domain element ${element} is too large`);
  return element;
}

/** The entry drawn among `allowed` entries by `rule` (Python's `_sample`), or null. */
function sample(counts: readonly number[], allowed: readonly boolean[], rule: SelectionRule,
                draws: DrawSource): number | null {
  const cum = [0];
  for (let i = 0; i < counts.length; i++) {
    cum.push(cum[i]! + (allowed[i] ? (rule === "weighted" ? counts[i]! : 1) : 0));
  }
  const total = cum[counts.length]!;
  if (total <= 0) return null;
  if (!Number.isSafeInteger(total)) throw new CodecError(`the counts' total ${total} is too large`);
  const target = draws.below(total);
  if (!(Number.isInteger(target) && target >= 0 && target < total)) {
    throw new RangeError(`a draw below ${total} gave ${target}`);
  }
  // The entry i with cum[i] <= target < cum[i + 1] (the last such i: searchsorted right - 1).
  let lo = 0;
  let hi = cum.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cum[mid]! <= target) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/** The selection of one round's item: the entry chosen (or null) and its domain element. */
export interface Selected {
  entry: number | null;
  index: number | null;
}

/**
 * Select one of the device's entries (codes with counts) for the query and its domain element
 * (select_block over one user, then RoundQuery.domain_index); null when nothing is reported.
 */
export function selectEntry(codes: readonly bigint[], counts: readonly number[], query: RoundQuery,
                            rule: SelectionRule, prefixConditioning: boolean,
                            draws: DrawSource): Selected {
  if (codes.length !== counts.length) {
    throw new CodecError(`${codes.length} codes with ${counts.length} counts`);
  }
  if (rule !== "uniform" && rule !== "weighted") {
    throw new CodecError(`selection must be one of uniform, weighted, got ${JSON.stringify(rule)}` +
                         `: ${OLDER_THAN_COORDINATOR}`);
  }
  for (const c of counts) {
    if (!(Number.isSafeInteger(c) && c >= 0)) throw new CodecError(`counts must be integers >= 0, got ${c}`);
  }
  const index = codes.map((code) => prefixIndex(code, query));
  const onList = index.map((i) => i >= 0);
  let entry: number | null;
  if (prefixConditioning) {
    entry = sample(counts, onList, rule, draws);
  } else {
    const allowed = codes.map((code) => search(query.deny, code) < 0);
    entry = sample(counts, allowed, rule, draws);
    if (entry !== null && !onList[entry]) entry = null;
  }
  if (entry === null) return { entry: null, index: null };
  return { entry, index: domainIndex(codes[entry]!, index[entry]!, query) };
}

/**
 * The device's randomized report for a verified task (fedhh_device.report.make_report): its
 * items encoded by the task's codec (pass `Codec.fromSpec(task.codec, task.maxBits, load)`),
 * one selected, its one-hot index randomized at `task.epsLocal`. Returns the positions of the
 * report's ones, ascending.
 */
export function makeReport(items: readonly string[], counts: readonly number[], task: Task,
                           codec: Codec, draws: DrawSource = systemDraws): number[] {
  const query = queryOfTask(task);
  if (codec.maxBits !== task.maxBits) {
    throw new CodecError(`the codec has max_bits ${codec.maxBits}, the task ${task.maxBits}`);
  }
  const dimension = parseRoundConfig(task.roundConfig).dimension;
  if (dimension !== domainSize(query)) {
    throw new CodecError(`the round's vectors have ${dimension} entries but the task's domain ` +
                         `has ${domainSize(query)}`);
  }
  const codes = items.map((item) => codec.encode(item));
  const { index } = selectEntry(codes, counts, query, task.selection as SelectionRule,
                                task.prefixConditioning, draws);
  return randomize(task.epsLocal, index, dimension, draws);
}

const TWO_32 = 2 ** 32;

/** A uniform integer in [0, high) from 32-bit words, by rejection (no modulo bias). */
export function belowFromWords(high: number, words: WordSource): number {
  if (!(Number.isSafeInteger(high) && high >= 1)) throw new RangeError(`cannot draw below ${high}`);
  if (high <= TWO_32) {
    const limit = TWO_32 - (TWO_32 % high);
    for (;;) {
      const x = words.uint32(1)[0]!;
      if (x < limit) return x % high;
    }
  }
  const range = BigInt(high);
  const span = 1n << 64n;
  const limit = span - (span % range);
  for (;;) {
    const w = words.uint32(2);
    const x = (BigInt(w[0]!) << 32n) | BigInt(w[1]!);
    if (x < limit) return Number(x % range);
  }
}

/** The production draw source: crypto.getRandomValues for draws and words. */
export const systemDraws: DrawSource = {
  uint32: (size: number) => systemWords.uint32(size),
  below: (high: number) => belowFromWords(high, systemWords),
};
