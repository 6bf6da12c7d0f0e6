"""A device whose check-in is held on a connection that went dead without a reset (the
coordinator's host lost, a partition, a NAT or load balancer that dropped the idle flow) notices
it and checks in again on a new connection.

Before, a device's channels had no keepalive and its GetTask long-poll no deadline: such a
check-in hung for good, and the device never took part in a round again. The test puts a
loopback proxy between a fleet and a real gRPC coordinator stand-in, and turns the proxy's open
connection into a black hole (bytes read and dropped, nothing closed) while the check-in is
held. Before that, the held check-in must outlive several of the device's pings under gRPC's
default ping policy scaled to the test (a device pinging more often than a server accepts gets
its connection closed, "too_many_pings"; one that stops after gRPC's default 2 pings without
data never notices a connection that dies later).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_device import main
from fedhh_device.fleet import Fleet, Identity
from fedhh_device.report import DeviceData

DEADLINE_S = 30.0


class Coordinator(pb_grpc.DeviceServiceServicer):
    """Holds the first check-in as long as the test runs; counts the check-ins."""

    def __init__(self) -> None:
        self.calls = 0
        self.first, self.second = asyncio.Event(), asyncio.Event()

    async def GetTask(self, request: pb.GetTaskRequest, context: Any) -> pb.GetTaskResponse:
        self.calls += 1
        (self.first if self.calls == 1 else self.second).set()
        await asyncio.sleep(3600)
        return pb.GetTaskResponse()


class Pings:
    """Counts the HTTP/2 PING frames (not their acknowledgements) in a client's byte stream."""

    PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

    def __init__(self) -> None:
        self.count = 0
        self.seen = asyncio.Event()  # set at each ping
        self._buffer = b""
        self._preface = True

    def feed(self, data: bytes) -> None:
        self._buffer += data
        if self._preface:
            if len(self._buffer) < len(self.PREFACE):
                return
            assert self._buffer.startswith(self.PREFACE)
            self._buffer, self._preface = self._buffer[len(self.PREFACE):], False
        # A frame: a 9-byte header (length 24 bits, type, flags, stream id), then its payload.
        while len(self._buffer) >= 9:
            end = 9 + int.from_bytes(self._buffer[:3], "big")
            if len(self._buffer) < end:
                return
            if self._buffer[3] == 0x6 and not self._buffer[4] & 0x1:  # PING, not ACK
                self.count += 1
                self.seen.set()
            self._buffer = self._buffer[end:]

    async def reach(self, count: int) -> None:
        while self.count < count:
            self.seen.clear()
            await self.seen.wait()


class Proxy:
    """Forwards loopback connections to ``port``; ``black_hole()`` makes the connections open
    now swallow every byte from then on, in both directions, without closing them."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.dead: set[int] = set()
        self.opened = 0
        self.pings = Pings()  # the device's pings on its first connection

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.opened += 1
        number = self.opened
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter,
                       up: bool) -> None:
            while data := await source.read(65536):
                if up and number == 1:
                    self.pings.feed(data)
                if number in self.dead:
                    continue
                sink.write(data)
                await sink.drain()

        try:
            await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            up_writer.close()

    def black_hole(self) -> None:
        self.dead.update(range(1, self.opened + 1))


def test_device_channels_ping_within_what_the_services_accept() -> None:
    options = dict(main.OPTIONS)
    # gRPC servers' default: a ping per 5 minutes during a call (more often: GOAWAY).
    assert 300_000 < options["grpc.keepalive_time_ms"] <= 340_000
    assert options["grpc.http2.ping_timeout_ms"] == options["grpc.keepalive_timeout_ms"] <= 30_000
    assert options["grpc.keepalive_permit_without_calls"] == 0
    assert options["grpc.use_local_subchannel_pool"] == 1


def test_a_check_in_held_on_a_dead_connection_is_made_again() -> None:
    async def scenario() -> tuple[int, float]:
        coordinator = Coordinator()
        # gRPC's default ping policy at the test's time scale: a ping per 0.8 s during a call
        # (the services: per 300 s; the device pings every 320 s, here every 1 s, gRPC's
        # least); the second ping sooner than that closes the connection.
        server = grpc.aio.server(options=[("grpc.http2.min_ping_interval_without_data_ms", 800)])
        pb_grpc.add_DeviceServiceServicer_to_server(coordinator, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        proxy = Proxy(port)
        listener = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
        address = f"127.0.0.1:{listener.sockets[0].getsockname()[1]}"
        # The device's own channel options, at a test's time scale.
        channel = grpc.aio.insecure_channel(address, options=main.channel_options(1.0, 1.0))
        data = DeviceData(("apple",), np.ones(1, dtype=np.int64))
        fleet = Fleet([(1, data)], channel, {}, lambda address: None, seed=1)
        fleet._identities[1] = Identity(7, b"credential", Ed25519PrivateKey.generate(), b"")
        device = asyncio.create_task(fleet._device(1, data))
        try:
            await asyncio.wait_for(coordinator.first.wait(), DEADLINE_S)
            # The held call lives on while the device pings, past the 2 pings gRPC sends by
            # default while no data flows, and the server tolerates them: a third ping and its
            # answer (the fourth ping is sent only once the third was answered in time).
            try:
                await asyncio.wait_for(proxy.pings.reach(4), DEADLINE_S)
            except TimeoutError:
                raise AssertionError(f"the device stopped pinging after "
                                     f"{proxy.pings.count} pings") from None
            assert coordinator.calls == 1 and proxy.opened == 1
            proxy.black_hole()
            dead_at = time.monotonic()
            await asyncio.wait_for(coordinator.second.wait(), DEADLINE_S)
            return proxy.opened, time.monotonic() - dead_at
        finally:
            fleet.stop.set()
            device.cancel()
            await asyncio.gather(device, return_exceptions=True)
            await channel.close()
            listener.close()
            await server.stop(None)

    opened, seconds = asyncio.run(scenario())
    assert opened == 2  # the second check-in came over a new connection
    assert seconds < DEADLINE_S
