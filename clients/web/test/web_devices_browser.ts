/**
 * test/web_devices.ts in a browser page (bundled to dist/browser/devices.js by `npm run
 * bundle`): the fleet's parameters come from `fleet.json` beside the page; progress goes to
 * `window.fedhhDevices` ({enrolled}, then {enrolled, results}, or {error}).
 */

import { type Fleet, runFleet } from "./web_devices.js";

const page = globalThis as unknown as { fedhhDevices?: Record<string, unknown> };
fetch("fleet.json").then(async (answer) => runFleet(await answer.json() as Fleet, (enrolled) => {
  page.fedhhDevices = { enrolled };
  document.body.textContent = `${enrolled} devices enrolled; checking in`;
})).then((results) => {
  page.fedhhDevices = { ...page.fedhhDevices, results };
  document.body.textContent = JSON.stringify(results);
}, (error: unknown) => {
  page.fedhhDevices = { error: String(error) };
  document.body.textContent = `error: ${String(error)}`;
});
