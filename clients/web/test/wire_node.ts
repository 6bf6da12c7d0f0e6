/** `node dist/test/wire_node.js '<json>'`: test/wire_probe.ts in Node, one JSON line out. */

import { type Probe, runProbe } from "./wire_probe.js";

runProbe(JSON.parse(process.argv[2] ?? "{}") as Probe).then((out) => {
  process.stdout.write(`${JSON.stringify(out)}\n`);
}, (error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  process.exit(1);
});
