/**
 * `node dist/test/web_devices_node.js '<json>'`: test/web_devices.ts in Node; one line
 * `{"enrolled": n}` on stdout once enrolled, then `{"results": [...]}` (and `"audit"`, the
 * fleet's `audit()`, when the fleet asks for one).
 */

import { type Fleet, audit, runFleet } from "./web_devices.js";

const fleet = JSON.parse(process.argv[2] ?? "{}") as Fleet;
runFleet(fleet, (enrolled) => {
  process.stdout.write(`${JSON.stringify({ enrolled })}\n`);
}).then((results) => {
  process.stdout.write(`${JSON.stringify(fleet.audit === true ? { results, audit: audit() }
                                         : { results })}\n`);
}, (error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  process.exit(1);
});
