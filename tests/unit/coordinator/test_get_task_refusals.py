"""One GetTask of a device at a time (``DeviceService.GetTask``): a second on the same
connection is refused, and a refused call changes nothing: the round keys a device owns stay
those of its last call that was taken. Before, the keys were claimed before the call's other
checks, so a call refused for its ``known_task`` or for a GetTask of the device already
waiting made its keys the device's and let the keys of the waiting call go: another device
could then present those. A GetTask on another connection replaces the waiting one (the
device reconnected: its old connection may have died without a reset, which the service does
not see)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import numpy as np
import pytest

from fedhh.rpc.procedures import CallAbort, CallContext
from fedhh.secagg import RoundKeys
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator import auth
from fedhh_coordinator.keys import COPIED, KeyOwners
from fedhh_coordinator.service import DeviceService

CREDENTIALS = {1: b"\x01" * 32, 2: b"\x02" * 32}


class Store:
    def device(self, device_id: int) -> tuple[bytes] | None:
        credential = CREDENTIALS.get(device_id)
        return None if credential is None else (auth.credential_hash(credential),)


class Lobby:
    """Every GetTask waits until ``answer`` is set, then has no task."""

    def __init__(self) -> None:
        self.answer = asyncio.Event()
        self.waiting = 0

    async def wait_for_task(self, device_id: int, round_keys: tuple[bytes, bytes],
                            wait_s: float, known: bytes = b"") -> pb.SignedTask | None:
        self.waiting += 1
        await self.answer.wait()
        return None


def _keys(seed: int) -> tuple[bytes, bytes]:
    return RoundKeys.generate(np.random.default_rng(seed).bytes).public


async def _get_task(service: DeviceService, device_id: int, keys: tuple[bytes, bytes],
                    peer: str = "ipv4:127.0.0.1:1", **fields: Any) -> pb.GetTaskResponse:
    bearer = f"Bearer {device_id}.{CREDENTIALS[device_id].hex()}"
    context = CallContext((("authorization", bearer),), peer, None)
    return await service.GetTask(pb.GetTaskRequest(device_id=device_id, c_pk=keys[0],
                                                   s_pk=keys[1], **fields), context)


async def _refused(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(CallAbort) as refusal:
        await call
    return refusal.value.code, refusal.value.details


def test_a_refused_get_task_leaves_the_devices_round_keys() -> None:
    async def scenario() -> None:
        owners, lobby = KeyOwners(), Lobby()
        service = DeviceService(Store(), lobby, b"k" * 32, None, None,  # type: ignore[arg-type]
                                owners)
        first, second = _keys(1), _keys(2)
        waiting = asyncio.create_task(_get_task(service, 1, first))
        while not lobby.waiting:
            await asyncio.sleep(0)
        assert owners.current(1) == first
        # A second call on the same connection, with keys of its own: one at a time.
        code, details = await _refused(_get_task(service, 1, second))
        assert (code, details) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "this device already "
                                   "has a GetTask waiting on this connection; one at a time")
        # A known_task that is no SHA-256.
        code, details = await _refused(_get_task(service, 1, second, known_task=b"12345"))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "known_task" in details, details
        assert owners.current(1) == first
        # The waiting call's keys are still device 1's: nobody else may present them.
        code, details = await _refused(_get_task(service, 2, first))
        assert (code, details) == (grpc.StatusCode.INVALID_ARGUMENT, COPIED)
        lobby.answer.set()
        assert (await waiting).retry_after_ms > 0

    asyncio.run(asyncio.wait_for(scenario(), 20))


def test_a_get_task_on_another_connection_replaces_the_waiting_one() -> None:
    """Device 1 waits on one connection and asks again on another (it reconnected after its
    connection died without a reset): the new call waits, with its keys; the old one ends
    ALREADY_EXISTS at once. Before, the new call was refused RESOURCE_EXHAUSTED for as long
    as the old one's wait (a device asks for 30 minutes), so the device sat out every round
    meanwhile."""
    async def scenario() -> None:
        owners, lobby = KeyOwners(), Lobby()
        service = DeviceService(Store(), lobby, b"k" * 32, None, None,  # type: ignore[arg-type]
                                owners)
        first, second = _keys(1), _keys(2)
        old = asyncio.create_task(_get_task(service, 1, first, "ipv4:10.0.0.1:1000"))
        while lobby.waiting < 1:
            await asyncio.sleep(0)
        new = asyncio.create_task(_get_task(service, 1, second, "ipv4:10.0.0.1:2000"))
        code, details = await _refused(old)
        assert code == grpc.StatusCode.ALREADY_EXISTS and "replaced" in details, details
        while lobby.waiting < 2:
            await asyncio.sleep(0)
        assert owners.current(1) == second and not new.done()
        # A second call on the waiting call's own connection (2000) is still refused.
        code, _ = await _refused(_get_task(service, 1, second, "ipv4:10.0.0.1:2000"))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        lobby.answer.set()
        assert (await new).retry_after_ms > 0
        assert not service._polling

    asyncio.run(asyncio.wait_for(scenario(), 20))
