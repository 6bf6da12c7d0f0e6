"""Every listener of a service (gRPC's, the framed port, the Connect port, the dashboard) takes
plaintext on one condition, checked by one function (serving.check_plaintext_listener): asked
for with --insecure, and on a loopback address. Before, four copies said it four ways (the
Connect port and the dashboard folded both refusals into one message)."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc import serving
from fedhh.rpc.connect import ConnectServer
from fedhh.rpc.framed.server import FramedLimits, FramedServer, StreamMethod
from fedhh.v1 import aggregator_pb2 as pb
from fedhh_coordinator.dashboard import server as dashboard


def test_the_rule_and_its_words() -> None:
    serving.check_plaintext_listener("127.0.0.1:0", True, "the port")
    serving.check_plaintext_listener("[::1]:0", True)
    with pytest.raises(ConfigError, match=r"^the port on 127\.0\.0\.1:0: give TLS files "
                                          r"\(--tls-dir\) or ask for --insecure on loopback$"):
        serving.check_plaintext_listener("127.0.0.1:0", False, "the port")
    with pytest.raises(ConfigError, match=r"^0\.0\.0\.0:7000: plaintext is allowed on loopback "
                                          r"addresses only; it needs TLS files \(--tls-dir\)$"):
        serving.check_plaintext_listener("0.0.0.0:7000", True)


def test_each_listener_refuses_alike() -> None:
    async def refusals() -> list[str]:
        said = []
        server = serving.new_server(1 << 20)
        async def nothing(*_: object) -> None:
            return None

        framed = FramedServer("the framed port", {"/fedhh.v1.SecureAggregation/Session":
                                                  StreamMethod(nothing,
                                                               pb.SessionMessage.FromString)},
                              FramedLimits(1 << 20, 4), None)
        connect = ConnectServer("Connect port", [], 1 << 20, None)
        for start in (lambda: serving.bind(server, "0.0.0.0:0", None, True),
                      lambda: framed.start("0.0.0.0", 0, True),
                      lambda: connect.start("0.0.0.0", 0, True)):
            try:
                result = start()
                if inspect.isawaitable(result):
                    await result
            except ConfigError as error:
                said.append(str(error))
        await server.stop(None)
        return said

    said = asyncio.run(refusals())
    assert len(said) == 3, said
    assert all(s.endswith("0.0.0.0:0: plaintext is allowed on loopback addresses only; it "
                          "needs TLS files (--tls-dir)") for s in said), said
    # (the dashboard's TLS or plaintext is the framed and Connect ports' one piece; it kept a
    # copy of its lines)
    assert inspect.getsource(dashboard.Dashboard.start).count("listener_context(") == 1
    assert "check_plaintext_listener(" not in inspect.getsource(dashboard.Dashboard.start)
