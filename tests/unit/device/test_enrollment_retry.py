"""A device whose Enroll answer is lost on the way (the coordinator enrolled it, the connection
was cut before the answer arrived) retries the same request and is enrolled: before, the retry
was ALREADY_EXISTS, the process exited with no identity saved, and its token was spent for
good. Served in this process by the coordinator's own DeviceService on a port from the OS."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.rpc import serving
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_coordinator import auth
from fedhh_coordinator.enrollment import OneTimeTokens, RateLimiter, mint
from fedhh_coordinator.service import DeviceService
from fedhh_coordinator.store import Store
from fedhh_device.fleet import Fleet
from fedhh_device.report import DeviceData


class AnswersLostOnce(pb_grpc.DeviceServiceServicer):
    """The coordinator's Enroll, whose first answer never reaches the device."""

    def __init__(self, devices: DeviceService) -> None:
        self.devices = devices
        self.calls = 0

    async def Enroll(self, request: pb.EnrollRequest, context: Any) -> pb.EnrollResponse:
        self.calls += 1
        response = await self.devices.Enroll(request, context)
        if self.calls == 1:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "connection cut (the test's)")
        return response


class ShedOnce(AnswersLostOnce):
    """The coordinator's Enroll, whose first call is shed unanswered (CANCELLED, as gRPC core
    sheds the calls past a full backlog before any handler runs)."""

    async def Enroll(self, request: pb.EnrollRequest, context: Any) -> pb.EnrollResponse:
        self.calls += 1
        if self.calls == 1:
            await context.abort(grpc.StatusCode.CANCELLED, "shed (the test's)")
        return await self.devices.Enroll(request, context)


async def enroll_through_a_lost_answer(store: Store, token: str, state_dir: Path,
                                       servicer: type[AnswersLostOnce] = AnswersLostOnce
                                       ) -> Fleet:
    devices = DeviceService(store, lobby=None, key=Ed25519PrivateKey.generate(),  # type: ignore[arg-type]
                            verifier=OneTimeTokens(), enroll_limit=RateLimiter(100.0, 100))
    lossy = servicer(devices)
    server = serving.new_server()
    pb_grpc.add_DeviceServiceServicer_to_server(lossy, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        user = DeviceData(("word",), np.ones(1, dtype=np.int64))
        fleet = Fleet([(7, user)], channel, {7: token}, grpc.aio.insecure_channel,
                      state_dir=state_dir, seed=1)
        await fleet.enroll_all()
    finally:
        await channel.close()
        await server.stop(None)
    assert lossy.calls == 2
    return fleet


@pytest.mark.parametrize("servicer", [AnswersLostOnce, ShedOnce])
def test_a_device_whose_enroll_answer_was_lost_enrolls_on_its_retry(
        tmp_path: Path, servicer: type[AnswersLostOnce]) -> None:
    """Also a first call shed CANCELLED (the coordinator's backlog full, as when a crowd of
    devices enrolls at once): the device pauses as after a shed GetTask and calls again.
    Before, the enrolment retried UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED only,
    and a shed call ended it with the error, though its pause was sized for a shed call."""
    store = Store(tmp_path / "c.sqlite")
    token, = mint(store, 1)
    asyncio.run(enroll_through_a_lost_answer(store, token, tmp_path / "state", servicer))
    saved = json.loads((tmp_path / "state" / "devices.json").read_text())
    identity = saved["7"]
    record = store.device(identity["device_id"])
    assert record is not None
    # The credential the retry brought is the one the coordinator now accepts, for the one
    # device the token enrolled.
    auth.verify_device(record[0], bytes.fromhex(identity["credential"]))
    assert [d for d in range(1, 4) if store.device(d) is not None] == [identity["device_id"]]
