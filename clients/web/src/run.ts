/**
 * One device, run until stopped: what fedhh_device/fleet.py does for each of its devices, for
 * the one device of a page. `runDevice` enrols once (the identity is kept in the device's
 * IndexedDB database, src/identity.ts: a reloaded page or a restarted browser goes on as the
 * same device and never presents its spent token again), opens the device's lifetime budget
 * (src/budget.ts, the same database), then takes task after task (`nextRound`, src/loop.ts:
 * each task once, a task that is not genuine refused and waited past, the config, the floors
 * and the clock checked before any budget is spent, the report from `reportForTask`) until
 * `signal` aborts. It tells the page what it does through `onEvent`.
 *
 * The device holds the Web Lock named after its database while it runs, so a second tab of
 * the same origin waits instead of running the same device twice (or enrolling it twice with
 * one token, or spending its budget twice at once). A browser without Web Locks is refused
 * when the device keeps its state in IndexedDB; with stores of the page's own (tests), the
 * device runs without the lock.
 *
 * Before anything is sent, `runDevice` checks that the page can run a device (`checkBrowser`):
 * a page served over plain http from another host than localhost is not a secure context, and
 * browsers give it neither WebCrypto nor Web Locks. Without that check such a page spent its
 * token, joined a cohort and only then failed, at its first hash, as a dropout of the round.
 *
 * An enrolment that got no answer (the network dropped, the coordinator restarting or
 * shedding) is sent again, with the same token and identity key, until it is answered: the
 * coordinator enrols a key it enrolled with that token moments ago as the same device again
 * (its answer was lost), so a lost answer no longer spends the token for nothing. The token
 * and key are kept as the pending enrolment (src/identity.ts) before the first try, so a tab
 * closed meanwhile resumes it on the next load.
 */

import { toBinary } from "@bufbuild/protobuf";
import { type Client, Code, ConnectError } from "@connectrpc/connect";
import { createMethodUrl } from "@connectrpc/connect/protocol";

import { type BudgetStore, DeviceBudget, IndexedDbBudgetStore } from "./budget.js";
import { type BookLoader, loneSurrogate } from "./codec.js";
import { type Floors, DEFAULT_FLOORS } from "./floors.js";
import { DeclineRequestSchema, SecureAggregation } from "./gen/fedhh/v1/aggregator_pb.js";
import type { Task } from "./gen/fedhh/v1/coordinator_pb.js";
import { type IdentityStore, type PendingEnrolment, IndexedDbIdentityStore } from "./identity.js";
import { type Coordinator, type HeldSeat, type Network, type TaskOptions, type TaskResult,
  newTaskMemory, nextRound, pauseUntilOnline } from "./loop.js";
import { KEY_BYTES, ed25519PublicFromSeed } from "./primitives.js";
import { systemJitter, systemRandom } from "./random.js";
import { type DeviceData, reportForTask } from "./report.js";
import { type RoundOptions, type Stage, codeOf, declineRequest, transportFailed
} from "./round.js";
import { type DrawSource, systemDraws } from "./selection.js";
import { StorageError, describeError, deviceDatabase } from "./storage.js";
import {
  BlockedByPagePolicy, CoordinatorClient, type Identity, aggregatorClient, connectTransport,
} from "./wire.js";

/** What the device tells the page, in order. */
/**
 * What a page may show or log of the device's identity: its id and the public keys. The
 * credential and the identity seed stay in the device's storage (bearer secrets: "what the
 * device stores" in docs/web-devices.md); before, the `enrolled` event and `runDevice`'s
 * summary carried them, so a page that logged its events, or sent them to its analytics, handed
 * over what acts as the device.
 */
export interface PublicIdentity {
  deviceId: bigint;
  /** The device's Ed25519 identity key (public). */
  identityPublic: Uint8Array;
  /** The coordinator's raw Ed25519 key, pinned at enrolment. */
  coordinatorPublic: Uint8Array;
}

/** The public part of `identity` (PublicIdentity). */
export function publicIdentity(identity: Identity): PublicIdentity {
  return { deviceId: identity.deviceId,
           identityPublic: ed25519PublicFromSeed(identity.identitySeed),
           coordinatorPublic: identity.coordinatorPublic.slice() };
}

export type DeviceEvent =
  /** Enrolled now with the token (`fresh`), or found enrolled in its storage. */
  | { type: "enrolled"; identity: PublicIdentity; fresh: boolean; spent: number }
  /**
   * An enrolment got no answer (`unavailable`: the coordinator is down or out of reach;
   * `deadline_exceeded`) or was shed (`resource_exhausted`, `canceled`); it is sent again, with
   * the same token and key, in `retryInMs`.
   */
  | { type: "enroll-failed"; code: Code; message: string; retryInMs: number }
  /**
   * A check-in is sent: the device waits for a task. `failures`: how many check-ins in a row
   * before this one got no answer (0: the coordinator answered the last one).
   */
  | { type: "checking-in"; failures: number }
  /**
   * A check-in got no answer (`code` unavailable: the coordinator is down or out of reach;
   * deadline_exceeded) or was shed (resource_exhausted, canceled); the next `checking-in`
   * follows in `retryInMs`, or as soon as the browser is back online. `offline`: the browser
   * says it is offline, and the device waits for it to be online again (OFFLINE_RECHECK_MS at
   * most) instead of asking every few seconds.
   */
  | { type: "check-in-failed"; code: Code; message: string; retryInMs: number;
      offline: boolean }
  /** A verified task is taken (its config is checked next). */
  | { type: "task"; task: Task }
  /**
   * A task was refused as not genuine (`reason`: not signed by the coordinator key the device
   * enrolled with, as after the coordinator was restarted with a new key; another device's;
   * malformed): nothing was spent or sent for it, and the next `checking-in`, in
   * `retryInMs`, waits for the round's next task. `refusals`: how many in a row.
   */
  | { type: "task-refused"; reason: string; refusals: number; retryInMs: number }
  /**
   * The round entered `stage`; `spent` is the local epsilon spent in the budget's period, the
   * round's report included from its first stage on (the budget is spent as the report is
   * made, whatever becomes of the round).
   */
  | { type: "stage"; stage: Stage; spent: number }
  /** The task ended; `spent` is the local epsilon spent in the budget's period. */
  | { type: "result"; result: TaskResult; spent: number }
  /** Another tab of this origin runs this device; this one waits for it to stop. */
  | { type: "waiting-for-another-tab" }
  /**
   * The other tab let the device go (it was closed, or its device stopped): this tab runs it
   * from now on, as from the start (`enrolled` follows, after an enrolment if none was kept).
   */
  | { type: "another-tab-let-go" };

export interface RunDeviceOptions extends Omit<RoundOptions, "dropBefore" | "timings" | "onStage"> {
  /** The coordinator's Connect URL (`https://host:7080`). */
  coordinatorUrl: string;
  /** The one-time enrolment token: used only when the device has no stored identity. */
  enrollmentToken?: string;
  /** The label the device enrols with. */
  label?: string;
  /** The device's items (and their counts: each held once when not given). */
  items: readonly string[];
  counts?: readonly number[];
  /** The device's floors (DEFAULT_FLOORS, the Python device's). */
  floors?: Floors;
  /**
   * The device's name in its origin: its database is `fedhh-device/<name>`, or
   * "fedhh-device" for the unnamed one (a page with one device).
   */
  name?: string;
  /** Where the identity and the budget are kept (IndexedDB, the device's database). */
  identityStore?: IdentityStore;
  budgetStore?: BudgetStore;
  /** Loads a trained codebook a task names (`fetchBooks(url)`). */
  books?: BookLoader;
  /**
   * The Connect URL to reach a task's aggregator at, given the one the task names (signed
   * with it) and its gRPC address: the named URL unless the page maps it.
   */
  aggregatorUrl?: (webUrl: string, address: string) => string;
  /** The `fetch` of the Connect calls (the global one). */
  fetch?: typeof globalThis.fetch;
  /**
   * Where the page's "pagehide" comes from (the page itself, where there is one; tests give
   * their own): a page that goes while the device holds a seat it has not advertised keys for
   * gives the seat up (`declineAsThePageGoes`).
   */
  pageEvents?: EventTarget;
  /**
   * The browser's network (the page's `navigator.onLine`, its "online" events; tests give
   * their own): a device whose check-in or enrolment got no answer tries again at once when
   * the browser comes back online, and waits for that while it is offline.
   */
  network?: Network;
  /** A coordinator client of the page's own instead of one to `coordinatorUrl` (tests). */
  coordinator?: Coordinator;
  /** Stop after this many tasks (tests); none: until `signal` aborts. */
  tasks?: number;
  /**
   * Where a task's selection and randomizer draw from (systemDraws, the browser's
   * crypto.getRandomValues; a seeded stream only in tests).
   */
  draws?: (task: Task) => DrawSource;
  /**
   * What a verified task does differently (tests), given the task and how many tasks the
   * device took before it (0, 1, ...).
   */
  taskOptions?: (task: Task, n: number) => TaskOptions;
  onEvent?: (event: DeviceEvent) => void;
}

/** What a device did until it stopped. */
export interface DeviceSummary {
  identity: PublicIdentity;
  tasks: number;
  contributed: number;
  /** Local epsilon spent in the budget's period. */
  spent: number;
}

/** The page cannot run a device: what it lacks (`checkBrowser`). */
export class UnsupportedBrowserError extends Error {
  override name = "UnsupportedBrowserError";
}

/**
 * Throws `UnsupportedBrowserError` if this page cannot run a device: it is not a secure
 * context (no WebCrypto, no Web Locks), or it lacks crypto.getRandomValues, WebCrypto's
 * crypto.subtle, `fetch` (unless `fetch` is given), or IndexedDB and Web Locks (`indexedDb`:
 * unless the page gives its own stores). Without Web Locks two tabs would run the device at
 * once over the same IndexedDB budget, and could both spend it.
 */
export function checkBrowser(needs: { fetch?: boolean; indexedDb?: boolean } = {}): void {
  const scope = globalThis as { isSecureContext?: boolean; indexedDB?: unknown;
                                crypto?: Partial<Crypto>; fetch?: unknown;
                                navigator?: { locks?: unknown } };
  if (scope.isSecureContext === false) {
    throw new UnsupportedBrowserError(
      "this page is not a secure context (it is served over plain http from a host other " +
      "than localhost), so the browser gives it neither WebCrypto (crypto.subtle) nor Web " +
      "Locks, which the device needs: serve the page over https");
  }
  const origin = (globalThis as { location?: { origin?: unknown } }).location?.origin;
  if (origin === "null") {
    throw new UnsupportedBrowserError(
      "this page has no origin of its own (it was opened from a file, or runs in a sandboxed " +
      "frame), so no service can allow its calls (its --web-origin names pages by origin): " +
      "serve the page over https from an origin the services allow");
  }
  const missing: string[] = [];
  if (typeof scope.crypto?.getRandomValues !== "function") missing.push("crypto.getRandomValues");
  if (scope.crypto?.subtle === undefined) missing.push("WebCrypto (crypto.subtle)");
  if ((needs.fetch ?? true) && typeof scope.fetch !== "function") missing.push("fetch");
  if ((needs.indexedDb ?? true) && scope.indexedDB === undefined) missing.push("IndexedDB");
  if ((needs.indexedDb ?? true) && scope.navigator?.locks === undefined) {
    missing.push("Web Locks (navigator.locks: one tab at a time per device)");
  }
  if (missing.length > 0) {
    throw new UnsupportedBrowserError(`this browser lacks ${missing.join(", ")}, which the ` +
                                      "device needs");
  }
}

/**
 * What a call that got no answer at all says (`error.rawMessage`, "Failed to fetch"), and, in
 * a page, that the browser is offline if it knows so, else that a service which does not
 * allow the page's origin looks the same: a browser
 * hides a refused CORS preflight from the page, so a page missing from the services'
 * `--web-origin` saw "Failed to fetch" forever, like a coordinator that is down. An https
 * service's certificate that the browser does not trust fails the same way (the reason only in
 * the console: a development CA not trusted, or in Firefox a warning accepted for the page's
 * port alone, where its exceptions are per port), so for an https `url` that is named too.
 */
export function noAnswerMessage(error: ConnectError, url = ""): string {
  const origin = (globalThis as { location?: { origin?: unknown } }).location?.origin;
  if (!transportFailed(error) || typeof origin !== "string") return error.rawMessage;
  // The page's own policy refused the call: its message names the origin to allow.
  if (error.cause instanceof BlockedByPagePolicy) return error.rawMessage;
  // A browser that knows it has no network says so (navigator.onLine false): before, an
  // offline page was told to check the service and its --web-origin.
  if ((globalThis as { navigator?: { onLine?: unknown } }).navigator?.onLine === false) {
    return `${error.rawMessage}: this browser is offline`;
  }
  const certificate = /^https:/i.test(url)
    ? " its certificate is not one this browser trusts," : "";
  return `${error.rawMessage}: the service is down or out of reach,${certificate} or it does not ` +
    `allow this page's origin ${origin} (its --web-origin)`;
}

/**
 * Throws a RangeError unless `items` and `counts` are data a device can report from: strings,
 * each non-empty and valid Unicode (no lone surrogate: a string cut inside an emoji), and
 * counts, if given, one per item, integers >= 0. The errors name an item by its index, never
 * by its text. Without this check a device took every task and refused each one when it
 * encoded its items, with the item's text in the round's outcome.
 */
/** What kind of value `value` is, for a message that must not quote it: "null", "a number",
 * "an object", "an array". */
function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  const type = typeof value;
  return `${/^[aeiou]/.test(type) ? "an" : "a"} ${type}`;
}

export function checkDeviceData(items: readonly string[], counts?: readonly number[]): void {
  if (!Array.isArray(items)) throw new RangeError("items must be an array of strings");
  items.forEach((item: unknown, i) => {
    if (typeof item !== "string") {
      // (before, "is a object" for null and for an object)
      throw new RangeError(`item ${i} of ${items.length} is ${kindOf(item)}, not a string`);
    }
    if (item === "") throw new RangeError(`item ${i} of ${items.length} is empty`);
    const at = loneSurrogate(item);
    if (at >= 0) {
      throw new RangeError(`item ${i} of ${items.length} is not valid Unicode: a lone ` +
                           `surrogate at UTF-16 offset ${at} (a string cut inside a character?)`);
    }
  });
  if (counts === undefined) return;
  if (!Array.isArray(counts) || counts.length !== items.length) {
    throw new RangeError(`counts must have one count per item (${items.length}), got ` +
                         `${Array.isArray(counts) ? counts.length : typeof counts}`);
  }
  counts.forEach((count, i) => {
    if (!(Number.isSafeInteger(count) && count >= 0)) {
      // (a count that is not a number is named by its kind: before, the string "1" or the
      // bigint 1n read "must be an integer >= 0, got 1", a valid count to whoever read it)
      throw new RangeError(`count ${i} must be an integer >= 0, got ` +
                           (typeof count === "number" ? String(count) : kindOf(count)));
    }
  });
  // (a weighted selection draws below the total: before, counts each safe but adding up past
  // 2^53 - 1 refused every weighted round, "the counts' total ... is too large", after the
  // device had checked in and taken the task)
  if (!Number.isSafeInteger(counts.reduce((sum, count) => sum + count, 0))) {
    throw new RangeError(`the counts add up to more than ${Number.MAX_SAFE_INTEGER} (2^53 - 1), ` +
                         "which this device cannot draw below: scale them down");
  }
}

/**
 * Throws a RangeError unless `url` is an absolute http(s) URL with a host, as a service's
 * Connect port is reached (`https://fedhh.example:7080`). Without this check a URL given as the
 * Python device takes its address ("fedhh.example:7080": a scheme "fedhh.example" to `fetch`),
 * without a scheme or empty, failed every call as if the coordinator did not answer: the device
 * sent its enrolment again, forever, with "fetch failed" or "Failed to parse URL".
 */
export function checkServiceUrl(url: string, what: string): void {
  let parsed: URL | null = null;
  try {
    parsed = new URL(url);
  } catch {
    parsed = null;
  }
  if (parsed === null || (parsed.protocol !== "https:" && parsed.protocol !== "http:")
      || parsed.hostname === "") {
    throw new RangeError(`${what} must be a service's Connect URL, such as ` +
                         `https://fedhh.example:7080, got ${JSON.stringify(url)}`);
  }
  // The calls' paths are appended to the URL as written (…/fedhh.v1.DeviceService/Enroll), so
  // a query or a fragment would swallow them (every call answered 404 by the port, or sent to
  // the page's own path), and a browser refuses to fetch a URL with a user name or password
  // ("fetch failed", which the device took for an unreachable coordinator and retried forever).
  const extra = url.includes("?") ? "a query (?…)" : url.includes("#") ? "a fragment (#…)"
    : parsed.username !== "" || parsed.password !== "" ? "a user name or password" : null;
  if (extra !== null) {
    throw new RangeError(`${what} must be a service's Connect URL with at most a path after ` +
                         `its host (https://fedhh.example/fedhh behind a path prefix), not ` +
                         `${extra}: got ${JSON.stringify(redacted(parsed, url))}`);
  }
  // A page served over https may not call a plain-http URL (mixed content) unless its host is
  // loopback, which browsers trust over http: the browser blocks the call before it is sent,
  // and the page sees "Failed to fetch", as from a coordinator that is down. Before, such a
  // coordinator URL was enrolled at forever, and such an aggregator URL (the task's, signed)
  // cost the device its report's epsilon each round, every call of which then failed.
  const page = (globalThis as { location?: { protocol?: unknown } }).location?.protocol;
  if (page === "https:" && parsed.protocol === "http:" && !loopbackHost(parsed.hostname)) {
    throw new RangeError(`${what} is plain http (${JSON.stringify(url)}) and this page is ` +
                         "served over https: the browser blocks such calls as mixed content " +
                         "(each fails as \"Failed to fetch\"); give the service's https URL");
  }
}

/**
 * Whether a browser trusts `hostname` over plain http (W3C Secure Contexts, "potentially
 * trustworthy" origins): localhost and its subdomains, 127.0.0.0/8 and ::1.
 */
function loopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase();
  return host === "localhost" || host.endsWith(".localhost") || host === "[::1]"
    || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** `url` with any password replaced by "***" (it is quoted in an error a page may show). */
function redacted(parsed: URL, url: string): string {
  if (parsed.password === "") return url;
  const copy = new URL(parsed.href);
  copy.password = "***";
  return copy.href;
}

/**
 * Runs the device until `signal` aborts (then resolves) or `tasks` tasks are done. Throws
 * before anything is sent if the items cannot be reported (`checkDeviceData`) or the page
 * cannot run a device (`UnsupportedBrowserError`); throws if
 * it cannot enrol (no stored identity and no token, or a token the coordinator refuses: unknown,
 * spent or expired), if the coordinator refuses its credential, or with the abort's reason if
 * `signal` aborts while another tab holds the device or its enrolment waits for an answer
 * (module docstring).
 */
export async function runDevice(options: RunDeviceOptions): Promise<DeviceSummary> {
  checkDeviceData(options.items, options.counts);
  if (options.coordinator === undefined) checkServiceUrl(options.coordinatorUrl, "coordinatorUrl");
  checkBrowser({ fetch: options.fetch === undefined && options.coordinator === undefined,
                 indexedDb: options.identityStore === undefined
                   || options.budgetStore === undefined });
  const database = deviceDatabase(options.name);
  const locks = (globalThis.navigator as Navigator | undefined)?.locks;
  if (locks === undefined) return run(options, database);
  const held = await locks.request(database, { ifAvailable: true }, async (lock) =>
    lock === null ? null : run(options, database));
  if (held !== null) return held;
  options.onEvent?.({ type: "waiting-for-another-tab" });
  return locks.request(database, options.signal === undefined ? {} : { signal: options.signal },
                       async () => {
    options.onEvent?.({ type: "another-tab-let-go" });
    return run(options, database);
  });
}

// The names of the errors with which a browser refuses a site its IndexedDB (`run`). Only
// these are told as a refusal: before, every failure of the identity's load was, a stored
// identity this device does not read (RangeError) and a database another tab holds open at an
// older version among them, each with the advice to allow site data or leave a private window.
const STORAGE_REFUSALS = new Set(["SecurityError", "UnknownError", "InvalidStateError"]);

function nameOf(error: unknown): string {
  return typeof error === "object" && error !== null && "name" in error ? String(error.name) : "";
}

async function run(options: RunDeviceOptions, database: string): Promise<DeviceSummary> {
  const tell = options.onEvent ?? (() => undefined);
  const floors = options.floors ?? DEFAULT_FLOORS;
  const coordinator = options.coordinator
    ?? new CoordinatorClient(connectTransport(options.coordinatorUrl, options.fetch));
  const identities = options.identityStore ?? new IndexedDbIdentityStore(database);
  let identity: Identity | null;
  try {
    identity = await identities.load();
  } catch (error) {
    // (a stored identity this device does not read, a database another tab holds open at an
    // older version: the store's own words say what to do)
    if (options.identityStore !== undefined || !STORAGE_REFUSALS.has(nameOf(error))) throw error;
    // A browser that has IndexedDB but refuses this site its use: site data blocked
    // (Firefox: "SecurityError: The operation is insecure."; Chromium: "UnknownError: The user
    // denied permission to access the database."), or a private window of a browser that keeps
    // no IndexedDB there ("InvalidStateError: A mutation operation was attempted on a database
    // that did not allow mutations."). Before, the page got the store's words alone.
    throw new UnsupportedBrowserError(
      `this browser refuses the device's storage to this site (IndexedDB: ` +
      `${describeError(error)}): the device keeps its identity and budget there. Allow the ` +
      "site to store data (cookies and site data), or open the page outside a private window; " +
      "nothing was sent", { cause: error });
  }
  const fresh = identity === null;
  if (identity === null) {
    identity = await enrol(coordinator, identities, options, database);
  } else if (await identities.loadPending?.() != null) {
    // (kept, and the tab closed before the pending enrolment was forgotten)
    await identities.savePending?.(null);
  }
  const budget = await DeviceBudget.open(options.budgetStore ?? new IndexedDbBudgetStore(database),
                                         floors.lifetimeEpsLocal, floors.budgetPeriodS);
  const shown = publicIdentity(identity);
  tell({ type: "enrolled", identity: shown, fresh, spent: budget.spent() });
  const data: DeviceData = { items: options.items,
                             counts: options.counts ?? options.items.map(() => 1) };
  const clients = new Map<string, Client<typeof SecureAggregation>>();
  const urlOf = (webUrl: string, address: string) => {
    const url = options.aggregatorUrl?.(webUrl, address) ?? webUrl;
    if (url === "") throw new Error(`the task names no Connect URL for aggregator ${address}`);
    checkServiceUrl(url, `the Connect URL of aggregator ${address}`);
    return url;
  };
  const aggregatorFor = (webUrl: string, address: string) => {
    const url = urlOf(webUrl, address);
    let client = clients.get(url);
    if (client === undefined) {
      client = aggregatorClient(connectTransport(url, options.fetch));
      clients.set(url, client);
    }
    return client;
  };
  const memory = newTaskMemory();
  const summary: DeviceSummary = { identity: shown, tasks: 0, contributed: 0,
                                   spent: budget.spent() };
  const { taskOptions, tasks, draws, onEvent: _onEvent, pageEvents: _pageEvents, ...rest } = options;
  let seat: HeldSeat | undefined;
  const pageGoes = () => {
    if (seat !== undefined) declineAsThePageGoes(seat, identity, urlOf, options.fetch);
    seat = undefined;
  };
  const page = options.pageEvents ?? thePage();
  page?.addEventListener("pagehide", pageGoes);
  try {
    for (let n = 0; tasks === undefined || n < tasks; n++) {
      let result: TaskResult;
      try {
        result = await nextRound(coordinator, identity, {
          ...rest, memory, floors, aggregatorFor, network: networkOf(options),
          ...(taskOptions === undefined ? {} : { forTask: (task: Task) => taskOptions(task, n) }),
          onCheckIn: (failures) => tell({ type: "checking-in", failures }),
          onCheckInFailed: (code, error, retryInMs, offline) =>
            tell({ type: "check-in-failed", code,
                   message: noAnswerMessage(error, options.coordinatorUrl), retryInMs, offline }),
          onTask: (task) => tell({ type: "task", task }),
          onTaskRefused: (error, refusals, retryInMs) =>
            tell({ type: "task-refused", reason: error.message, refusals, retryInMs }),
          onStage: (stage) => tell({ type: "stage", stage, spent: budget.spent() }),
          onSeat: (held) => { seat = held; },
          report: (task, taskFloors) => reportForTask(task, data, budget, taskFloors,
                                                      options.books, draws?.(task) ?? systemDraws),
        });
      } catch (error) {
        if (options.signal?.aborted) break;
        if (error instanceof ConnectError && error.code === Code.Unauthenticated) {
          throw new ConnectError(
            `the coordinator refused the credential of device ${database} (device id ` +
            `${identity.deviceId}: ${error.rawMessage}). It no longer knows this device (its ` +
            "data was reset, or it is another deployment): the device needs a new enrolment " +
            "token, and its stored identity forgotten", error.code, undefined, undefined, error);
        }
        throw error;
      }
      summary.tasks += 1;
      if (result.contributed) summary.contributed += 1;
      summary.spent = budget.spent();
      tell({ type: "result", result, spent: summary.spent });
    }
  } finally {
    page?.removeEventListener("pagehide", pageGoes);
  }
  summary.spent = budget.spent();
  return summary;
}

/** The network `options` give, else the page's; none outside a page. */
function networkOf(options: RunDeviceOptions): Network | undefined {
  if (options.network !== undefined) return options.network;
  const page = options.pageEvents ?? thePage();
  const navigator = (globalThis as { navigator?: { onLine?: unknown } }).navigator;
  if (page === undefined || typeof navigator?.onLine !== "boolean") return undefined;
  return { online: () => navigator.onLine !== false, events: page };
}

/** The page this code runs in, as the target of its lifecycle events; none outside a page. */
function thePage(): EventTarget | undefined {
  const scope = globalThis as { addEventListener?: unknown; document?: unknown };
  return typeof scope.addEventListener === "function" && scope.document !== undefined
    ? globalThis as unknown as EventTarget : undefined;
}

/**
 * Give up `seat` as the page goes (closed, reloaded, navigated away) before the device
 * advertised its keys: its Decline (`declineRequest`, signed at once) as a keepalive fetch,
 * which the browser sends on after the page is gone, as the demo page's last status post
 * (48493dde). Nothing is waited for, retried or read: the page cannot. An aggregator the page
 * may not call gets nothing. Before, the seat was left to the first stage's deadline, which
 * the whole round then waited for.
 */
function declineAsThePageGoes(seat: HeldSeat, identity: Identity,
                              urlOf: (webUrl: string, address: string) => string,
                              fetchImpl: typeof globalThis.fetch | undefined): void {
  let url: string;
  try {
    url = urlOf(seat.task.aggregatorWebUrl, seat.task.aggregatorAddress);
  } catch {
    return;
  }
  const body = toBinary(DeclineRequestSchema,
                        declineRequest(seat.sessionId, identity.identitySeed, seat.admission));
  (fetchImpl ?? globalThis.fetch)(createMethodUrl(url, SecureAggregation.method.decline), {
    method: "POST", keepalive: true, body,
    headers: { "Content-Type": "application/proto", "Connect-Protocol-Version": "1" },
  }).catch(() => undefined);
}

// Enrolments that got no answer (a failed fetch counted as unavailable) or were shed: sent
// again, as loop.ts sends a check-in again.
const ENROLL_RETRIED = new Set([Code.Unavailable, Code.DeadlineExceeded, Code.ResourceExhausted,
                                Code.Canceled]);
// The coordinator's refusals of an enrolment (fleet.py's _REFUSED_ENROLLMENT).
const ENROLL_REFUSED = new Set([Code.Unauthenticated, Code.AlreadyExists]);
// An enrolment's own deadline: a call whose answer never comes is sent again.
const ENROLL_TIMEOUT_MS = 30_000;

/**
 * What a page's user or operator makes of the coordinator's refusal `why` of a token: an
 * expired token, one not as the coordinator issued it (its format: a stray space or newline, a
 * cut copy), one it does not know or that was used (the browser lost the device's storage), an
 * enrolment signature it could not verify (a page and a coordinator of different versions), or
 * another reason (an attestation refused), left to the operator.
 * Before, every refusal was explained as the last, so an expired or mangled token, never used,
 * sent its operator looking for cleared site data.
 */
/** The page's origin, or "" outside a page (Node) or in a page without one ("null"). */
function pageOrigin(): string {
  const origin = (globalThis as { location?: { origin?: unknown } }).location?.origin;
  return typeof origin === "string" && origin !== "null" ? origin : "";
}

export function tokenRefusal(why: string): string {
  if (/expired/i.test(why)) {
    return "The token expired before this device enrolled with it: it needs a new enrolment " +
      "token";
  }
  if (/hex digits/i.test(why)) {
    return "The token is not as the coordinator issued it (nothing but the hex digits " +
      "`fedhh admin mint-tokens` wrote, no space or line break around them): check how the " +
      "page was given it. Nothing was enrolled";
  }
  if (/enrollment_signature/i.test(why)) {
    // (checked before the token is looked at: before, this was explained as a used token and
    // cleared site data, and the operator minted a new token that the same page spent no
    // better)
    return "The coordinator could not verify this device's enrolment signature: the page's " +
      "device code and the coordinator come from different fedhh versions. Reload the page (if " +
      "this persists, the operator must serve the bundle built from the coordinator's version); " +
      "the token was not spent";
  }
  if (/unknown or already used/i.test(why)) {
    // A browser keeps each origin's data apart: a page opened at another address of the site
    // than the one that enrolled (localhost for 127.0.0.1, www. for the bare name, another
    // port) holds none of it. Before, only a new token was asked for.
    const origin = pageOrigin();
    return `This browser holds no identity for that device${origin ? ` at ${origin}` : ""}: ` +
      "it never enrolled here, or the site's data (IndexedDB) was cleared since it did, and a " +
      "token enrols one device once. It needs a new enrolment token; if the page enrolled it " +
      "at another address (another host name, port or scheme: a browser keeps each one's data " +
      "apart), open the page there instead";
  }
  // (an attestation the coordinator's verifier refused, or another check of the request: not a
  // used token, which before was said of every refusal)
  return "The coordinator refused the enrolment for the reason it gives, not as a used token: " +
    "the page's operator must resolve that reason before the device can enrol";
}

/**
 * Enrols the device (module docstring): the pending enrolment again if it was for this token
 * (or the page gives none), else the page's token with a fresh key; kept as pending before the
 * first try, sent until it is answered, the identity kept before anything else.
 */
async function enrol(coordinator: Coordinator, identities: IdentityStore,
                     options: RunDeviceOptions, database: string): Promise<Identity> {
  const token = options.enrollmentToken ?? "";
  const pending = await identities.loadPending?.() ?? null;
  let attempt: PendingEnrolment;
  if (pending !== null && (token === "" || pending.token === token)) {
    attempt = pending;
  } else if (token !== "") {
    attempt = { token, identitySeed: systemRandom(KEY_BYTES) };
    try {
      await identities.savePending?.(attempt);
    } catch (error) {
      throw new StorageError(`the pending enrolment of device ${database}`, "nothing was sent " +
                             "and the token is not spent: reload the page once the site can " +
                             "store data", error);
    }
  } else {
    throw new Error(`the device ${database} is not enrolled and has no enrolment token`);
  }
  for (let failures = 0; ; failures++) {
    options.signal?.throwIfAborted();
    let identity: Identity;
    try {
      identity = await coordinator.enroll(attempt.token, options.label, attempt.identitySeed,
                                          options.signal, ENROLL_TIMEOUT_MS);
    } catch (error) {
      options.signal?.throwIfAborted();
      if (!(error instanceof ConnectError) || !ENROLL_RETRIED.has(codeOf(error))) {
        // The coordinator refused the token (unknown, spent, expired) or the key (enrolled
        // too long ago to be answered again): it will not enrol, and the pending enrolment is
        // forgotten. Any other failure (a proxy's error page, an answer that did not parse)
        // may hide an enrolment that took effect: the pending one is kept, so the next load
        // presents the same token with the same key and is the same device. Before, it was
        // forgotten, and the next load's fresh key found the token spent.
        if (error instanceof ConnectError && ENROLL_REFUSED.has(error.code)) {
          await identities.savePending?.(null);
        }
        if (error instanceof ConnectError && error.code === Code.Unauthenticated) {
          // (the page showed the coordinator's words alone, "unknown or already used
          // enrollment token", to a user whose browser had lost the device's storage)
          throw new ConnectError(
            `the coordinator refused the enrolment token of device ${database} ` +
            `(${error.rawMessage}). ${tokenRefusal(error.rawMessage)}`,
            error.code, undefined, undefined, error);
        }
        throw error;
      }
      const cap = error.code === Code.ResourceExhausted || error.code === Code.Canceled
        ? 60_000 : 10_000;
      const retryInMs = (options.jitter ?? systemJitter)()
        * Math.min(cap, 200 * 2 ** Math.min(failures, 30));
      options.onEvent?.({ type: "enroll-failed", code: codeOf(error),
                          message: noAnswerMessage(error, options.coordinatorUrl), retryInMs });
      await pauseUntilOnline(retryInMs, options.signal, networkOf(options));
      continue;
    }
    // Kept before anything else: the token is spent now.
    try {
      await identities.save(identity);
    } catch (error) {
      throw new StorageError(
        `the identity of device ${database} (enrolled as device id ${identity.deviceId})`,
        "reload the page within 15 minutes once the site can store data: the same token " +
        "and key then enrol it again as the same device (after that a new token is needed)",
        error);
    }
    await identities.savePending?.(null);
    return identity;
  }
}
