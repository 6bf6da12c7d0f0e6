/**
 * The demo page of `fedhh up --web-devices N` (bundled to dist/browser/demo.js by `npm run
 * bundle`): N web devices in one tab, each with its own one-time enrolment token, identity,
 * IndexedDB budget and items, all given by `demo.json` beside the page. Each device is a
 * `runDevice` (src/run.ts): it enrols (or finds its identity in IndexedDB, after a reload),
 * then takes task after task until the page is closed. The page shows per
 * device what it is doing (enrolled, checked in, the stage of its round, contributed or not
 * and why, the local epsilon spent) and the run's progress (`progress.json`, written by
 * `fedhh up`); it posts the devices' states back to `status` so that `fedhh up` can tell the
 * operator (and wait for the devices to enrol before it starts the run).
 */

import { Code } from "@connectrpc/connect";

import { type BookLoader, fetchBooks } from "../src/codec.js";
import { DEFAULT_FLOORS, type Floors } from "../src/floors.js";
import { Stage } from "../src/round.js";
import { type DeviceEvent, runDevice } from "../src/run.js";
import { type KeptTask, keepTasks, keptTasks, pageStorage } from "./kept.js";
import { queryText } from "./query.js";
import { inTheSum, lateAdvice, roundsContributed } from "./rounds.js";

/** What `fedhh up` gives the page (fedhh/cli/webdemo.py writes it). */
export interface DemoConfig {
  /** The aggregator's Connect URL as the tasks name it. */
  aggregator: string;
  /** Per device: the coordinator's and the aggregator's Connect URL under its host name. */
  coordinators: string[];
  aggregators: string[];
  tokens: string[];
  users: number[];
  items: string[][];
  counts: number[][];
  /** The n_min floor the run's devices are given (`fedhh up`'s Python devices get the same). */
  minCohort: number;
  /** Where the trained codebooks are served (for a task that names one). */
  books: string;
  /** A name of this `fedhh up` (its coordinator key differs each time): the budgets' keys. */
  session: string;
}

/** A task as the page shows it (its query as the task gave it: `queryText`). */
export type TaskView = KeptTask;

/** One device as the page shows it and posts it to `status`. */
export interface DeviceView {
  user: number;
  deviceId: string;
  state: "enrolling" | "waiting for another tab" | "enrolled" | "checking in" | "no contact"
    | "offline" | "in a round" | "failed";
  task: string;
  /** The query of the device's current task (`queryText`), or "". */
  query: string;
  stage: string;
  /**
   * Whether the current task's masked input was accepted (its stage is past it): once its round
   * is released, its input is in the sum even if the page posts no outcome after (a tab closed
   * in the last stages), which `fedhh up`'s summary says.
   */
  sent: boolean;
  /** What the device does while it has no task (shown in place of the round and stage). */
  note: string;
  /** When the first of the check-ins that got no answer in a row failed (ms), or 0. */
  noAnswerSince: number;
  tasks: TaskView[];
  /**
   * The tasks this browser's earlier loads of the page showed for the device (kept.ts): shown
   * and counted with this load's, not posted (`fedhh up` keeps each load's posts itself).
   */
  earlier: TaskView[];
  spent: number;
  error: string;
}

const STAGES: Record<Stage, string> = {
  [Stage.ADVERTISE_KEYS]: "advertise keys", [Stage.SHARE_KEYS]: "share keys",
  [Stage.MASKED_INPUT]: "masked input", [Stage.CONSISTENCY_CHECK]: "consistency check",
  [Stage.UNMASK]: "unmask", [Stage.DONE]: "done",
};

const views: DeviceView[] = [];
const page = globalThis as unknown as { fedhhDemo?: { devices: DeviceView[]; error?: string } };

function changed(): void {
  page.fedhhDemo = { devices: views };
  scheduleRender();
  schedulePost();
}

function clock(ms: number): string {
  return new Date(ms).toLocaleTimeString();
}

/** The views whose note tells of a refused task (kept until another event replaces it). */
const refusing = new WeakSet<DeviceView>();

/** The page's view of one device's events. */
function show(view: DeviceView, event: DeviceEvent): void {
  if (event.type !== "task-refused" && event.type !== "checking-in") refusing.delete(view);
  switch (event.type) {
    case "enrolled":
      view.deviceId = event.identity.deviceId.toString();
      view.state = "enrolled"; view.note = "";
      view.spent = event.spent;  // kept across a reload
      view.noAnswerSince = 0;
      break;
    case "enroll-failed":
      if (view.noAnswerSince === 0) view.noAnswerSince = Date.now();
      view.state = "enrolling";
      view.note = `the enrolment got no answer since ${clock(view.noAnswerSince)} ` +
                  `(${event.message}); sending it again`;
      break;
    case "checking-in":
      if (event.failures === 0) {
        // (a refused task's note stays while the device waits for the round's next task)
        if (view.state === "checking in" && (view.note === "" || refusing.has(view))) return;
        view.noAnswerSince = 0; view.note = "";
      } else if (view.noAnswerSince !== 0) {
        // A retry is on its way: the coordinator may answer it, but has not yet.
        view.note = `no answer since ${clock(view.noAnswerSince)}; asking again`;
      }
      view.state = "checking in"; view.task = ""; view.stage = "";
      break;
    case "check-in-failed":
      if (event.offline) {
        if (view.noAnswerSince === 0) view.noAnswerSince = Date.now();
        view.state = "offline";
        view.note = `this browser is offline (no answer since ${clock(view.noAnswerSince)}): ` +
                    "the device checks in again as soon as it is back online";
      } else if (event.code === Code.Unavailable || event.code === Code.DeadlineExceeded) {
        if (view.noAnswerSince === 0) view.noAnswerSince = Date.now();
        view.state = "no contact";
        view.note = `no answer since ${clock(view.noAnswerSince)} (${event.message}); ` +
                    "asking again";
      } else if (event.code === Code.ResourceExhausted && /device's cap/.test(event.message)) {
        view.noAnswerSince = 0;
        view.state = "checking in";
        view.note = `the coordinator's answer was refused (${event.message}); asking again`;
      } else if (event.code === Code.ResourceExhausted || event.code === Code.Canceled) {
        view.noAnswerSince = 0;
        view.state = "checking in";
        view.note = "the coordinator is busy and put the check-in off; asking again";
      } else {
        // (an answer that did not parse, a proxy's error page, the coordinator's own error)
        view.noAnswerSince = 0;
        view.state = "checking in";
        view.note = `the check-in failed (${Code[event.code]}: ${event.message}); asking again`;
      }
      break;
    case "task-refused":
      refusing.add(view);
      view.state = "checking in"; view.task = ""; view.stage = ""; view.noAnswerSince = 0;
      view.note = `refused a task (${event.reason}; ${event.refusals} in a row): nothing was ` +
                  "spent or sent for it; waiting for the round's next task";
      break;
    case "task":
      view.state = "in a round"; view.note = ""; view.noAnswerSince = 0;
      view.task = `${event.task.runId} round ${event.task.round}.${event.task.attempt}`;
      view.query = queryText(event.task);
      view.stage = "checking the config";
      view.sent = false;
      break;
    case "stage":
      view.stage = STAGES[event.stage];
      // (spent as the report was made: a tab closed mid-round showed, and posted, the ε of
      // the rounds before alone)
      view.spent = event.spent;
      if (event.stage > Stage.MASKED_INPUT) view.sent = true;
      break;
    case "result": {
      const r = event.result;
      view.tasks.push({ task: `${r.runId} round ${r.round}.${r.attempt}`, query: view.query,
                        outcome: r.outcome, contributed: r.contributed, detail: r.detail });
      view.spent = event.spent;
      view.stage = "";
      break;
    }
    case "waiting-for-another-tab":
      // (a reload can start before the old page's lock is released: not an error)
      view.state = "waiting for another tab";
      view.note = "another tab of this page runs this device; it goes on here once that tab " +
                  "is closed";
      break;
    case "another-tab-let-go":
      view.state = "enrolling"; view.note = "";
      break;
  }
  changed();
}

/**
 * Device i: its identity and budget in IndexedDB under its name in this `fedhh up` (a
 * reloaded page goes on with the devices it enrolled, whose one-time tokens are spent).
 */
async function runDemoDevice(config: DemoConfig, i: number, view: DeviceView, books: BookLoader
): Promise<void> {
  const storage = pageStorage();
  const key = `fedhh-demo-rounds/${config.session}/${i}`;
  const floors: Floors = { ...DEFAULT_FLOORS, minCohort: config.minCohort };
  await runDevice({
    coordinatorUrl: config.coordinators[i]!, enrollmentToken: config.tokens[i]!,
    label: `demo-${config.users[i]}`, name: `demo/${config.session}/${i}`, floors, books,
    items: config.items[i] ?? [], counts: config.counts[i] ?? [],
    // The task names the aggregator's Connect URL; this device reaches it under its own name.
    aggregatorUrl: (webUrl) => webUrl === config.aggregator ? config.aggregators[i]! : webUrl,
    onEvent: (event) => {
      if (event.type === "enrolled") {
        view.earlier = keptTasks(storage, key, event.identity.deviceId.toString());
      }
      show(view, event);
      if (view.deviceId === "") return;
      const current = view.state === "in a round" && view.task !== "" &&
        !view.tasks.some((t) => t.task === view.task);
      keepTasks(storage, key, {
        deviceId: view.deviceId, tasks: [...view.earlier, ...view.tasks],
        current: current ? { task: view.task, query: view.query, stage: view.stage,
                             sent: view.sent } : null });
    },
  });
}

// ---- the page ----------------------------------------------------------------------------------
/** The columns' headings: each cell carries its own, shown beside it on a narrow screen. */
let headings: string[] = [];

function cell(row: HTMLTableRowElement, text: string, className = ""): void {
  const td = row.insertCell();
  td.textContent = text;
  td.dataset["label"] = headings[td.cellIndex] ?? "";
  if (className) td.className = className;
}

/** The run's attempts `fedhh up` says were released (progress.json), by their tasks' names. */
let released: ReadonlySet<string> = new Set();

function outcomeText(t: TaskView): string {
  if (t.contributed && t.outcome !== "completed" && inTheSum(t, released)) {
    return `contributed (${t.outcome}; the round was released with its input)`;
  }
  if (t.contributed) return t.outcome === "completed" ? "contributed" : `contributed (${t.outcome})`;
  return t.detail ? `${t.outcome}: ${t.detail}` : t.outcome;
}

function render(): void {
  const body = document.querySelector("#devices tbody");
  if (body === null) return;
  headings = Array.from(document.querySelectorAll("#devices thead th"),
                        (th) => th.textContent ?? "");
  body.replaceChildren();
  for (const v of views) {
    const tasks = [...v.earlier, ...v.tasks];
    const row = (body as HTMLTableSectionElement).insertRow();
    row.dataset["state"] = v.state;
    cell(row, String(v.user));
    cell(row, v.deviceId || "–");
    cell(row, v.deviceId ? "yes" : v.state === "failed" ? "no" : "…");
    cell(row, v.state === "failed" ? v.error : v.state, `state-${v.state.replace(/ /g, "-")}`);
    cell(row, v.task ? `${v.task}: ${v.stage}` : v.note || "–");
    const last = tasks[tasks.length - 1];
    // (the current round's query; between rounds, the last round's)
    cell(row, (v.task ? v.query : last?.query) || "–", "query");
    const advice = lateAdvice(tasks);
    cell(row, last === undefined ? "–"
           : `${last.task}: ${outcomeText(last)}` + (advice ? `; ${advice}` : ""),
         last === undefined ? "" : last.contributed ? "contributed" : "not-contributed");
    cell(row, String(roundsContributed(tasks, released)));
    cell(row, v.spent.toFixed(3));
  }
}

let renderPending = false;
function scheduleRender(): void {
  if (renderPending) return;
  renderPending = true;
  const draw = () => {
    if (!renderPending) return;
    renderPending = false;
    render();
  };
  requestAnimationFrame(draw);
  // A tab that draws no frames gets its rows all the same: one frozen while in the background
  // (a sleeping laptop, the browser's tab freezing) drew none once resumed, in Chromium, and
  // its rows showed the round it was frozen in for good while its devices went on.
  setTimeout(draw, 1000);
}

let postTimer: ReturnType<typeof setTimeout> | undefined;
function schedulePost(): void {
  if (postTimer !== undefined) return;
  postTimer = setTimeout(() => {
    postTimer = undefined;
    postStates(false);
  }, 300);
}

/**
 * This load of the page, named in its posts: `fedhh up` tells a reload from the posts (the
 * round a device was in when the page was reloaded is kept as interrupted, its masked input
 * perhaps in a released sum, where the new load refuses the round's task handed again).
 */
const load = Array.from(crypto.getRandomValues(new Uint8Array(8)),
                        (byte) => byte.toString(16).padStart(2, "0")).join("");

function postStates(keepalive: boolean): void {
  const send = (alive: boolean) => fetch("status", {
    method: "POST", headers: { "Content-Type": "application/json" }, keepalive: alive,
    body: JSON.stringify({ load, devices: views.map(({ earlier: _earlier, ...posted }) => posted) }) });
  // (a keepalive body is capped at 64 KiB: a larger one goes as an ordinary post)
  send(keepalive).catch(() => keepalive ? send(false).catch(() => undefined) : undefined);
}

// A post still waiting for its timer when the page goes (reloaded, closed, navigated away) is
// sent at once, kept alive past the page: before, the states of its last 300 ms were lost, and
// `fedhh up`'s summary lacked the round a device had just ended.
addEventListener("pagehide", () => {
  if (postTimer === undefined) return;
  clearTimeout(postTimer);
  postTimer = undefined;
  postStates(true);
});

async function pollProgress(): Promise<void> {
  const out = document.getElementById("progress");
  let lines = out?.textContent ?? "";
  let noAnswerSince = 0;
  for (;;) {
    try {
      const answer = await fetch("progress.json", { cache: "no-store" });
      if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
      const progress = await answer.json() as { lines: string[]; released?: unknown };
      lines = progress.lines.join("\n") || "waiting for the run to start";
      const names = Array.isArray(progress.released)
        ? progress.released.filter((name): name is string => typeof name === "string") : [];
      if (names.length !== released.size || names.some((name) => !released.has(name))) {
        released = new Set(names);
        scheduleRender();
      }
      noAnswerSince = 0;
    } catch {
      if (noAnswerSince === 0) noAnswerSince = Date.now();
    }
    // The last progress fedhh up gave, and one note while it does not answer (not one a poll):
    // the browser's own when it knows it is offline (before, fedhh up was said to be silent).
    const offline = (globalThis.navigator as { onLine?: boolean } | undefined)?.onLine === false;
    if (out !== null) {
      out.textContent = noAnswerSince === 0 ? lines
        : offline ? `${lines}\n(this browser is offline since ${clock(noAnswerSince)}: ` +
                    "the devices and this page go on once it is online)"
        : `${lines}\n(fedhh up is not answering since ${clock(noAnswerSince)})`;
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

async function main(): Promise<void> {
  const config = await (await fetch("demo.json", { cache: "no-store" })).json() as DemoConfig;
  config.tokens.forEach((_, i) => views.push({
    user: config.users[i]!, deviceId: "", state: "enrolling", task: "", query: "", stage: "",
    sent: false, note: "",
    noAnswerSince: 0, tasks: [], earlier: [], spent: 0, error: "" }));
  changed();
  void pollProgress();
  // One loader for all: a trained book is fetched once (the loader keeps it).
  const books = fetchBooks(new URL(config.books, location.href).href);
  await Promise.all(views.map((view, i) => runDemoDevice(config, i, view, books).catch((error: unknown) => {
    view.state = "failed";
    view.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    changed();
  })));
}

main().catch((error: unknown) => {
  page.fedhhDemo = { devices: views, error: String(error) };
  const out = document.getElementById("progress");
  if (out !== null) out.textContent = `the demo could not start: ${String(error)}`;
});
