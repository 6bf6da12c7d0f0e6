/**
 * `node dist/test/web_devices_node.js '<json>'`: test/web_devices.ts in Node; one line
 * `{"enrolled": n}` on stdout once enrolled, then `{"results": [...]}`.
 */

import { type Fleet, runFleet } from "./web_devices.js";

runFleet(JSON.parse(process.argv[2] ?? "{}") as Fleet, (enrolled) => {
  process.stdout.write(`${JSON.stringify({ enrolled })}\n`);
}).then((results) => {
  process.stdout.write(`${JSON.stringify({ results })}\n`);
}, (error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  process.exit(1);
});
