/**
 * test/wire_probe.ts in a browser page (bundled to dist/browser/wire.js by `npm run bundle`):
 * the probe's parameters come from `probe.json` beside the page, the result goes to
 * `window.fedhhWire` (tests/web/test_web_wire.py reads it through chromedriver). The calls
 * are cross-origin, so the services' CORS answers are part of what it checks.
 */

import { type Probe, runProbe } from "./wire_probe.js";

const page = globalThis as unknown as { fedhhWire?: Record<string, unknown> };
fetch("probe.json").then(async (answer) => runProbe(await answer.json() as Probe)).then((out) => {
  page.fedhhWire = out;
  document.body.textContent = JSON.stringify(out);
}, (error: unknown) => {
  page.fedhhWire = { error: String(error) };
  document.body.textContent = `error: ${String(error)}`;
});
