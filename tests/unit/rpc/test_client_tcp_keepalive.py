"""The framed and Connect clients' connections probe a silent peer alike
(``fedhh.rpc.serving.tcp_keepalive``): neither carries HTTP/2 pings, so TCP keepalive closes a
connection that went dead without a reset (the port's host lost, a partition, a NAT that dropped
the flow) after about two minutes, and its calls fail UNAVAILABLE and are made again. Before,
the Connect client's sockets had it and the framed client's had none: a device's GetTask on a
framed port, a long-poll without a deadline, hung for good on such a connection."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

import pytest

from fedhh.rpc import connect_client, serving
from fedhh.rpc.framed.client import FramedChannel


def _options(sock: Any) -> tuple[int, int | None]:
    """Whether ``sock`` probes its peer, and after how much silence (where the platform says)."""
    idle = (sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE)
            if hasattr(socket, "TCP_KEEPIDLE") else None)
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE), idle


def _connect(port: int) -> tuple[int, int | None]:
    # (aiohttp's socket_factory: each connection of the Connect client is one of these)
    with connect_client.keepalive_socket((socket.AF_INET, socket.SOCK_STREAM, 0, "", ())) as sock:
        return _options(sock)


def _framed(port: int) -> tuple[int, int | None]:
    async def connect() -> tuple[int, int | None]:
        channel = FramedChannel(f"127.0.0.1:{port}", None)
        connection = await channel.connection()
        try:
            return _options(connection.transport.get_extra_info("socket"))
        finally:
            await channel.close()

    return asyncio.run(connect())


@pytest.mark.parametrize("client", [_connect, _framed], ids=["connect", "framed"])
def test_a_clients_connection_probes_a_silent_peer(
        client: Callable[[int], tuple[int, int | None]]) -> None:
    with socket.socket() as port:  # (its backlog takes the connection: nothing need answer)
        port.bind(("127.0.0.1", 0))
        port.listen()
        keepalive, idle = client(port.getsockname()[1])
    assert keepalive == 1
    assert idle in (None, serving.TCP_KEEPIDLE_S)
