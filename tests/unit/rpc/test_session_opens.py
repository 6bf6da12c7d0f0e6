"""A fleet's session streams open a bounded number at a time: the devices of one process that
start their rounds together do not all wait for their challenges at once (each must answer
its aggregator within --upload-idle-ms), and the others start theirs as turns free up."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.rpc.aggregator_wire import CHALLENGE_BYTES
from fedhh.rpc.device_stream import SessionStream
from fedhh.rpc.participation import RetryPolicy
from fedhh.secagg.config import Admission
from fedhh.v1 import aggregator_pb2 as pb

STREAMS = 12
IN_FLIGHT = 3


class Aggregator:
    """Session streams whose challenge comes only when the test releases it, counting the
    streams started and not yet answered."""

    def __init__(self) -> None:
        self.opening = 0
        self.most_opening = 0
        self.opened: list[int] = []
        self.release = asyncio.Queue[None]()

    def Session(self, timeout: float) -> Any:
        self.opening += 1
        self.most_opening = max(self.most_opening, self.opening)
        return Call(self)


class Call:
    def __init__(self, aggregator: Aggregator) -> None:
        self.aggregator = aggregator

    async def read(self) -> pb.SessionEvent:
        await self.aggregator.release.get()
        return pb.SessionEvent(challenge=bytes(CHALLENGE_BYTES))

    async def write(self, message: pb.SessionMessage) -> None:
        assert message.WhichOneof("part") == "open"
        self.aggregator.opening -= 1
        self.aggregator.opened.append(message.open.admission.device_id)

    def cancel(self) -> None:
        pass


def stream(aggregator: Aggregator, device_id: int, opening: asyncio.Semaphore | None
           ) -> SessionStream:
    key = Ed25519PrivateKey.generate()
    admission = Admission(device_id, key.public_key().public_bytes_raw(), bytes(32),
                          bytes(32), b"")
    device = SimpleNamespace(session_id=bytes(16))
    return SessionStream(aggregator, device, key, admission,  # type: ignore[arg-type]
                         RetryPolicy(), random.Random(0), ends_at=1e12, observe=None,
                         opening=opening)


async def open_all(opening: asyncio.Semaphore | None) -> Aggregator:
    aggregator = Aggregator()
    streams = [stream(aggregator, i, opening) for i in range(STREAMS)]
    tasks = [asyncio.create_task(s._ensure_open()) for s in streams]
    # Challenges come one at a time, each once some stream waits for one.
    for _ in range(STREAMS):
        while aggregator.opening == 0:
            await asyncio.sleep(0)
        aggregator.release.put_nowait(None)
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    return aggregator


def test_at_most_the_fleets_bound_of_streams_wait_for_their_challenge_at_once() -> None:
    aggregator = asyncio.run(open_all(asyncio.Semaphore(IN_FLIGHT)))
    assert aggregator.most_opening == IN_FLIGHT
    assert sorted(aggregator.opened) == list(range(STREAMS))  # and every one opened


def test_a_lone_device_opens_without_a_bound() -> None:
    aggregator = asyncio.run(open_all(None))
    assert aggregator.most_opening == STREAMS
    assert sorted(aggregator.opened) == list(range(STREAMS))
