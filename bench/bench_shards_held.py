"""The SecAgg+ server's CPU per device when one process holds several shards' rounds at once.

A worker of the load test holds every shard it serves for the whole round: 1 shard of 2,500
devices at 5,000 devices and 2 workers, 10 at 50,000. Its CPU per device grows with n there
(docs/benchmarks.md). This benchmark takes the network out: one process holds S servers of N
devices each, as a worker does, and feeds them the devices' answers in one shuffled order across
the shards (as they arrive at a worker), each parsed from its wire bytes as the session stream
parses it; every stage's requests are encoded as the worker writes them and kept until the next
stage closes. What it times is the protocol's own server work: handling, closing the stages
(the dropped devices' masks removed), encoding and parsing. If its cost per device stays flat
in S, the growth of a worker is in the layer around it (streams, TLS, the event loop). A row
``S:in-turn`` feeds the shards one after the other instead (each in its own shuffled order): what
the interleaving alone costs.

The devices' answers are made once, by a real cohort (k and t as the coordinator chooses them:
a lying server, 10% dropout, 5% corrupt; the consistency check on; 10% of the devices drop
after sharing their keys, the most expensive point for the server), and written to a scratch
file; every S then runs in a fresh process, S values taking turns over the repeats.

Usage:
    .venv/bin/python bench/bench_shards_held.py            # 2,500 a shard; 1, 10, 10 in turn
    .venv/bin/python bench/bench_shards_held.py --shards 1,5,10,20 --repeats 5
    .venv/bin/python bench/bench_shards_held.py --out /tmp/shards-held.md
    .venv/bin/python bench/bench_shards_held.py --memory --devices 2000,5000   # bytes held

``--memory`` replays one shard under ``tracemalloc`` instead: for each stage, the bytes the
server and its requests hold per device once every answer is handled (the handling traced),
and during its close the peak above that and what is left, with the minor page faults of
the close (``ru_minflt``). Bytes a worker's streams, TLS and protobuf's arenas hold are not
in it (they are not the protocol's).
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reporting import publish, spread, take_turns  # noqa: E402

from fedhh.rpc.aggregator_wire import (  # noqa: E402
    RequestEncoder,
    RequestForm,
    keys_from_pb,
    keys_to_pb,
    request_from_pb,
    session_shares,
    session_unmask,
    shares_from_pb,
    unmask_from_pb,
)
from fedhh.rpc.serving import tune_gc  # noqa: E402
from fedhh.secagg import Stage  # noqa: E402
from fedhh.secagg.messages import (  # noqa: E402
    ConsistencyRequest,
    ConsistencyResponse,
    DeviceMessage,
    MaskedInput,
    MaskedInputRequest,
    ShareKeysRequest,
    UnmaskRequest,
)
from fedhh.secagg.params import Threat, choose_parameters  # noqa: E402
from fedhh.secagg.simulate import Cohort, make_cohort  # noqa: E402
from fedhh.v1 import aggregator_pb2 as pb  # noqa: E402
from fedhh_device.secagg_run import memoised_checks  # noqa: E402

OUT = ROOT / "docs" / "benchmarks" / "shards-held.md"
DIMENSION = 4096
DROPOUT = 0.1
SEED = 5
STAGES = (Stage.SHARE_KEYS, Stage.MASKED_INPUT, Stage.CONSISTENCY_CHECK, Stage.UNMASK)
# (the form the load test's devices take their requests in: device_stream.py's open)
DEVICE_FORM = RequestForm.PACKED_SHARES | RequestForm.SURVIVOR_BITS


def cohort_of(devices: int) -> Cohort:
    params = choose_parameters(devices, DROPOUT, 0.05, Threat.LYING)
    return make_cohort(devices, DIMENSION, params.k, params.t, n_min=devices // 2,
                       device_auth=True, consistency_check=True, seed=SEED)


def record(devices: int) -> dict[Stage, dict[int, bytes]]:
    """Every answer of one round's devices, as the wire bytes a worker receives."""
    cohort = cohort_of(devices)
    checks = memoised_checks()
    members = {u: cohort.device(u, checks=checks) for u in range(1, devices + 1)}
    dropped = set(np.random.default_rng(1).choice(
        np.arange(1, devices + 1), int(devices * DROPOUT), replace=False).tolist())
    server, encoder, sid = cohort.server(), RequestEncoder(), cohort.session_id
    answers: dict[Stage, dict[int, bytes]] = {Stage.ADVERTISE_KEYS: {}}
    for u, member in members.items():
        keys = member.advertise_keys()
        answers[Stage.ADVERTISE_KEYS][u] = keys_to_pb(keys).SerializeToString()
        server.handle(Stage.ADVERTISE_KEYS, keys)
    report = np.arange(0, DIMENSION, 7, dtype=np.int64)
    for stage in STAGES:
        answers[stage] = {}
        for u, request in sorted(server.close_stage().items()):
            if stage == Stage.MASKED_INPUT and u in dropped:
                continue
            received = request_from_pb(sid, u, pb.SessionEvent.FromString(
                encoder.event(stage, request, DEVICE_FORM)).next)
            member = members[u]
            answer: DeviceMessage
            if isinstance(received, ShareKeysRequest):
                answer = shared = member.share_keys(received)
                wire = session_shares(shared, True).SerializeToString()
            elif isinstance(received, MaskedInputRequest):
                answer = masked = member.masked_input(received, report)
                wire = masked.vector_bytes()
            elif isinstance(received, ConsistencyRequest):
                answer = signed = member.consistency_check(received)
                wire = signed.signature
            elif isinstance(received, UnmaskRequest):
                answer = unmasked = member.unmask(received)
                wire = session_unmask(unmasked, True).SerializeToString()
            else:
                raise AssertionError(f"no request for device {u} in {stage.name}")
            answers[stage][u] = wire
            server.handle(stage, answer)
    server.close_stage()
    if server.result is None:
        raise AssertionError("the recorded round did not release")
    return answers


def replay(devices: int, shards: int, interleaved: bool, answers: dict[Stage, dict[int, bytes]]
           ) -> dict[str, float]:
    """CPU per device of ``shards`` servers held at once, fed ``answers`` in one shuffled order
    across the shards (``interleaved``) or shard after shard (each shuffled)."""
    cohort = cohort_of(devices)
    sid, bits = cohort.session_id, cohort.config.modulus_bits

    def parse(stage: Stage, u: int, wire: bytes) -> DeviceMessage:
        if stage == Stage.ADVERTISE_KEYS:
            return keys_from_pb(sid, pb.DeviceKeys.FromString(wire))
        if stage == Stage.SHARE_KEYS:
            return shares_from_pb(u, pb.SessionMessage.FromString(wire).shares, sid)
        if stage == Stage.MASKED_INPUT:
            return MaskedInput.from_wire(sid, u, bytes(wire), bits)
        if stage == Stage.CONSISTENCY_CHECK:
            return ConsistencyResponse(sid, u, bytes(wire))
        return unmask_from_pb(u, pb.SessionMessage.FromString(wire).unmask, sid)

    tune_gc()  # (as a worker does once it serves)
    servers = [cohort.server() for _ in range(shards)]
    encoders = [RequestEncoder() for _ in servers]
    order = random.Random(7)
    cpu: dict[str, float] = {}
    pending: list[list[bytes]] = []  # (a worker's streams hold their requests until read)
    for stage in (Stage.ADVERTISE_KEYS, *STAGES, None):
        if stage != Stage.ADVERTISE_KEYS:
            pending = []
            for server, encoder in zip(servers, encoders, strict=True):
                start = time.thread_time()
                requests = server.close_stage()
                cpu["close"] = cpu.get("close", 0.0) + time.thread_time() - start
                if stage is not None:
                    start = time.thread_time()
                    pending.append([encoder.event(stage, r, DEVICE_FORM)
                                    for _, r in sorted(requests.items())])
                    cpu["encode"] = cpu.get("encode", 0.0) + time.thread_time() - start
        if stage is None:
            break
        arrivals = []
        for s in range(shards):
            mine = [(s, u) for u in answers[stage]]
            order.shuffle(mine)
            arrivals += mine
        if interleaved:
            order.shuffle(arrivals)
        start = time.thread_time()
        for s, u in arrivals:
            servers[s].handle(stage, parse(stage, u, answers[stage][u]))
        cpu["parse and handle"] = cpu.get("parse and handle", 0.0) + time.thread_time() - start
    if any(server.result is None for server in servers):
        raise AssertionError("a replayed round did not release")
    held = shards * devices
    out = {part: 1e6 * seconds / held for part, seconds in cpu.items()}
    out["total"] = sum(out.values())
    out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def held(devices: int, answers: dict[Stage, dict[int, bytes]]) -> dict[str, float]:
    """Bytes per device one shard's server holds (its state, and its requests, which a
    worker's streams read from it and encode as each is written), stage by stage, and the
    peak and minor page faults of each close (``--memory``)."""
    cohort = cohort_of(devices)
    sid, bits = cohort.session_id, cohort.config.modulus_bits
    server = cohort.server()
    out: dict[str, float] = {}
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for stage in (Stage.ADVERTISE_KEYS, *STAGES):
        for u, wire in answers[stage].items():
            message: DeviceMessage
            if stage == Stage.ADVERTISE_KEYS:
                message = keys_from_pb(sid, pb.DeviceKeys.FromString(wire))
            elif stage == Stage.SHARE_KEYS:
                message = shares_from_pb(u, pb.SessionMessage.FromString(wire).shares, sid)
            elif stage == Stage.MASKED_INPUT:
                message = MaskedInput.from_wire(sid, u, bytes(wire), bits)
            elif stage == Stage.CONSISTENCY_CHECK:
                message = ConsistencyResponse(sid, u, bytes(wire))
            else:
                message = unmask_from_pb(u, pb.SessionMessage.FromString(wire).unmask, sid)
            server.handle(stage, message)
        del message
        before = tracemalloc.get_traced_memory()[0]
        out[f"{stage.name} held"] = (before - base) / devices
        tracemalloc.reset_peak()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        requests = server.close_stage()
        out[f"{stage.name} close faults"] = (
            resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / devices
        current, peak = tracemalloc.get_traced_memory()
        out[f"{stage.name} close peak"] = (peak - before) / devices
        out[f"{stage.name} after close"] = (current - base) / devices
        del requests  # (the server keeps its own reference to each)
    server.close_stage()
    tracemalloc.stop()
    if server.result is None:
        raise AssertionError("the replayed round did not release")
    return out


def memory_report(sizes: list[int], out: Path) -> None:
    """``--memory``: one replay per size, in a fresh process each."""
    runs: dict[int, dict[str, float]] = {}
    for devices in sizes:
        start = time.perf_counter()
        answers = record(devices)
        made = time.perf_counter() - start
        with tempfile.NamedTemporaryFile(suffix=".pickle") as scratch:
            pickle.dump(answers, scratch)
            scratch.flush()
            child = subprocess.run(
                [sys.executable, __file__, "--devices", str(devices), "--replay", scratch.name,
                 "memory"], check=True, capture_output=True, text=True)
        runs[devices] = json.loads(child.stdout.strip().splitlines()[-1])
        print(f"{devices} devices: answers made in {made:.0f} s", file=sys.stderr)
    lines = [f"bench_shards_held --memory: one shard, D = {DIMENSION}, {DROPOUT:.0%} dropped "
             "after sharing keys; bytes per device traced by tracemalloc (the server, its "
             "messages and requests), minor page faults per device", "",
             "| devices | " + " | ".join(f"{s.name}: held, close peak, after, faults"
                                         for s in (Stage.ADVERTISE_KEYS, *STAGES)) + " |",
             "| --- | " + " | ".join("---" for _ in range(1 + len(STAGES))) + " |"]
    for devices, r in runs.items():
        cells = [f"{r[s.name + ' held']:,.0f}, {r[s.name + ' close peak']:,.0f}, "
                 f"{r[s.name + ' after close']:,.0f}, {r[s.name + ' close faults']:.1f}"
                 for s in (Stage.ADVERTISE_KEYS, *STAGES)]
        lines.append(f"| {devices:,} | " + " | ".join(cells) + " |")
    publish(lines, out)


def _variant(spec: str) -> tuple[int, bool]:
    """``"10"``: 10 shards, arrivals shuffled across them; ``"10:in-turn"``: shard after shard."""
    count, _, order = spec.partition(":")
    if order not in ("", "in-turn"):
        raise SystemExit(f"--shards: unknown order {order!r} (only 'in-turn')")
    return int(count), order == ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", default="2500",
                        help="devices per shard (2500; with --memory a list: 2000,5000)")
    parser.add_argument("--shards", default="1,10,10:in-turn",
                        help="shard counts to compare, N:in-turn for N shards fed one after "
                             "the other (1,10,10:in-turn)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each count (3)")
    parser.add_argument("--out", type=Path, default=OUT, help="report (docs/benchmarks/...)")
    parser.add_argument("--memory", action="store_true",
                        help="bytes held per device and each close's peak, by tracemalloc")
    parser.add_argument("--replay", nargs=2, metavar=("ANSWERS", "SHARDS"),
                        help=argparse.SUPPRESS)  # (one child run)
    args = parser.parse_args()
    sizes = [int(n) for n in args.devices.split(",")]
    if args.replay:
        with open(args.replay[0], "rb") as f:
            answers = pickle.load(f)  # (this benchmark's own scratch file)
        if args.replay[1] == "memory":
            print(json.dumps(held(sizes[0], answers)))
        else:
            print(json.dumps(replay(sizes[0], *_variant(args.replay[1]), answers)))
        return
    if args.memory:
        memory_report(sizes, args.out if args.out != OUT else OUT.with_name("worker-memory.md"))
        return
    args.devices = sizes[0]
    variants = args.shards.split(",")
    for spec in variants:
        _variant(spec)
    start = time.perf_counter()
    answers = record(args.devices)
    made = time.perf_counter() - start
    runs = take_turns(answers, lambda scratch, spec: [
        __file__, "--devices", str(args.devices), "--replay", scratch, spec],
        variants, args.repeats)
    parts = [p for p in runs[variants[0]][0] if p not in ("total", "peak_mib")]
    lines = [f"bench_shards_held: {args.devices} devices a shard, D = {DIMENSION}, "
             f"{DROPOUT:.0%} dropped after sharing keys; {args.repeats} fresh processes per "
             f"row, taking turns (answers made in {made:.0f} s); us of CPU per device, "
             "median (min-max)", "",
             "| shards held | arrivals | devices held | total | " + " | ".join(parts)
             + " | peak (MiB) |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in parts) + " | --- |"]
    for spec in variants:
        rows, (shards, interleaved) = runs[spec], _variant(spec)
        lines.append(f"| {shards} | {'shuffled' if interleaved else 'shard after shard'} | "
                     f"{shards * args.devices:,} | {spread([r['total'] for r in rows])} | "
                     + " | ".join(spread([r[p] for r in rows]) for p in parts)
                     + f" | {max(r['peak_mib'] for r in rows):.0f} |")
    publish(lines, args.out)


if __name__ == "__main__":
    main()
