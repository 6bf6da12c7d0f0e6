"""A device process whose devices' credentials the coordinator rejects (its state reset, or the
--state-dir another deployment's) fails, naming them and the remedy, after one error line: it
logged one error per device and ended with nothing running and status 0, so a supervisor
restarted it into the same rejections."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.errors import ConfigError
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device.fleet import Fleet, Identity
from fedhh_device.report import DeviceData

USERS = 7


class Forgotten:
    """A coordinator that knows none of the devices' credentials."""

    def __init__(self, known: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.known = known
        self.calls = 0

    async def GetTask(self, request: pb.GetTaskRequest, metadata: Any = None
                      ) -> pb.GetTaskResponse:
        self.calls += 1
        if request.device_id in self.known:
            await asyncio.Event().wait()  # (a long-poll held until the fleet stops)
        raise grpc.aio.AioRpcError(grpc.StatusCode.UNAUTHENTICATED, grpc.aio.Metadata(),
                                   grpc.aio.Metadata(), details="unknown device or credential")


def _fleet(coordinator: Forgotten, state_dir: Path) -> Fleet:
    data = DeviceData(("word",), np.ones(1, dtype=np.int64))
    fleet = Fleet([(u, data) for u in range(USERS)], coordinator, {}, lambda address: None,
                  state_dir=state_dir, seed=1)
    for user in range(USERS):
        fleet._identities[user] = Identity(100 + user, b"credential",
                                           Ed25519PrivateKey.generate(), b"")
    return fleet


def test_every_credential_rejected_fails_the_process_with_one_error_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    coordinator = Forgotten()
    fleet = _fleet(coordinator, tmp_path / "state")
    caplog.set_level(logging.DEBUG, "fedhh_device.fleet")
    with pytest.raises(ConfigError) as raised:
        asyncio.run(asyncio.wait_for(fleet.run(), 60))
    message = str(raised.value)
    assert message.startswith("the coordinator rejected the credentials of 7 devices "
                              "(users 0, 1, 2, 3, 4, ...): unknown device or credential."), message
    assert f"{tmp_path / 'state' / 'devices.json'} holds identities the coordinator never " \
           "enrolled or has forgotten" in message
    assert "mint-tokens --users" in message
    assert coordinator.calls == USERS  # (each device asked once, then stopped)
    rejected = [r for r in caplog.records if r.getMessage() == "device credential rejected"]
    assert [r.levelno for r in rejected].count(logging.ERROR) == 1
    assert len(rejected) == USERS  # (the others at debug: nothing hidden)


def test_devices_still_running_keep_the_process_up(tmp_path: Path) -> None:
    coordinator = Forgotten(known={103})  # user 3's device is known
    fleet = _fleet(coordinator, tmp_path / "state")

    async def run() -> None:
        running = asyncio.ensure_future(fleet.run())
        for _ in range(10_000):  # (until the six others have been rejected)
            if len(fleet._rejected) == USERS - 1:
                break
            await asyncio.sleep(0)
        assert sorted(fleet._rejected) == [0, 1, 2, 4, 5, 6]
        assert not running.done()
        fleet.stop.set()  # asked to stop: not a failure
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    asyncio.run(run())
