"""A device process whose tasks name an aggregator address that does not resolve where it runs
logs it once an address, naming the address and the settings that give it (the coordinator's
--aggregator-public-address and --aggregator-session-address, compose's
FEDHH_AGGREGATOR_PUBLIC_HOST). Before, a device outside the compose network, told the default
`aggregator:7100`, failed every round with gRPC's "errors resolving aggregator:7100", and
nothing said which setting names it."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import numpy as np
import pytest

from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device.fleet import Fleet
from fedhh_device.report import DeviceData

LOGGER = "fedhh_device.fleet"


def _told(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == LOGGER and "does not resolve here" in r.getMessage()]


def test_an_aggregator_name_that_does_not_resolve_is_told_once_an_address(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    looked_up: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        looked_up.append(host)
        if host == "aggregator":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    caplog.set_level(logging.INFO, LOGGER)
    fleet = Fleet([(0, DeviceData(("word",), np.ones(1, dtype=np.int64)))], object(), {},
                  lambda address: None, seed=1)
    unresolved = pb.Task(run_id="r1", aggregator_address="aggregator:7100",
                         aggregator_session_address="aggregator:7101")

    async def tell(task: pb.Task) -> None:
        fleet._tell_unresolved(task)
        await asyncio.gather(*fleet._counting)

    async def scenario() -> None:
        await tell(unresolved)
        await tell(unresolved)  # (a later task naming the same addresses: said already)
        await tell(pb.Task(run_id="r2", aggregator_address="127.0.0.1:7100"))

    asyncio.run(asyncio.wait_for(scenario(), 30))
    told = _told(caplog)
    assert len(told) == 2, told
    for message, address in zip(told, ("aggregator:7100", "aggregator:7101"), strict=True):
        assert message.startswith(f"the aggregator address {address} that the coordinator "
                                  "names in its tasks does not resolve here ("), message
        assert "--aggregator-public-address" in message
        assert "FEDHH_AGGREGATOR_PUBLIC_HOST" in message
    assert looked_up == ["aggregator", "aggregator", "127.0.0.1"]  # (each address once)
