"""While the store is slow (a file locked by another process for its busy timeout, a PostgreSQL
server failing over), enrollments and the operator's enrollment counts are back-pressured, not
queued without bound:

- an Enroll waits for the store off the event loop, at most ``ENROLLS_WAITING`` at once; one
  more is refused RESOURCE_EXHAUSTED at once ("retry in a few seconds"), and its device asks
  again. Before, each Enroll wrote the store on the event loop, holding every device's call
  for as long as the store took, and every enrollment the rate limit let in queued behind it;
- a burst of GetEnrollment calls runs one count (over every token ever minted) for all the
  callers that come while one runs, begun as it ends (a count begun before a caller came may
  miss the tokens it was just given). Before, each call queued a count of its own in the slow
  reads' threads, ahead of the admin API's and the dashboard's reads."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, ClassVar

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.rpc.device_users import enroll_request
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.enrollment import OneTimeTokens, RateLimiter, mint
from fedhh_coordinator.service import ENROLLS_WAITING, AdminService, DeviceService
from fedhh_coordinator.store import Store

TOKEN = b"admin-token-of-the-test"
# Only bounds the wait of a store call made where it must not be (the old code's failure).
HELD_S = 60.0


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code


class Context:
    """What the device and admin calls ask of a gRPC call's context."""

    def peer(self) -> str:
        return "ipv4:127.0.0.1:40000"

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {TOKEN.decode()}"),)

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


class Idle:
    progress: ClassVar[dict[str, Any]] = {}

    def progress_of(self, run_id: str) -> pb.Progress | None:
        return None


class SlowStore:
    """A store call that, off the event loop, waits until released; on the event loop (where
    nothing may wait for the store) it is counted and answers at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0
        self.on_loop = 0
        self.loop_thread: threading.Thread | None = None  # (set by the scenario, as it runs)
        self._count = threading.Lock()

    def wrap(self, call: Any) -> Any:
        def slow(*args: Any) -> Any:
            with self._count:
                self.calls += 1
            if threading.current_thread() is self.loop_thread:
                self.on_loop += 1
            else:
                self.release.wait(HELD_S)
            return call(*args)
        return slow


def test_enrollments_beyond_those_waiting_for_a_slow_store_are_refused_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "coordinator.sqlite")
    tokens = mint(store, ENROLLS_WAITING + 2)
    slow = SlowStore()
    monkeypatch.setattr(store, "add_device", slow.wrap(store.add_device))
    devices = DeviceService(store, lobby=None, key=Ed25519PrivateKey.generate(),  # type: ignore[arg-type]
                            verifier=OneTimeTokens(), enroll_limit=RateLimiter(1e6, 1e6))
    requests = [enroll_request(Ed25519PrivateKey.generate(), token.encode(), f"device {i}")
                for i, token in enumerate(tokens)]

    async def scenario() -> tuple[grpc.StatusCode | None, list[pb.EnrollResponse],
                                  pb.EnrollResponse]:
        slow.loop_thread = threading.current_thread()
        waiting = [asyncio.create_task(devices.Enroll(request, Context()))  # type: ignore[arg-type]
                   for request in requests[:ENROLLS_WAITING]]
        await asyncio.sleep(0)  # (each at its store call)
        refused = None
        try:
            await devices.Enroll(requests[ENROLLS_WAITING], Context())  # type: ignore[arg-type]
        except Aborted as error:
            refused = error.code
        finally:
            slow.release.set()
        enrolled = await asyncio.gather(*waiting)
        return refused, enrolled, await devices.Enroll(requests[-1], Context())  # type: ignore[arg-type]

    try:
        refused, enrolled, later = asyncio.run(asyncio.wait_for(scenario(), 2 * HELD_S))
    finally:
        slow.release.set()
        store.close()
    assert slow.on_loop == 0
    assert refused is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert slow.calls == ENROLLS_WAITING + 1  # (the refused one never reached the store)
    assert len({e.device_id for e in [*enrolled, later]}) == ENROLLS_WAITING + 1


def test_a_burst_of_enrollment_counts_runs_one_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "coordinator.sqlite")
    mint(store, 3)
    slow = SlowStore()
    monkeypatch.setattr(store, "enrollment", slow.wrap(store.enrollment))
    admin = AdminService(store, Idle(), TOKEN, LifetimeBudget())  # type: ignore[arg-type]
    burst = 200

    async def scenario() -> list[pb.Enrollment]:
        slow.loop_thread = threading.current_thread()
        calls = [asyncio.create_task(admin.GetEnrollment(pb.GetEnrollmentRequest(),
                                                         Context()))  # type: ignore[arg-type]
                 for _ in range(burst)]
        await asyncio.sleep(0)  # (each call asked for its count)
        slow.release.set()
        return await asyncio.gather(*calls)

    try:
        answers = asyncio.run(asyncio.wait_for(scenario(), 2 * HELD_S))
    finally:
        slow.release.set()
        store.close()
    # (the first caller's count, and one for the 199 that came while it ran)
    assert slow.calls == 2, slow.calls
    assert [a.tokens_unused for a in answers] == [3] * burst


def test_a_count_asked_after_a_mint_counts_its_tokens(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GetEnrollment asked once a mint was answered joins no count begun before it: the count
    under way read the store before the mint, and the caller would be told the tokens it had
    just been given were not there. It waits for the next count, which the callers that came
    meanwhile share."""
    store = Store(tmp_path / "coordinator.sqlite")
    mint(store, 3)
    read_before = threading.Event()
    answer_first = threading.Event()
    count = store.enrollment
    counts = [0]

    def enrollment(*args: Any) -> Any:
        counts[0] += 1
        counted = count(*args)
        if counts[0] == 1:  # (the count under way: read, not yet answered)
            read_before.set()
            answer_first.wait(HELD_S)
        return counted

    monkeypatch.setattr(store, "enrollment", enrollment)
    admin = AdminService(store, Idle(), TOKEN, LifetimeBudget())  # type: ignore[arg-type]

    async def scenario() -> tuple[pb.Enrollment, list[pb.Enrollment]]:
        under_way = asyncio.create_task(admin.GetEnrollment(pb.GetEnrollmentRequest(),
                                                            Context()))  # type: ignore[arg-type]
        await asyncio.to_thread(read_before.wait, HELD_S)
        mint(store, 2)
        after = [asyncio.create_task(admin.GetEnrollment(pb.GetEnrollmentRequest(),
                                                         Context()))  # type: ignore[arg-type]
                 for _ in range(3)]
        await asyncio.sleep(0)  # (each asked)
        answer_first.set()
        return await under_way, await asyncio.gather(*after)

    try:
        first, later = asyncio.run(asyncio.wait_for(scenario(), 2 * HELD_S))
    finally:
        answer_first.set()
        store.close()
    assert first.tokens_unused == 3
    assert [a.tokens_unused for a in later] == [5] * 3  # (3 each on the old code)
    assert counts[0] == 2  # (one count for the three that came while the first ran)
