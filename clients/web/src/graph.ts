/**
 * The neighbour graph of fedhh/secagg/graph.py: a Harary graph H(k, n) on a ring ordered by a
 * permutation the signed graph_seed commits to.
 *
 * The ring order: HKDF(graph_seed, salt = empty, info = graph label || u32(n)) keys AES-128-CTR
 * (zero counter block); its keystream gives one little-endian uint64 per device, and a stable
 * sort of those values orders the device ids 1..n on the ring. Each device is linked to the k/2
 * devices on each side; k = n - 1 is the complete graph. A device derives its own neighbours
 * from the config and rejects any other id in its roster.
 */

import { concat, u32 } from "./bytes.js";
import { LABELS, hkdf } from "./primitives.js";

export class GraphError extends Error {
  override name = "GraphError";
}

/** Throws unless H(k, n) is defined: 1 <= k <= n - 1, k even or k = n - 1. */
export function checkGraphParameters(n: number, k: number): void {
  if (!Number.isInteger(n) || n < 2) throw new GraphError(`the cohort needs at least 2 devices, got n=${n}`);
  if (!Number.isInteger(k) || k < 1 || k > n - 1) {
    throw new GraphError(`k must be in [1, n-1] = [1, ${n - 1}], got ${k}`);
  }
  if (k % 2 === 1 && k !== n - 1) {
    throw new GraphError(`k must be even (or n-1 for the complete graph), got ${k}`);
  }
}

/** The device id (1..n) at each ring position. */
export async function ringOrder(graphSeed: Uint8Array, n: number): Promise<number[]> {
  if (graphSeed.length !== 32) throw new GraphError(`graph_seed must be 32 bytes, got ${graphSeed.length}`);
  const key = await hkdf(graphSeed, new Uint8Array(0), concat(LABELS.graph, u32(n)), 16);
  const aes = await globalThis.crypto.subtle.importKey("raw", key, "AES-CTR", false, ["encrypt"]);
  const stream = await globalThis.crypto.subtle.encrypt(
    { name: "AES-CTR", counter: new Uint8Array(16), length: 128 }, aes, new Uint8Array(8 * n));
  const view = new DataView(stream);
  const values = Array.from({ length: n }, (_, i) => view.getBigUint64(8 * i, true));
  // Array.prototype.sort is stable (ES2019), as numpy's argsort(kind="stable").
  const ids = Array.from({ length: n }, (_, i) => i);
  ids.sort((a, b) => (values[a]! < values[b]! ? -1 : values[a]! > values[b]! ? 1 : 0));
  return ids.map((i) => i + 1);
}

function offsets(k: number): number[] {
  const half = Math.floor(k / 2);
  const out: number[] = [];
  for (let d = -half; d <= half; d++) if (d !== 0) out.push(d);
  return out;
}

/** The ascending neighbour ids of `deviceId`: what a device checks its roster against. */
export async function neighboursOf(graphSeed: Uint8Array, n: number, k: number,
                                   deviceId: number): Promise<number[]> {
  checkGraphParameters(n, k);
  if (!Number.isInteger(deviceId) || deviceId < 1 || deviceId > n) {
    throw new GraphError(`device_id must be in [1, ${n}], got ${deviceId}`);
  }
  if (k === n - 1) return Array.from({ length: n }, (_, i) => i + 1).filter((i) => i !== deviceId);
  const order = await ringOrder(graphSeed, n);
  const position = order.indexOf(deviceId);
  return offsets(k).map((d) => order[(((position + d) % n) + n) % n]!).sort((a, b) => a - b);
}

/**
 * True iff `survivors` (distinct ids in 1..n) induce a connected subgraph of H(k, n): at most
 * one gap between ring-consecutive survivors exceeds k/2 (the proof is in graph.py).
 */
export async function survivorsConnected(graphSeed: Uint8Array, n: number, k: number,
                                         survivors: readonly number[]): Promise<boolean> {
  checkGraphParameters(n, k);
  if (k === n - 1) return true;
  if (survivors.length <= 1) return true;
  const order = await ringOrder(graphSeed, n);
  const position = new Array<number>(n + 1);
  order.forEach((id, p) => { position[id] = p; });
  const ring = survivors.map((id) => position[id]!).sort((a, b) => a - b);
  let wide = 0;
  for (let i = 0; i < ring.length; i++) {
    const next = i + 1 < ring.length ? ring[i + 1]! : ring[0]! + n;
    if (next - ring[i]! > Math.floor(k / 2)) wide++;
  }
  return wide <= 1;
}
