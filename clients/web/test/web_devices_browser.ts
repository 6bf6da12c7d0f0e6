/**
 * test/web_devices.ts in a browser page (bundled to dist/browser/devices.js by `npm run
 * bundle`): the fleet's parameters come from `fleet.json` beside the page; progress goes to
 * `window.fedhhDevices`: {enrolled, tasks} (each device's ended tasks so far, as they end), then
 * {enrolled, tasks, results} (and `audit` when the fleet asks for one) once every device
 * stopped, or {error}. A fleet that runs until
 * stopped stops when the test calls `window.fedhhStop()`.
 */

import { type Fleet, type Timed, audit, runFleet } from "./web_devices.js";

const page = globalThis as unknown as { fedhhDevices?: Record<string, unknown>;
                                        fedhhStop?: () => void };
const stop = new AbortController();
page.fedhhStop = () => stop.abort(new Error("stopped by the test"));
const tasks: Timed[][] = [];
let audited = false;
fetch("fleet.json").then(async (answer) => {
  const fleet = await answer.json() as Fleet;
  audited = fleet.audit === true;
  tasks.push(...fleet.tokens.map(() => []));
  return runFleet(fleet, (enrolled) => {
    page.fedhhDevices = { enrolled, tasks };
    document.body.textContent = `${enrolled} devices enrolled; checking in`;
  }, stop.signal, (device, result) => tasks[device]!.push(result));
}).then((results) => {
  page.fedhhDevices = { ...page.fedhhDevices, results, ...(audited ? { audit: audit() } : {}) };
  document.body.textContent = JSON.stringify(results);
}, (error: unknown) => {
  page.fedhhDevices = { error: String(error) };
  document.body.textContent = `error: ${String(error)}`;
});
