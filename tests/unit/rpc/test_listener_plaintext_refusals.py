"""The framed and Connect ports and the dashboard decide TLS or plaintext by one piece
(``fedhh.rpc.serving.listener_context``): plaintext only when asked for and on a loopback
address, each refusal naming the port as every listener's does ("the ... on HOST:PORT").
Before, each port wrote these lines, and the framed port's refusals read "aggregator's session
port on 0.0.0.0:7003: ..." where the Connect port's read "the aggregator's Connect port on
...", and its TLS errors likewise."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc.connect import ConnectServer
from fedhh.rpc.framed.server import FramedLimits, FramedServer
from fedhh.rpc.procedures import procedures
from fedhh.rpc.tls import TlsFiles
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.dashboard.server import Dashboard

DEVICES = pb.DESCRIPTOR.services_by_name["DeviceService"]


class _Devices:
    """The device service's methods, never called: the ports refuse before they serve."""

    Enroll = GetTask = None


def _port(kind: str, tls: TlsFiles | None) -> Any:
    if kind == "dashboard":  # (its views and sessions are not reached: it refuses first)
        return Dashboard(None, None, tls)  # type: ignore[arg-type]
    served = procedures(DEVICES, _Devices())
    if kind == "framed":
        return FramedServer("x's framed port", {p.path: p for p in served},
                            FramedLimits(1 << 20, 16), tls)
    return ConnectServer("x's Connect port", served, 1 << 20, tls)


def _refusal(kind: str, host: str, insecure: bool, tls: TlsFiles | None = None) -> str:
    async def start() -> str:
        port = _port(kind, tls)
        with pytest.raises(ConfigError) as refused:
            await port.start(host, 0, insecure)
        return str(refused.value)

    return asyncio.run(start())


NAMES = {"framed": "the x's framed port", "Connect": "the x's Connect port",
         "dashboard": "the dashboard"}


@pytest.mark.parametrize("kind", NAMES)
def test_a_plaintext_port_off_loopback_is_refused_naming_it(kind: str) -> None:
    assert _refusal(kind, "0.0.0.0", True) == (
        f"{NAMES[kind]} on 0.0.0.0:0: plaintext is allowed on loopback addresses only; "
        "it needs TLS files (--tls-dir)")
    assert _refusal(kind, "127.0.0.1", False) == (
        f"{NAMES[kind]} on 127.0.0.1:0: give TLS files (--tls-dir) or ask for --insecure "
        "on loopback")


@pytest.mark.parametrize("kind", NAMES)
def test_a_certificate_that_does_not_load_is_named_with_the_port(kind: str,
                                                                  tmp_path: Path) -> None:
    for name in ("server.pem", "server.key", "ca.pem"):
        (tmp_path / name).write_text("not PEM\n")
    refused = _refusal(kind, "127.0.0.1", False, TlsFiles.from_dir(tmp_path))
    assert refused.startswith(f"{NAMES[kind]} cannot load {tmp_path / 'server.pem'}")
