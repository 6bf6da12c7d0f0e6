"""The key-sharing stage's rosters at a shard's size: bytes a device receives, a worker's CPU to
make and encode them, a device's CPU to parse and check one.

One process holds one shard's server (device_auth, the consistency check, D = 4096, k and t
fixed as below), takes every member's advertised keys (the stage-0 handling: each admission's
Merkle proof checked), closes the stage (the rosters and their proofs made) and encodes every
share-keys request as a worker writes it; then a sample of up to 300 devices parses its request
from those bytes and checks its roster (`SecAggDevice._check_roster`: the ids against the
signed graph, the keys, and the roster's Merkle multiproof; the rest of `share_keys`, Shamir
and AES-GCM, does not depend on how the roster is proven). Thread CPU time, so a busy machine
moves it less than wall time. The cohort (its Ed25519 and X25519 keys) is made first, untimed:
a minute or so at 25,000.

Usage:
    .venv/bin/python bench/bench_roster_proofs.py                      # 2,500 (k 88), 25,000 (k 98)
    .venv/bin/python bench/bench_roster_proofs.py --shards 2500:88 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fedhh.rpc.aggregator_wire import RequestEncoder, request_from_pb  # noqa: E402
from fedhh.secagg.messages import AdvertiseKeys, ShareKeysRequest, Stage  # noqa: E402
from fedhh.secagg.simulate import make_cohort  # noqa: E402
from fedhh.v1 import aggregator_pb2 as pb  # noqa: E402

SAMPLE = 300


def measure(n: int, k: int) -> dict[str, float]:
    cohort = make_cohort(n, 4096, k, k // 2 + 1, n_min=n // 2, device_auth=True,
                         consistency_check=True, seed=7)
    server = cohort.server()
    sample = list(range(1, n + 1, max(1, n // SAMPLE)))[:SAMPLE]
    devices = {u: cohort.device(u) for u in sample}
    adverts = []
    for u in range(1, n + 1):
        a = cohort.admissions[u]
        adverts.append(devices[u].advertise_keys() if u in devices
                       else AdvertiseKeys(server.session_id, u, a.c_pk, a.s_pk, a))
    t0 = time.thread_time()
    for advert in adverts:
        server.handle(Stage.ADVERTISE_KEYS, advert)
    t1 = time.thread_time()
    requests = server.close_stage()
    t2 = time.thread_time()
    encoder = RequestEncoder()
    encoded = {u: encoder.ready(r) for u, r in requests.items()}
    t3 = time.thread_time()
    parse, check = [], []
    for u in sample:
        s0 = time.thread_time()
        answer = pb.AwaitStageResponse.FromString(encoded[u])
        request = request_from_pb(server.session_id, u, answer)
        s1 = time.thread_time()
        assert isinstance(request, ShareKeysRequest)
        devices[u]._check_roster(request)
        parse.append(s1 - s0)
        check.append(time.thread_time() - s1)
    us = 1e6
    return {"bytes": statistics.mean(map(len, encoded.values())),
            "handle": (t1 - t0) / n * us, "close": (t2 - t1) / n * us,
            "encode": (t3 - t2) / n * us,
            "parse": statistics.median(parse) * us, "check": statistics.median(check) * us}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", default="2500:88,25000:98",
                        help="shard sizes and their k, n:k,... (2500:88,25000:98)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each (1)")
    args = parser.parse_args()
    print("| shard (n, k) | request bytes | worker us a device: handle, close, encode "
          "| device us: parse, roster check |")
    print("| --- | --- | --- | --- |")
    for _ in range(args.repeats):
        for shape in args.shards.split(","):
            n, k = map(int, shape.split(":"))
            m = measure(n, k)
            print(f"| {n:,}, {k} | {m['bytes']:,.0f} | {m['handle']:.1f}, {m['close']:.1f}, "
                  f"{m['encode']:.1f} | {m['parse']:.0f}, {m['check']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
