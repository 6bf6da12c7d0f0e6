"""The device-facing gRPC ports (the coordinator's, a selector's) cap the streams one connection
holds at once (--max-streams-per-connection, default 2048), as the aggregator's does (4096).

Before, they set no cap: a client that opened streams and reset them at once (HTTP/2 rapid
reset, CVE-2023-44487 class; frames sent before any credential is checked) held as many as
gRPC core's backlog of 16,384 calls, and four floods of 85,000 took a server built as the
coordinator from 136 to 728 MB (183 MB with the cap of 2048; docs/threat-model.md). Here,
with a cap of 8 on real processes spoken to in raw HTTP/2 frames: the port announces the cap,
refuses each stream past it (RST_STREAM REFUSED_STREAM), and, after a flood of streams opened
and reset, still answers a call."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fedhh.cli.main import build_parser
from fedhh.rpc import serving
from fedhh.rpc.topology import LocalTopology

CAP = 8
HELD = 5 * CAP  # streams opened and left waiting for their request
FLOOD = 2_000  # streams opened and reset at once
BOUND_S = 60.0  # (a failing read's bound only: every read below ends on frames it waits for)

DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0, 1, 3, 4, 6, 7
END_HEADERS, ACK = 0x4, 0x1
SETTINGS_MAX_CONCURRENT_STREAMS = 3
REFUSED_STREAM, CANCEL = 7, 8


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream) + payload


def header(name: bytes, value: bytes) -> bytes:
    """A literal header field, not indexed, its name a literal (RFC 7541 6.2.2)."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


ENROLL = b"".join(header(name, value) for name, value in (
    (b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/fedhh.v1.DeviceService/Enroll"),
    (b":authority", b"fedhh"), (b"content-type", b"application/grpc"), (b"te", b"trailers")))


class RawConnection:
    """An HTTP/2 client connection in plain frames, past its SETTINGS exchange."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=BOUND_S)
        self.buffer = b""
        self.sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(SETTINGS, 0, 0))
        self.settings: dict[int, int] = {}
        while True:
            kind, flags, _, payload = self.read()
            if kind == SETTINGS and not flags & ACK:
                self.settings = {int.from_bytes(payload[i:i + 2], "big"):
                                 int.from_bytes(payload[i + 2:i + 6], "big")
                                 for i in range(0, len(payload), 6)}
                break
        # (a server holds a client to its SETTINGS once the client has acknowledged them)
        self.sock.sendall(frame(SETTINGS, ACK, 0))
        self.next_stream = 1

    def read(self) -> tuple[int, int, int, bytes]:
        while len(self.buffer) < 9 or len(self.buffer) < 9 + int.from_bytes(self.buffer[:3],
                                                                            "big"):
            data = self.sock.recv(1 << 16)
            assert data, "the server closed the connection"
            self.buffer += data
        length = int.from_bytes(self.buffer[:3], "big")
        kind, flags = self.buffer[3], self.buffer[4]
        stream = int.from_bytes(self.buffer[5:9], "big") & 0x7FFFFFFF
        payload, self.buffer = self.buffer[9:9 + length], self.buffer[9 + length:]
        return kind, flags, stream, payload

    def open(self, count: int, reset: bool = False) -> list[int]:
        """``count`` Enroll streams, each reset at once if ``reset``, else left waiting for
        its request; their ids."""
        ids = list(range(self.next_stream, self.next_stream + 2 * count, 2))
        self.next_stream += 2 * count
        self.sock.sendall(b"".join(
            frame(HEADERS, END_HEADERS, i, ENROLL)
            + (frame(RST_STREAM, 0, i, struct.pack(">I", CANCEL)) if reset else b"")
            for i in ids))
        return ids

    def refused(self, count: int) -> set[int]:
        """The streams the server refuses, read until ``count`` of them."""
        refused: set[int] = set()
        while len(refused) < count:
            kind, _, stream, payload = self.read()
            assert kind != GOAWAY, payload
            if kind == RST_STREAM and int.from_bytes(payload, "big") == REFUSED_STREAM:
                refused.add(stream)
        return refused

    def close(self) -> None:
        self.sock.close()


def check_port(address: str) -> None:
    held = RawConnection(address)
    try:
        assert held.settings.get(SETTINGS_MAX_CONCURRENT_STREAMS) == CAP, held.settings
        ids = held.open(HELD)
        # The first CAP wait for their requests; every one past them is refused.
        assert held.refused(HELD - CAP) == set(ids[CAP:])
    finally:
        held.close()
    flood = RawConnection(address)
    try:
        flood.open(FLOOD, reset=True)
        # (a PING answered: the server has read the whole flood)
        flood.sock.sendall(frame(PING, 0, 0, b"rr-flood"))
        while flood.read()[:2] != (PING, ACK):
            pass
    finally:
        flood.close()
    with serving.command_channel(address, None) as channel:
        answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                            timeout=BOUND_S)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING


@pytest.mark.slow
def test_the_coordinator_and_a_selector_cap_streams_per_connection(tmp_path: Path) -> None:
    with LocalTopology(tmp_path / "topology", tls=False,
                       env={"FEDHH_CACHE": str(tmp_path / "cache")}) as topo:
        cap = ["--max-streams-per-connection", str(CAP)]
        topo.start_aggregator()  # (the coordinator starts only with it)
        topo.start_coordinator(cap)
        topo.start_selector("selector-0", cap)
        for name in ("coordinator", "selector-0"):
            check_port(topo.address(name))


def test_every_device_facing_service_caps_streams_by_default() -> None:
    parser = build_parser()
    for command, cap in ((["coordinator", "--aggregator", "127.0.0.1:1"], 2048),
                         (["selector", "--leader", "127.0.0.1:1", "--db", "x.sqlite",
                           "--coordinator-key", "k.pub"], 2048),
                         (["aggregator", "--coordinator-key", "k.pub"], 4096)):
        assert parser.parse_args(command).max_streams_per_connection == cap, command
