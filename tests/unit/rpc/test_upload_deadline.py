"""A device's masked-vector call leaves its body the time the aggregator gives an upload (the
next message within UPLOAD_IDLE_S, then UPLOAD_MIN_RATE bytes/s): before, the deadline was the
answer's hold and call_timeout alone (30 s), so a vector of 4 MiB over a 1 Mbit/s link was cut
by the device itself and sent again, whole, until its stage closed."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.rpc.aggregator_wire import CHUNK_BYTES, UPLOAD_IDLE_S, UPLOAD_MIN_RATE
from fedhh.rpc.device_client import DeviceSession
from fedhh.secagg.config import Admission
from fedhh.v1 import aggregator_pb2 as pb


class _Stub:
    """Records each call's deadline and accepts it (the body is drained as a channel would)."""

    def __init__(self) -> None:
        self.deadlines: dict[str, float] = {}

    async def SubmitMaskedVector(self, vector: pb.MaskedVector, timeout: float) -> Any:
        self.deadlines["SubmitMaskedVector"] = timeout
        return pb.SubmitResponse(accepted=True)

    async def SubmitMaskedInput(self, chunks: Any, timeout: float) -> Any:
        self.deadlines["SubmitMaskedInput"] = timeout
        async for _ in chunks:
            pass
        return pb.SubmitResponse(accepted=True)


@pytest.mark.parametrize("size, call", [(256 << 10, "SubmitMaskedVector"),
                                        (4 << 20, "SubmitMaskedInput")])
def test_the_deadline_covers_the_upload_at_the_aggregators_least_rate(size: int,
                                                                       call: str) -> None:
    stub = _Stub()
    device = SimpleNamespace(session_id=b"s" * 32, device_id=3)
    admission = Admission(device_id=3, identity_key=b"i" * 32, c_pk=b"c" * 32, s_pk=b"p" * 32,
                          proof=b"")
    session = DeviceSession(stub, device, Ed25519PrivateKey.generate(), admission,  # type: ignore[arg-type]
                            call_timeout=30.0)
    message = SimpleNamespace(vector_bytes=lambda: b"\0" * size)
    assert (size <= CHUNK_BYTES) == (call == "SubmitMaskedVector")
    assert asyncio.run(session.submit_masked_input(message, wait_next_ms=2000))  # type: ignore[arg-type]
    expected = 2.0 + 30.0 + UPLOAD_IDLE_S + size / UPLOAD_MIN_RATE
    assert stub.deadlines == {call: pytest.approx(expected)}
    if call == "SubmitMaskedInput":
        assert stub.deadlines[call] > 64  # 4 MiB at 64 KiB/s alone takes 64 s


def test_the_aggregators_defaults_are_the_ones_devices_allow_for() -> None:
    from fedhh_aggregator.rounds import Limits

    assert (Limits().upload_idle_s, Limits().upload_min_rate) == (UPLOAD_IDLE_S, UPLOAD_MIN_RATE)
