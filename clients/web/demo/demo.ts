/**
 * The demo page of `fedhh up --web-devices N` (bundled to dist/browser/demo.js by `npm run
 * bundle`): N web devices in one tab, each with its own one-time enrolment token, identity,
 * IndexedDB budget and items, all given by `demo.json` beside the page. Each device enrols,
 * then takes task after task (src/loop.ts) until the page is closed. The page shows per
 * device what it is doing (enrolled, checked in, the stage of its round, contributed or not
 * and why, the local epsilon spent) and the run's progress (`progress.json`, written by
 * `fedhh up`); it posts the devices' states back to `status` so that `fedhh up` can tell the
 * operator (and wait for the devices to enrol before it starts the run).
 */

import { DeviceBudget, IndexedDbBudgetStore } from "../src/budget.js";
import { fromHex, toHex } from "../src/bytes.js";
import { type BookLoader, fetchBooks } from "../src/codec.js";
import { DEFAULT_FLOORS, type Floors } from "../src/floors.js";
import { newTaskMemory, nextRound, type TaskResult } from "../src/loop.js";
import { reportForTask } from "../src/report.js";
import { Stage } from "../src/round.js";
import { CoordinatorClient, type Identity, aggregatorClient, connectTransport } from "../src/wire.js";

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

export interface TaskView {
  task: string;
  outcome: TaskResult["outcome"];
  contributed: boolean;
  detail: string;
}

/** One device as the page shows it and posts it to `status`. */
export interface DeviceView {
  user: number;
  deviceId: string;
  state: "enrolling" | "enrolled" | "checking in" | "in a round" | "failed";
  task: string;
  stage: string;
  tasks: TaskView[];
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

/**
 * A device's identity, kept in this tab's sessionStorage (gone when the tab closes): a reloaded
 * page goes on with the devices it enrolled, whose one-time tokens are spent.
 */
function savedIdentity(key: string): Identity | null {
  const saved = sessionStorage.getItem(key);
  if (saved === null) return null;
  const o = JSON.parse(saved) as Record<string, string>;
  return { deviceId: BigInt(o["deviceId"]!), credential: fromHex(o["credential"]!),
           identitySeed: fromHex(o["identitySeed"]!),
           coordinatorPublic: fromHex(o["coordinatorPublic"]!) };
}

function saveIdentity(key: string, identity: Identity): void {
  sessionStorage.setItem(key, JSON.stringify({
    deviceId: identity.deviceId.toString(), credential: toHex(identity.credential),
    identitySeed: toHex(identity.identitySeed),
    coordinatorPublic: toHex(identity.coordinatorPublic) }));
}

async function runDevice(config: DemoConfig, i: number, view: DeviceView, books: BookLoader
): Promise<void> {
  const coordinator = new CoordinatorClient(connectTransport(config.coordinators[i]!));
  const own = aggregatorClient(connectTransport(config.aggregators[i]!));
  const key = `fedhh-demo/${config.session}/${i}`;
  let identity = savedIdentity(key);
  if (identity === null) {
    identity = await coordinator.enroll(config.tokens[i]!, `demo-${config.users[i]}`);
    saveIdentity(key, identity);
  }
  view.deviceId = identity.deviceId.toString();
  view.state = "enrolled";
  changed();
  const floors: Floors = { ...DEFAULT_FLOORS, minCohort: config.minCohort };
  const budget = await DeviceBudget.open(
    new IndexedDbBudgetStore("fedhh-demo", `${config.session}/${view.deviceId}`),
    floors.lifetimeEpsLocal, floors.budgetPeriodS);
  view.spent = budget.spent();  // kept across a reload
  const data = { items: config.items[i] ?? [], counts: config.counts[i] ?? [] };
  const memory = newTaskMemory();
  // The task names the aggregator's Connect URL; this device reaches it under its own name.
  const aggregatorFor = (webUrl: string) =>
    webUrl === config.aggregator ? own : aggregatorClient(connectTransport(webUrl));
  for (;;) {
    const result = await nextRound(coordinator, identity, {
      aggregatorFor, memory, floors,
      onCheckIn: () => {
        if (view.state !== "checking in") {
          view.state = "checking in"; view.task = ""; view.stage = ""; changed();
        }
      },
      onTask: (task) => {
        view.state = "in a round";
        view.task = `${task.runId} round ${task.round}.${task.attempt}`;
        view.stage = "checking the config";
        changed();
      },
      onStage: (stage) => { view.stage = STAGES[stage]; changed(); },
      report: (task) => reportForTask(task, data, budget, floors, books),
    });
    view.tasks.push({ task: `${result.runId} round ${result.round}.${result.attempt}`,
                      outcome: result.outcome, contributed: result.contributed,
                      detail: result.detail });
    view.spent = budget.spent();
    view.stage = "";
    changed();
  }
}

// ---- the page ----------------------------------------------------------------------------------
function cell(row: HTMLTableRowElement, text: string, className = ""): void {
  const td = row.insertCell();
  td.textContent = text;
  if (className) td.className = className;
}

function outcomeText(t: TaskView): string {
  if (t.contributed) return t.outcome === "completed" ? "contributed" : `contributed (${t.outcome})`;
  return t.detail ? `${t.outcome}: ${t.detail}` : t.outcome;
}

function render(): void {
  const body = document.querySelector("#devices tbody");
  if (body === null) return;
  body.replaceChildren();
  for (const v of views) {
    const row = (body as HTMLTableSectionElement).insertRow();
    row.dataset["state"] = v.state;
    cell(row, String(v.user));
    cell(row, v.deviceId || "–");
    cell(row, v.deviceId ? "yes" : v.state === "failed" ? "no" : "…");
    cell(row, v.state === "failed" ? v.error : v.state, `state-${v.state.replace(/ /g, "-")}`);
    cell(row, v.task ? `${v.task}: ${v.stage}` : "–");
    const last = v.tasks[v.tasks.length - 1];
    cell(row, last === undefined ? "–" : `${last.task}: ${outcomeText(last)}`,
         last === undefined ? "" : last.contributed ? "contributed" : "not-contributed");
    cell(row, String(v.tasks.filter((t) => t.contributed).length));
    cell(row, v.spent.toFixed(3));
  }
}

let renderPending = false;
function scheduleRender(): void {
  if (renderPending) return;
  renderPending = true;
  requestAnimationFrame(() => { renderPending = false; render(); });
}

let postTimer: ReturnType<typeof setTimeout> | undefined;
function schedulePost(): void {
  if (postTimer !== undefined) return;
  postTimer = setTimeout(() => {
    postTimer = undefined;
    fetch("status", { method: "POST", headers: { "Content-Type": "application/json" },
                      body: JSON.stringify({ devices: views }) }).catch(() => undefined);
  }, 300);
}

async function pollProgress(): Promise<void> {
  const out = document.getElementById("progress");
  for (;;) {
    try {
      const answer = await fetch("progress.json", { cache: "no-store" });
      if (answer.ok && out !== null) {
        const progress = await answer.json() as { lines: string[] };
        out.textContent = progress.lines.join("\n") || "waiting for the run to start";
      }
    } catch {
      if (out !== null) out.textContent += "\n(fedhh up is not answering)";
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

async function main(): Promise<void> {
  const config = await (await fetch("demo.json", { cache: "no-store" })).json() as DemoConfig;
  config.tokens.forEach((_, i) => views.push({
    user: config.users[i]!, deviceId: "", state: "enrolling", task: "", stage: "", tasks: [],
    spent: 0, error: "" }));
  changed();
  void pollProgress();
  // One loader for all: a trained book is fetched once (the loader keeps it).
  const books = fetchBooks(new URL(config.books, location.href).href);
  await Promise.all(views.map((view, i) => runDevice(config, i, view, books).catch((error: unknown) => {
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
