/**
 * Item codecs: an item (any Unicode string) to its code of `maxBits` bits, exactly as
 * fedhh/codec/codebook.py and fedhh/codec/codec.py compute it for a task (`task.codec`,
 * `task.max_bits`).
 *
 * A codebook is a prefix-free code over the item's UTF-8 bytes: a byte with a codeword is that
 * codeword, a byte without one is the escape codeword and the byte's 8 bits, and the end symbol
 * follows the last byte. A book with raw continuations ("unicode") writes each continuation
 * byte of a multi-byte character as its six payload bits. A token codebook (version 2) also has
 * codewords for multi-byte tokens; an item is then written canonically: its shortest writing,
 * and among the shortest the one whose first symbol covers the most bytes, then the same for
 * the rest (`Codebook.symbols_of`). The code is those bits left-aligned in `maxBits` bits and
 * zero padded, or the first `maxBits` bits when longer (the item is then truncated).
 *
 * `task.codec` names a built-in codebook or carries a codebook's JSON. "bytes", "huffman" and
 * "5bit" are built here from their definitions (codebook.py); "unicode", "general", "tokens",
 * "english" and "german" are trained tables shipped as fedhh/codec/books/<name>.json, which the
 * page loads (`BookLoader`, e.g. `fetchBooks(url)` from the operator's server). `codebookKey`
 * is Python's `Codebook.key` (name and a digest of the canonical JSON), so a device can check
 * that a served book is the one the coordinator uses.
 */

import { type Bytes, fromHex, toHex, utf8 } from "./bytes.js";
import { OLDER_THAN_COORDINATOR } from "./config.js";
import { sha256 } from "./primitives.js";

export const FORMAT = "fedhh-codebook";
export const VERSION = 1;
export const TOKENS_VERSION = 2;
export const MAX_CODEWORD_BITS = 48;
export const MAX_TOKEN_BYTES = 64;
export const MAX_SUPPORTED_BITS = 4096;
export const DEFAULT_CODEBOOK = "unicode";
export const BUILTIN_NAMES = ["unicode", "general", "tokens", "english", "german", "bytes", "huffman",
                              "5bit"] as const;
export const TRAINED_BOOKS = ["unicode", "general", "tokens", "english", "german"] as const;
/** 10xxxxxx: with raw continuations each is written as its low six bits (codebook.py). */
const CONTINUATION_FIRST = 0x80;
const CONTINUATION_END = 0xc0;

/** A codebook or an item Python would refuse (fedhh.errors.ConfigError). */
export class CodecError extends Error {
  override name = "CodecError";
}

export interface Codebook {
  readonly name: string;
  readonly description: string;
  readonly end: string;
  readonly escape: string | null;
  /** byte value -> codeword, ascending by byte. */
  readonly bytes: ReadonlyMap<number, string>;
  /** token (hex of its UTF-8 bytes) -> codeword; empty for a byte codebook. */
  readonly tokens: ReadonlyMap<string, string>;
  /** Continuation bytes written as their six payload bits, with no codewords of their own. */
  readonly rawContinuations: boolean;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const CODEWORD = /^[01]{1,48}$/;
const HEX_KEY = /^0x[0-9a-f]{2}$/;
const KNOWN_KEYS = new Set(["format", "version", "name", "description", "end", "escape", "bytes",
                            "tokens", "raw_continuations"]);

/**
 * The UTF-16 offset of the string's first lone surrogate (Python cannot encode one to UTF-8), or
 * -1 if it has none.
 */
export function loneSurrogate(text: string): number {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return i;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return i;
    }
  }
  return -1;
}

/**
 * The UTF-8 bytes of an item; a lone surrogate is refused, as Python's encode refuses it. The
 * error does not quote the item: a device's items are private, and a refusal's text travels
 * (a round's outcome, a page's log).
 */
export function itemBytes(item: string): Bytes {
  if (typeof item !== "string") throw new CodecError(`an item is a string, got ${typeof item}`);
  const at = loneSurrogate(item);
  if (at >= 0) {
    throw new CodecError(`an item of ${item.length} UTF-16 units is not valid Unicode: a lone ` +
                         `surrogate at offset ${at} (a string cut inside a character?)`);
  }
  return utf8(item);
}

function byteKey(value: number): string {
  return value >= 0x20 && value < 0x7f ? String.fromCharCode(value)
    : `0x${value.toString(16).padStart(2, "0")}`;
}

function parseByteKey(key: string, where: string): number {
  if (key.length === 1 && key.charCodeAt(0) >= 0x20 && key.charCodeAt(0) < 0x7f) return key.charCodeAt(0);
  if (HEX_KEY.test(key)) return parseInt(key.slice(2), 16);
  throw new CodecError(`${where}: byte key ${JSON.stringify(key)} is neither a printable ASCII ` +
                       "character nor 0xNN (two lower-case hex digits)");
}

/** Code point order (Python's str order), not UTF-16 code unit order. */
function compareCodePoints(a: string, b: string): number {
  for (let i = 0, j = 0; i < a.length && j < b.length;) {
    const x = a.codePointAt(i)!;
    const y = b.codePointAt(j)!;
    if (x !== y) return x - y;
    i += x > 0xffff ? 2 : 1;
    j += y > 0xffff ? 2 : 1;
  }
  // Equal up to the shorter one: the shorter sorts first (a prefix has fewer code units).
  return a.length - b.length;
}

function compareBytes(a: Bytes, b: Bytes): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) return a[i]! - b[i]!;
  }
  return a.length - b.length;
}

/** A codebook from its parts, validated as Codebook.__post_init__ (_validate) does. */
export function makeCodebook(name: string, end: string, escape: string | null,
                             bytes: Iterable<[number, string]>, description = "",
                             tokens: Iterable<[Bytes, string]> = [],
                             rawContinuations = false): Codebook {
  const byteMap = new Map([...bytes].sort((a, b) => a[0] - b[0]));
  const tokenList = [...tokens].sort((a, b) => compareBytes(a[0], b[0]));
  if (!NAME.test(name)) {
    throw new CodecError(`codebook name ${JSON.stringify(name)} must be 1-64 letters, digits, ` +
                         "'_', '.' or '-', starting with a letter or digit");
  }
  // (label, codeword); labels are made only for an error message.
  const labelled: Array<[() => string, unknown]> = [[() => "end", end]];
  if (escape !== null) labelled.push([() => "escape", escape]);
  for (const [value, code] of byteMap) {
    if (!(Number.isInteger(value) && value >= 0 && value <= 255)) {
      throw new CodecError(`codebook byte ${value} is not in 0..255`);
    }
    labelled.push([() => `byte ${byteKey(value)}`, code]);
  }
  const tokenMap = new Map<string, string>();
  const strict = new TextDecoder("utf-8", { fatal: true });
  for (const [token, code] of tokenList) {
    if (token.length < 2 || token.length > MAX_TOKEN_BYTES) {
      throw new CodecError(`codebook token ${toHex(token)} must be 2 to ${MAX_TOKEN_BYTES} bytes`);
    }
    let text: string;
    try {
      text = strict.decode(token);
    } catch {
      throw new CodecError(`codebook token ${toHex(token)} is not whole UTF-8 characters`);
    }
    labelled.push([() => `token ${JSON.stringify(text)}`, code]);
    tokenMap.set(toHex(token), code);
  }
  for (const [label, code] of labelled) {
    if (typeof code !== "string" || !CODEWORD.test(code)) {
      throw new CodecError(`codeword of ${label()} must be 1 to ${MAX_CODEWORD_BITS} characters 0 ` +
                           `or 1, got ${JSON.stringify(code)}`);
    }
  }
  // Prefix-free: after sorting, a codeword that prefixes another sorts right before one of
  // the codewords it prefixes (codewords are ASCII, so string order is Python's order).
  const ordered = labelled.map(([l, c]) => [l, c as string] as const)
    .sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  for (let i = 1; i < ordered.length; i++) {
    const [la, a] = ordered[i - 1]!;
    const [lb, b] = ordered[i]!;
    if (b.startsWith(a)) {
      throw new CodecError(`codewords are not prefix-free: ${la()} (${a}) is a prefix of ${lb()} (${b})`);
    }
  }
  let coded = 256;
  if (rawContinuations) {
    const given = [...byteMap.keys()].filter((b) => b >= CONTINUATION_FIRST && b < CONTINUATION_END)
      .map(byteKey).sort();
    if (given.length > 0) {
      throw new CodecError(`codebook ${JSON.stringify(name)} writes continuation bytes raw and ` +
                           `also gives codewords to ${given.slice(0, 4).join(", ")}`);
    }
    coded -= CONTINUATION_END - CONTINUATION_FIRST;
  }
  if (escape === null && byteMap.size < coded) {
    throw new CodecError(`codebook ${JSON.stringify(name)} has codewords for ${byteMap.size} of ` +
                         `${coded} bytes and no escape, so some strings cannot be encoded`);
  }
  if (escape !== null && byteMap.size === coded) {
    throw new CodecError(`codebook ${JSON.stringify(name)} has a codeword for every byte and an ` +
                         "escape that could never be used validly");
  }
  return { name, description, end, escape, bytes: byteMap, tokens: tokenMap, rawContinuations };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A codebook from its parsed JSON (Codebook.from_dict): every check, the same refusals. */
export function codebookFromDict(data: unknown, where = "codebook"): Codebook {
  if (!isObject(data)) throw new CodecError(`${where}: a codebook is a JSON object`);
  const unknown = Object.keys(data).filter((k) => !KNOWN_KEYS.has(k)).sort();
  if (unknown.length > 0) throw new CodecError(`${where}: unknown codebook keys ${unknown.join(", ")}`);
  const version = data.version;
  // Python's `version not in (1, 2)` also admits 1.0 and true (== 1); JSON.parse gives 1 for 1.0.
  const v = version === true ? 1 : version;
  if (data.format !== FORMAT || (v !== VERSION && v !== TOKENS_VERSION)) {
    // (a format version past this code's is a codebook of a newer fedhh: say so)
    const newer = data.format === FORMAT && Number.isInteger(v) && (v as number) > TOKENS_VERSION;
    throw new CodecError(`${where}: not a ${FORMAT} version ${VERSION} or ${TOKENS_VERSION} codebook` +
                         (newer ? ` (version ${v as number}: ${OLDER_THAN_COORDINATOR})` : ""));
  }
  if (("tokens" in data) !== (v === TOKENS_VERSION)) {
    throw new CodecError(`${where}: a codebook has 'tokens' exactly when it is version ${TOKENS_VERSION}`);
  }
  const table = "bytes" in data ? data.bytes : {};
  if (!isObject(table)) throw new CodecError(`${where}: 'bytes' must be an object of byte -> codeword`);
  const parsed = new Map<number, string>();
  for (const [key, code] of Object.entries(table)) {
    const value = parseByteKey(key, where);
    if (parsed.has(value)) throw new CodecError(`${where}: byte ${byteKey(value)} has two codewords`);
    parsed.set(value, code as string);
  }
  for (const name of ["name", "end"]) {
    if (typeof data[name] !== "string") throw new CodecError(`${where}: '${name}' must be a string`);
  }
  const escape = data.escape ?? null;
  if (escape !== null && typeof escape !== "string") {
    throw new CodecError(`${where}: 'escape' must be a codeword string or null`);
  }
  const description = "description" in data ? data.description : "";
  if (typeof description !== "string") throw new CodecError(`${where}: 'description' must be a string`);
  const tokensTable = "tokens" in data ? data.tokens : {};
  if (!isObject(tokensTable)) {
    throw new CodecError(`${where}: 'tokens' must be an object of token text -> codeword`);
  }
  const tokens: Array<[Bytes, string]> = Object.entries(tokensTable)
    .map(([text, code]) => [itemBytes(text), code as string]);
  const raw = "raw_continuations" in data ? data.raw_continuations : false;
  if (typeof raw !== "boolean") throw new CodecError(`${where}: 'raw_continuations' must be true or false`);
  try {
    return makeCodebook(data.name as string, data.end as string, escape, parsed, description, tokens,
                        raw);
  } catch (error) {
    if (error instanceof CodecError) throw new CodecError(`${where}: ${error.message}`);
    throw error;
  }
}

/** A codebook from its JSON text (Codebook.from_json). */
export function codebookFromJson(text: string, where = "codebook"): Codebook {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new CodecError(`${where}: not valid JSON: ${String(error)}`);
  }
  return codebookFromDict(data, where);
}

/** Python's `json.dumps(book.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)`. */
export function canonicalJson(book: Codebook): string {
  const decoder = new TextDecoder();
  const bytes: Record<string, string> = {};
  for (const [value, code] of book.bytes) bytes[byteKey(value)] = code;
  const data: Record<string, unknown> = {
    format: FORMAT, version: book.tokens.size > 0 ? TOKENS_VERSION : VERSION, name: book.name,
    description: book.description, end: book.end, escape: book.escape, bytes,
  };
  if (book.rawContinuations) data.raw_continuations = true;
  if (book.tokens.size > 0) {
    const tokens: Record<string, string> = {};
    for (const [hex, code] of book.tokens) tokens[decoder.decode(fromHex(hex))] = code;
    data.tokens = tokens;
  }
  return sortedJson(data);
}

/** JSON with object keys in code point order; JSON.stringify escapes strings as Python does
 * with ensure_ascii=False (", \, and control characters; well-formed text otherwise as is). */
function sortedJson(value: unknown): string {
  if (isObject(value)) {
    const keys = Object.keys(value).sort(compareCodePoints);
    return `{${keys.map((k) => `${JSON.stringify(k)}:${sortedJson(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** Python's Codebook.key: `<name>-<first 12 hex digits of SHA-256 of the canonical JSON>`. */
export async function codebookKey(book: Codebook): Promise<string> {
  return `${book.name}-${toHex(await sha256(utf8(canonicalJson(book)))).slice(0, 12)}`;
}

// ---- built-in codebooks defined by code (codebook.py) -------------------------------------------

/** Lewand (2000), percent of letters in English text, a..z (LETTER_FREQUENCIES). */
const LETTER_FREQUENCIES = [
  8.167, 1.492, 2.782, 4.253, 12.702, 2.228, 2.015, 6.094, 6.966, 0.153, 0.772, 4.025, 2.406,
  6.749, 7.507, 1.929, 0.095, 5.987, 6.327, 9.056, 2.758, 0.978, 2.360, 0.150, 1.974, 0.074,
];
const MEAN_WORD_LENGTH = 4.7;
const UNKNOWN_WEIGHT = 0.5;

/**
 * Huffman codewords for symbols 0..k-1 (huffman_codewords): repeatedly merge the two lightest
 * groups, ties broken by insertion order (a min-heap of (weight, counter)); the merged group's
 * first-popped side gets 0.
 */
export function huffmanCodewords(weights: readonly number[]): string[] {
  if (weights.length < 2) throw new CodecError("a Huffman code needs at least two symbols");
  if (weights.some((w) => !(w > 0))) throw new CodecError("Huffman weights must be positive");
  let counter = 0;
  const heap: Array<{ w: number; c: number; symbols: number[] }> =
    weights.map((w, s) => ({ w, c: counter++, symbols: [s] }));
  const codes = weights.map(() => "");
  const lighter = (a: { w: number; c: number }, b: { w: number; c: number }) =>
    a.w < b.w || (a.w === b.w && a.c < b.c);
  const popMin = () => {
    let best = 0;
    for (let i = 1; i < heap.length; i++) if (lighter(heap[i]!, heap[best]!)) best = i;
    return heap.splice(best, 1)[0]!;
  };
  while (heap.length > 1) {
    const left = popMin();
    const right = popMin();
    for (const s of left.symbols) codes[s] = `0${codes[s]}`;
    for (const s of right.symbols) codes[s] = `1${codes[s]}`;
    heap.push({ w: left.w + right.w, c: counter++, symbols: [...left.symbols, ...right.symbols] });
  }
  return codes;
}

function letterCodebook(): Codebook {
  const codes = huffmanCodewords([...LETTER_FREQUENCIES, 100.0 / MEAN_WORD_LENGTH, UNKNOWN_WEIGHT]);
  const letters = LETTER_FREQUENCIES.map((_, i) => [0x61 + i, codes[i]!] as [number, string]);
  return makeCodebook("huffman", codes[26]!, codes[27]!, letters,
                      "English letter frequencies (Lewand 2000); other bytes escaped");
}

function fixed5Codebook(): Codebook {
  const five = (i: number) => i.toString(2).padStart(5, "0");
  const letters = Array.from({ length: 26 }, (_, i) => [0x61 + i, five(i)] as [number, string]);
  return makeCodebook("5bit", five(26), five(27), letters,
                      "the paper's fixed 5-bit code; other bytes escaped");
}

function bytesCodebook(): Codebook {
  const all = Array.from({ length: 256 }, (_, b) => [b, `0${b.toString(2).padStart(8, "0")}`] as [number, string]);
  return makeCodebook("bytes", `1${"0".repeat(8)}`, null, all, "plain UTF-8 bytes, 9 bits each");
}

/**
 * Python's `Codebook.key` of each trained built-in book in this version of fedhh: a served book
 * must have it, or the device would put its ones where the coordinator does not look. The
 * vectors fail when the Python books change and these are not updated with them.
 */
export const BUILTIN_BOOK_KEYS: Readonly<Record<string, string>> = {
  unicode: "unicode-5a8d2f195fe4", general: "general-e4d8a6dcaee8", tokens: "tokens-c959fdc2b953",
  english: "english-57a9094fb7d6", german: "german-474a35c63c56",
};

/** Loads the JSON text of a trained built-in book ("unicode", "general", "tokens", "english",
 * "german"). */
export type BookLoader = (name: string) => Promise<string>;

/**
 * The folder `baseUrl` names, as an absolute URL ending in "/": resolved against the page's
 * address, so "/books/" or "books" serve as in an <a href>, and a folder given without its
 * final "/" is that folder. Before, a relative URL threw "Invalid URL" inside every round (a
 * refusal each round, the book never fetched), and "https://app.example/books" fetched
 * https://app.example/english.json, beside the folder. Throws a RangeError, when the page is
 * set up, for what is not a URL.
 */
export function booksBase(baseUrl: string): string {
  const page = (globalThis as { location?: { href?: string } }).location?.href;
  let url: URL;
  try {
    url = new URL(baseUrl, page);
  } catch {
    throw new RangeError(`fetchBooks: ${JSON.stringify(baseUrl)} is not a URL` +
                         (page === undefined ? " (outside a page, give an absolute one)" : "") +
                         ": give where fedhh/codec/books/ is served, as \"/books/\" or " +
                         "\"https://app.example/books/\"");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new RangeError(`fetchBooks: ${JSON.stringify(baseUrl)} is not an http(s) URL`);
  }
  if (!url.pathname.endsWith("/")) url.pathname += "/";
  return url.href;
}

/**
 * A loader that fetches `<baseUrl><name>.json` (the operator serves fedhh/codec/books/). The
 * browser's copy is checked with the server on each load (`cache: "no-cache"`: a 304 when it is
 * current), since a book is loaded once per page: before, a copy the browser kept by heuristic
 * freshness (a static server's Last-Modified and no Cache-Control) outlived an upgrade of the
 * books, and every round was refused until it expired, though the server had the right one.
 */
export function fetchBooks(baseUrl: string): BookLoader {
  const base = booksBase(baseUrl);
  return async (name: string) => {
    // (the errors name the URL: a round refused for "codebook english: HTTP 404", or for
    // fetch's bare "Failed to fetch", did not say where the page looked for the book)
    const url = new URL(`${name}.json`, base).href;
    let response: Response;
    try {
      response = await fetch(url, { cache: "no-cache" });
    } catch (error) {
      throw new CodecError(`codebook ${name} could not be fetched from ${url} ` +
                           `(${error instanceof Error ? error.message : String(error)}): is ` +
                           "fedhh/codec/books/ served there, and allowed by the page's CSP?",
                           { cause: error });
    }
    if (!response.ok) {
      throw new CodecError(`codebook ${name} could not be fetched from ${url} (HTTP ` +
                           `${response.status}): is fedhh/codec/books/ served there?`);
    }
    return response.text();
  };
}

// The characters Python's str.strip() removes (str.isspace(): Unicode's White_Space less
// U+180E, plus the separators U+001C-U+001F and U+0085), which String.prototype.trim() does not
// all remove (U+001C-U+001F, U+0085) and to which trim() adds U+FEFF.
// (All in the BMP: a UTF-16 code unit is tested alone, and a surrogate is never one.)
const PY_SPACE = /^[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]$/;

/**
 * `text.strip()` as Python writes it: a spec the coordinator took (it reads the spec with
 * Python's strip) is read the same here. Before, trim() refused a task whose spec the Python
 * devices took ("bytes" with U+0085 after it: unknown codebook), and took one they refuse
 * ("bytes" with U+FEFF after it).
 */
export function pythonStrip(text: string): string {
  // A scan from each end, in linear time. (Before, one regular expression, /^S+|S+$/g, tried
  // S+$ from every space of a run inside the text: quadratic, a spec with 100,000 spaces
  // inside, an inline codebook's token among them, held a page's thread for 28 s.)
  let start = 0;
  let end = text.length;
  while (start < end && PY_SPACE.test(text[start]!)) start += 1;
  while (end > start && PY_SPACE.test(text[end - 1]!)) end -= 1;
  return text.slice(start, end);
}

/**
 * The codebook a task's `codec` names (codebook_from_spec): a built-in name or a codebook's
 * inline JSON. Trained built-ins come from `load`, are checked against BUILTIN_BOOK_KEYS (or
 * `expectedKey`, Python's `Codebook.key`) and are kept per loader, as Python caches them.
 */
export async function codebookFromSpec(spec: string, load?: BookLoader,
                                       expectedKey?: string): Promise<Codebook> {
  if (typeof spec !== "string" || pythonStrip(spec) === "") {
    throw new CodecError(`a codec is a built-in codebook name (${BUILTIN_NAMES.join(", ")}) or a ` +
                         `codebook's JSON, got ${JSON.stringify(spec)}`);
  }
  const text = pythonStrip(spec);
  let book: Codebook;
  if (text.startsWith("{")) {
    book = codebookFromJson(text, "inline codebook");
  } else if (text === "huffman") {
    book = letterCodebook();
  } else if (text === "5bit") {
    book = fixed5Codebook();
  } else if (text === "bytes") {
    book = bytesCodebook();
  } else if ((TRAINED_BOOKS as readonly string[]).includes(text)) {
    if (load === undefined) {
      throw new CodecError(`codebook ${text} needs a loader for its JSON (runDevice's \`books\`: ` +
                           "fetchBooks(the URL where fedhh/codec/books/ is served))");
    }
    return trainedBook(text, load, expectedKey ?? BUILTIN_BOOK_KEYS[text]!);
  } else {
    // (the coordinator builds a run's codec before it hands out a task, so a task naming a
    // book this code does not know comes from a newer fedhh)
    throw new CodecError(`unknown codebook ${JSON.stringify(text)}; built-in codebooks: ` +
                         `${BUILTIN_NAMES.join(", ")}, or give a codebook's JSON. A task that ` +
                         `names it: ${OLDER_THAN_COORDINATOR}`);
  }
  if (expectedKey !== undefined && (await codebookKey(book)) !== expectedKey) {
    throw new CodecError(`codebook ${book.name} is not the expected ${expectedKey}`);
  }
  return book;
}

const loaded = new WeakMap<BookLoader, Map<string, Promise<Codebook>>>();

function trainedBook(name: string, load: BookLoader, key: string): Promise<Codebook> {
  let books = loaded.get(load);
  if (books === undefined) loaded.set(load, (books = new Map()));
  const cacheKey = `${name}|${key}`;
  let book = books.get(cacheKey);
  if (book === undefined) {
    book = (async () => {
      const parsed = codebookFromJson(await load(name), `built-in codebook ${name}`);
      if (parsed.name !== name) throw new CodecError(`built-in codebook ${name} is named ${parsed.name}`);
      const got = await codebookKey(parsed);
      if (got !== key) {
        // (before, "codebook english is not the expected english-57a9094fb7d6", every round:
        // nothing said which book was served or what to change)
        throw new CodecError(`codebook ${name} as loaded is ${got}, not the expected ${key} ` +
                             "that this device's code pins: the served fedhh/codec/books/ and " +
                             "the page's bundle come from different fedhh versions (serve both " +
                             "from the coordinator's version, then reload the page)");
      }
      return parsed;
    })();
    books.set(cacheKey, book);
    book.catch(() => books.delete(cacheKey)); // a failed load is tried again next time
  }
  return book;
}

// ---- encoding ------------------------------------------------------------------------------------

/** One item's code: `code` holds `maxBits` bits; `length` the bits up to and including the
 * end symbol (or maxBits when truncated). */
export interface ItemCode {
  code: bigint;
  length: number;
  truncated: boolean;
}

interface TrieNode {
  children: Map<number, TrieNode>;
  code: string | null;
}

/** Encodes items with one codebook into `maxBits`-bit codes (Codec.encode). */
export class Codec {
  private readonly byteBits: string[];
  private readonly trie: Map<number, TrieNode> | null;

  constructor(readonly book: Codebook, readonly maxBits: number) {
    if (!Number.isInteger(maxBits) || maxBits < 1 || maxBits > MAX_SUPPORTED_BITS) {
      throw new CodecError(`max_bits must be an integer in [1, ${MAX_SUPPORTED_BITS}], got ${maxBits}` +
                           (Number.isInteger(maxBits) && maxBits > MAX_SUPPORTED_BITS
                             ? ` (from a task: ${OLDER_THAN_COORDINATOR})` : ""));
    }
    this.byteBits = Array.from({ length: 256 }, (_, b) =>
      book.rawContinuations && b >= CONTINUATION_FIRST && b < CONTINUATION_END
        ? (b & 0x3f).toString(2).padStart(6, "0")
        : book.bytes.get(b) ?? `${book.escape}${b.toString(2).padStart(8, "0")}`);
    this.trie = book.tokens.size > 0 ? buildTrie(book.tokens) : null;
  }

  /** The codec a task names (`task.codec`, `task.max_bits`). */
  static async fromSpec(spec: string, maxBits: number, load?: BookLoader,
                        expectedKey?: string): Promise<Codec> {
    return new Codec(await codebookFromSpec(spec, load, expectedKey), maxBits);
  }

  /** The canonical writing's symbols' bits, then the end symbol (Codebook.item_bits). */
  itemBits(item: string): string {
    const data = itemBytes(item);
    const parts: string[] = [];
    const n = data.length;
    if (this.trie === null) {
      for (const byte of data) parts.push(this.byteBits[byte]!);
    } else {
      // cost[i]: fewest bits writing data[i..] and the end; pick the longest symbol on ties.
      const cost = new Array<number>(n + 1).fill(0);
      const pick = new Array<string>(n).fill("");
      const size = new Array<number>(n).fill(1);
      for (let i = n - 1; i >= 0; i--) {
        let bits = this.byteBits[data[i]!]!;
        let best = bits.length + cost[i + 1]!;
        let length = 1;
        let node = this.trie.get(data[i]!);
        for (let j = i + 1; node !== undefined && j < n; j++) {
          node = node.children.get(data[j]!);
          if (node !== undefined && node.code !== null && node.code.length + cost[j + 1]! <= best) {
            best = node.code.length + cost[j + 1]!;
            bits = node.code;
            length = j + 1 - i;
          }
        }
        cost[i] = best;
        pick[i] = bits;
        size[i] = length;
      }
      for (let i = 0; i < n; i += size[i]!) parts.push(pick[i]!);
    }
    parts.push(this.book.end);
    return parts.join("");
  }

  /** The item's code, its length and whether it was truncated; an empty item is refused. */
  encodeItem(item: string): ItemCode {
    if (item === "") throw new CodecError("an item is empty; items must be non-empty");
    const bits = this.itemBits(item);
    const kept = bits.slice(0, this.maxBits).padEnd(this.maxBits, "0");
    return { code: BigInt(`0b${kept}`), length: Math.min(bits.length, this.maxBits),
             truncated: bits.length > this.maxBits };
  }

  /** The item's code as an integer of `maxBits` bits (Codec.encode). */
  encode(item: string): bigint {
    return this.encodeItem(item).code;
  }
}

function buildTrie(tokens: ReadonlyMap<string, string>): Map<number, TrieNode> {
  const root = new Map<number, TrieNode>();
  for (const [hex, code] of tokens) {
    let children = root;
    const token = fromHex(hex);
    token.forEach((byte, depth) => {
      let node = children.get(byte);
      if (node === undefined) {
        node = { children: new Map(), code: null };
        children.set(byte, node);
      }
      if (depth === token.length - 1) node.code = code;
      children = node.children;
    });
  }
  return root;
}
