"""An enrollment retried while the write of its earlier call still waits for the store.

The store's write of an Enroll runs in a thread, off the event loop; a call that ends meanwhile
(its caller's deadline: the web device gives up after 30 s and sends the same request again)
does not stop that write. The retry's write must come after it: the store keeps the last
credential written for the device (``Store.add_device``'s reissue), and only the retry's answer
reaches the device. Before, the retry was written beside the earlier write, in the other
thread, and where it was stored first the earlier write replaced its credential with one nobody
holds: the device's every call was then refused UNAUTHENTICATED."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.rpc.device_users import enroll_request
from fedhh_coordinator import auth, service
from fedhh_coordinator.enrollment import OneTimeTokens, RateLimiter, mint
from fedhh_coordinator.service import DeviceService
from fedhh_coordinator.store import Store

# Only bounds a wait the old code's failure could leave hanging.
HELD_S = 60.0


class Context:
    def peer(self) -> str:
        return "ipv4:127.0.0.1:40000"

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise AssertionError(f"{code.name}: {details}")


class Writes(concurrent.futures.ThreadPoolExecutor):
    """The enrollments' threads, each write kept: the first held until released."""

    def __init__(self) -> None:
        super().__init__(2, thread_name_prefix="test-enroll")
        self.jobs: list[concurrent.futures.Future[Any]] = []
        self.first_entered = threading.Event()
        self.release_first = threading.Event()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        first = not self.jobs

        def write() -> Any:
            if first:
                self.first_entered.set()
                self.release_first.wait(HELD_S)
            return fn(*args, **kwargs)

        job = super().submit(write)
        self.jobs.append(job)
        return job


def test_a_retry_is_written_after_the_write_of_the_call_it_replaces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "coordinator.sqlite")
    [token] = mint(store, 1)
    writes = Writes()
    monkeypatch.setattr(service, "_ENROLLING", writes)
    devices = DeviceService(store, lobby=None, key=Ed25519PrivateKey.generate(),  # type: ignore[arg-type]
                            verifier=OneTimeTokens(), enroll_limit=RateLimiter(1e6, 1e6))
    request = enroll_request(Ed25519PrivateKey.generate(), token.encode(), "device")

    async def scenario() -> Any:
        first = asyncio.create_task(devices.Enroll(request, Context()))  # type: ignore[arg-type]
        await asyncio.to_thread(writes.first_entered.wait, HELD_S)
        first.cancel()  # (its caller's deadline: its write goes on in its thread)
        retry = asyncio.create_task(devices.Enroll(request, Context()))  # type: ignore[arg-type]
        for _ in range(10):  # (the retry's steps up to its write's submission, or its wait)
            await asyncio.sleep(0)
        if len(writes.jobs) == 2:
            # Written beside the first: let it be stored first, as it may be.
            await asyncio.wait([asyncio.wrap_future(writes.jobs[1])], timeout=HELD_S)
        writes.release_first.set()
        return await retry

    try:
        answer = asyncio.run(asyncio.wait_for(scenario(), 2 * HELD_S))
    finally:
        writes.release_first.set()
        writes.shutdown(wait=True)
    try:
        record = store.device(answer.device_id)
    finally:
        store.close()
    assert record is not None
    auth.verify_device(record[0], answer.credential)  # (AuthenticationError on the old code)
