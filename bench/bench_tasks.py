"""Benchmark of a cohort's tasks: what the coordinator spends per member to make them, and a
device to verify its own.

The coordinator signs a cohort's shared part once (``fedhh.rpc.tasks.CohortTasks``); before,
it signed each member's whole task (shared part || own fields, under the old context), which
is kept here as the reference. The device verifies the shared signature and checks its own
part (``verify_task``); a load test's device process memoises the verification per cohort, as
``Fleet`` does. Each figure is CPU time (``time.process_time``) per member, the two ways of
making the tasks alternated, over a shard of ``--members`` with a task as a load test's round
has it (no prefixes yet, the round config and its signature, the addresses, a 12-hash proof).

Usage:
    .venv/bin/python bench/bench_tasks.py [--members 2500] [--repeats 5]
        # -> docs/benchmarks/tasks.md
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reporting import publish, spread  # noqa: E402

from fedhh.rpc.tasks import CohortTasks, verify_task  # noqa: E402
from fedhh.secagg.primitives import ed25519_verify  # noqa: E402
from fedhh.v1 import coordinator_pb2 as pb  # noqa: E402

OUT = ROOT / "docs" / "benchmarks" / "tasks.md"
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
PUBLIC = KEY.public_key().public_bytes_raw()
SHARED = pb.Task(run_id="load", round=1, attempt=1, segment_bits=12, eps_local=4.0,
                 codec="5bit", max_bits=60, selection="uniform",
                 aggregator_address="127.0.0.1:40000",
                 aggregator_session_address="127.0.0.1:40001", round_config=bytes(180),
                 round_config_signature=bytes(64), deadline_unix_ms=1_700_000_000_000)
PROOF = bytes(32 * 12)


def signed_per_member(members: int) -> list[tuple[bytes, bytes]]:
    """The reference: each member's whole task signed (the coordinator before 43d5e71)."""
    shared = SHARED.SerializeToString()
    tasks = []
    for device_id in range(1, members + 1):
        own = pb.Task(device_id=device_id, secagg_id=device_id, admission=PROOF)
        payload = shared + own.SerializeToString()
        tasks.append((payload, KEY.sign(b"fedhh/v1/task" + payload)))
    return tasks


def signed_per_cohort(members: int) -> list[pb.SignedTask]:
    cohort = CohortTasks(SHARED, KEY)
    return [cohort.task(device_id, device_id, PROOF) for device_id in range(1, members + 1)]


def verify_all(tasks: list[pb.SignedTask], verify: Callable[[bytes, bytes, bytes], bool]
               ) -> None:
    for device_id, task in enumerate(tasks, start=1):
        verify_task(task, PUBLIC, device_id, verify)


def per_member_us(call: Callable[[], object], members: int) -> float:
    started = time.process_time()
    call()
    return (time.process_time() - started) / members * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=2500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n = args.members
    before, after, verified, memoised = [], [], [], []
    tasks = signed_per_cohort(n)
    for _ in range(args.repeats):
        before.append(per_member_us(lambda: signed_per_member(n), n))
        after.append(per_member_us(lambda: signed_per_cohort(n), n))
        verified.append(per_member_us(functools.partial(verify_all, tasks, ed25519_verify), n))
        memoised.append(per_member_us(functools.partial(
            verify_all, tasks, functools.lru_cache(maxsize=256)(ed25519_verify)), n))
    rows = [("coordinator: each member's task signed (before)", before),
            ("coordinator: the shared part signed once per cohort", after),
            ("device: its task verified", verified),
            ("device: verified with a per-process memo (a load test)", memoised)]
    lines = [f"# A cohort's tasks ({n} members, {len(tasks[0].task)}-byte task)", "",
             "`.venv/bin/python bench/bench_tasks.py` (CPU us per member; median, min-max of "
             f"{args.repeats})", "", "| what | us per member |", "| --- | --- |"]
    lines += [f"| {label} | {spread(values)} |" for label, values in rows]
    publish(lines, OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
