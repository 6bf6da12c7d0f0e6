"""The framed session port's own limits and failure behaviour (``fedhh.rpc.framed``): a
``FramedServer`` on 127.0.0.1 with small limits and a test handler, reached with the device's
``FramedChannel`` or, to send what no channel sends, with raw streams. Each test waits for the
outcome it asserts (a bound far above the limit under test), never a fixed time, except where
the outcome is that something does *not* happen for a while."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import gc
import logging
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

import grpc
import pytest
import uvloop
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.errors import AuthenticationError, ConfigError, NotFoundError, RateLimited
from fedhh.rpc.errors import status_errors
from fedhh.rpc.framed import client as framed_client
from fedhh.rpc.framed.client import (
    FALLBACK_S,
    FramedCall,
    FramedChannel,
    FramedStub,
    answer_too_large,
    client_context,
)
from fedhh.rpc.framed.frames import ALPN, HEADER, PREFACE, FrameSplitter, Kind
from fedhh.rpc.framed.server import (
    CALLS,
    MAX_OPEN_BYTES,
    FramedLimits,
    FramedServer,
    ServerStream,
    StreamMethod,
    streams_busy,
)
from fedhh.rpc.participation import RETRIED_CODES
from fedhh.rpc.procedures import CallContext, procedures
from fedhh.rpc.serving import UnparsableRequest
from fedhh.rpc.tls import TlsFiles, make_dev_pki
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import coordinator_pb2 as coordinator_pb
from fedhh.v1 import framed_pb2

T = TypeVar("T")
EOF = grpc.aio.EOF
BOUND_S = 10.0  # how long any awaited outcome may take on a busy machine
# uvloop's timers count whole milliseconds of a clock read at the start of a loop turn: one
# may fire a little before the time.monotonic() figure the test compares it with.
TICK = 0.01
LIMITS: dict[str, Any] = dict(
    max_message_bytes=4096, max_streams_per_connection=4, max_connections=64,
    handshake_timeout_s=5.0, idle_timeout_s=30.0, max_unread_bytes=1 << 16)


def run(coro: Coroutine[Any, Any, T], timeout: float = 40) -> T:
    """Run a scenario on a fresh uvloop event loop (the services' and devices' loop)."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(asyncio.wait_for(coro, timeout))


async def until(predicate: Callable[[], bool], what: str = "", bound: float = BOUND_S) -> None:
    """Wait for ``predicate`` to hold (polled; failing after ``bound`` s)."""
    deadline = time.monotonic() + bound
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {bound} s: {what or predicate}")
        await asyncio.sleep(0.005)


def any_frame(stream_id: int, kind: int, payload: bytes = b"") -> bytes:
    """A frame of any kind, a client's or not."""
    return HEADER.pack(stream_id, kind, len(payload)) + payload


frame = any_frame  # (a frame of a kind the enum names)
SESSION = "/fedhh.v1.SecureAggregation/Session"
SERVICE = pb.DESCRIPTOR.services_by_name["SecureAggregation"]
DEVICES = coordinator_pb.DESCRIPTOR.services_by_name["DeviceService"]
GET_TASK = "/fedhh.v1.DeviceService/GetTask"


def open_frame(stream_id: int, method: str = SESSION, **metadata: str) -> bytes:
    """An OPEN of ``method`` with ``metadata``."""
    return frame(stream_id, Kind.OPEN, framed_pb2.FramedOpen(
        method=method, metadata=metadata).SerializeToString())


def message(data: bytes) -> pb.SessionMessage:
    return pb.SessionMessage(vector_data=data)


def event(data: bytes) -> pb.SessionEvent:
    return pb.SessionEvent(challenge=data)


# -- the port under test ---------------------------------------------------------------------


class Raw:
    """A connection that speaks the wire format by hand."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.splitter = FrameSplitter(1 << 24)
        self.frames: collections.deque[tuple[int, int, bytes | None]] = collections.deque()

    def send(self, *chunks: bytes) -> None:
        self.writer.write(b"".join(chunks))

    async def frame(self) -> tuple[int, int, bytes]:
        async with asyncio.timeout(BOUND_S):
            while not self.frames:
                data = await self.reader.read(1 << 16)
                assert data, "the server closed the connection"
                self.frames.extend(self.splitter.feed(data))
        stream_id, kind, payload = self.frames.popleft()
        assert payload is not None
        return stream_id, kind, payload

    async def event(self, stream_id: int) -> pb.SessionEvent:
        got = await self.frame()
        assert got[:2] == (stream_id, Kind.EVENT), got
        return pb.SessionEvent.FromString(got[2])

    async def end(self, stream_id: int) -> tuple[grpc.StatusCode, str]:
        got = await self.frame()
        assert got[:2] == (stream_id, Kind.END), got
        end = framed_pb2.FramedEnd.FromString(got[2])
        return {code.value[0]: code for code in grpc.StatusCode}[end.code], end.details

    async def eof(self) -> float:
        """Wait until the server closes the connection, having sent nothing more; when."""
        async with asyncio.timeout(BOUND_S):
            rest = await self.reader.read()
        assert rest == b"" and not self.frames, (rest, self.frames)
        return time.monotonic()

    def close(self) -> None:
        self.writer.transport.abort()


class Port:
    """A FramedServer on 127.0.0.1 whose handler runs ``behave(port, stream)``, recording the
    streams its handlers served and which of them were cancelled; with ``unary``, it serves
    ``devices``' unary methods too (``Devices``, below)."""

    def __init__(self, behave: Callable[[Port, ServerStream], Awaitable[None]],
                 limits: FramedLimits, tls: TlsFiles | None, unary: bool = False) -> None:
        self.behave = behave
        self.tls = tls
        self.devices = Devices()
        methods: dict[str, Any] = {
            SESSION: StreamMethod(self._handle, pb.SessionMessage.FromString)}
        if unary:
            methods.update((procedure.path, procedure) for procedure in procedures(
                DEVICES, self.devices, {GET_TASK: self.devices.check}))
        self.server = FramedServer("test session port", methods, limits, tls)
        self.port = 0
        self.started: list[ServerStream] = []
        self.cancelled: list[int] = []
        self.notes: list[Any] = []  # what a behaviour saw
        self.release = asyncio.Event()  # lets a waiting behaviour go on
        self._channels: list[FramedStub] = []
        self._raws: list[Raw] = []

    async def _handle(self, stream: ServerStream) -> None:
        self.started.append(stream)
        try:
            await self.behave(self, stream)
        except asyncio.CancelledError:
            self.cancelled.append(stream.stream_id)
            raise

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def channel(self) -> FramedStub:
        """A session stub on the port (``channel.channel``: its ``FramedChannel``)."""
        context = client_context(self.tls.ca) if self.tls is not None else None
        channel = FramedStub(FramedChannel(self.address, context), SERVICE, ("Session",))
        self._channels.append(channel)
        return channel

    def device_stub(self, framed: Iterable[str] = ("GetTask",), fallback: Any = None
                    ) -> FramedStub:
        """A stub of the device service on the port: ``framed`` its methods here."""
        context = client_context(self.tls.ca) if self.tls is not None else None
        stub = FramedStub(FramedChannel(self.address, context), DEVICES, framed, fallback)
        self._channels.append(stub)
        return stub

    async def raw(self, *frames: bytes, preface: bool = True,
                  context: ssl.SSLContext | None = None, sndbuf: int = 0, rcvbuf: int = 0,
                  source: str = "", early: bool = False) -> Raw:
        """A connection that sends its preface (unless not ``preface``) and ``frames``; with
        ``early``, in plaintext, sent before the loop runs again: the bytes are in the server's
        socket before its handshake deadline is set, which then cannot cut them however long
        the machine stalls (a deadline that finds bytes unread waits for them)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if source:  # (another client address: 127.0.0.0/8 is all loopback)
            sock.bind((source, 0))
        if rcvbuf:  # (before connecting: the window it advertises)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.connect(("127.0.0.1", self.port))
        if sndbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        first = b"".join((PREFACE if preface else b"", *frames))
        if early:  # (a few bytes into an empty buffer: the send never waits)
            sock.sendall(first)
            first = b""
        sock.setblocking(False)
        reader, writer = await asyncio.open_connection(
            sock=sock, ssl=context, server_hostname="127.0.0.1" if context else None)
        raw = Raw(reader, writer)
        self._raws.append(raw)
        if first:
            raw.send(first)
        return raw

    def connection(self) -> Any:
        """The server's one connection (its protocol)."""
        assert len(self.server.connections) == 1, self.server.connections
        return next(iter(self.server.connections))

    async def works(self) -> None:
        """A new connection's stream is served: one message echoed, then an OK end."""
        self.behave = echo
        channel = self.channel()
        call = channel.Session(timeout=BOUND_S)
        await call.write(message(b"still serving"))
        assert (await call.read()).challenge == b"still serving"
        await call.done_writing()
        assert await call.read() is EOF
        assert await call.code() == grpc.StatusCode.OK
        await channel.close()

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()
        for raw in self._raws:
            raw.close()
        await self.server.close()
        tasks = [stream.task for stream in self.started if stream.task is not None]
        async with asyncio.timeout(BOUND_S):  # (every handler ends with its connection)
            await asyncio.gather(*tasks, return_exceptions=True)


async def echo(port: Port, stream: ServerStream) -> None:
    """Each message's bytes back as an event, until the client closes its side."""
    while (got := await stream.read()) is not EOF:
        await stream.write(event(got.vector_data))


async def hold(port: Port, stream: ServerStream) -> None:
    """Read, answer nothing, wait until cancelled; then try to write."""
    try:
        while await stream.read() is not EOF:
            port.notes.append(stream.stream_id)
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        try:
            await stream.write(event(b"too late"))
        except asyncio.InvalidStateError as error:
            port.notes.append(error)
        raise


@contextlib.asynccontextmanager
async def serving(behave: Callable[[Port, ServerStream], Awaitable[None]] = echo,
                  tls: TlsFiles | None = None, unary: bool = False, **limits: Any
                  ) -> AsyncIterator[Port]:
    port = Port(behave, FramedLimits(**{**LIMITS, **limits}), tls, unary)
    try:
        port.port = await port.server.start("127.0.0.1", 0, insecure=True)
        yield port
    finally:
        await port.close()


def scenario(**serve: Any) -> Callable[[Callable[[Port], Awaitable[None]]], Callable[[], None]]:
    """A test that runs ``body(port)`` against a port served with ``serve``."""
    def wrap(body: Callable[[Port], Awaitable[None]]) -> Callable[[], None]:
        def test() -> None:
            async def main() -> None:
                async with serving(**serve) as port:
                    await body(port)
            run(main())
        test.__name__ = body.__name__
        test.__doc__ = body.__doc__
        return test
    return wrap


async def refused(call: Any) -> tuple[grpc.StatusCode, str]:
    """The call's next read fails: its code and details (which its status repeats)."""
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        async with asyncio.timeout(BOUND_S):
            await call.read()
    assert await call.code() == failed.value.code()
    assert await call.details() == failed.value.details()
    return failed.value.code(), failed.value.details()


# -- limits ----------------------------------------------------------------------------------


@scenario(max_message_bytes=1024)
async def test_an_oversize_message_ends_only_its_stream(port: Port) -> None:
    """A frame above max_message_bytes ends its stream RESOURCE_EXHAUSTED as soon as its header
    arrives (the handler is cancelled); its payload is skipped as it comes, exactly, and the
    connection's other stream goes on."""
    raw = await port.raw(open_frame(1), open_frame(2))
    await until(lambda: len(port.started) == 2, "both streams served")
    big = message(b"x" * 5000).SerializeToString()
    raw.send(HEADER.pack(1, Kind.MESSAGE, len(big)), big[:100])  # (the header, a little more)
    assert await raw.end(1) == (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                "a request above the 1024-byte receive cap")
    await until(lambda: port.cancelled == [1], "stream 1's handler cancelled")
    # The rest of the payload, in two writes, the second with stream 2's message right after.
    raw.send(big[100:3000])
    raw.send(big[3000:], frame(2, Kind.MESSAGE, message(b"after").SerializeToString()))
    assert (await raw.event(2)).challenge == b"after"
    connection = port.connection()
    assert len(connection.splitter._buffer) == 0 and connection.splitter._skip == 0
    assert connection._unread == 0
    raw.send(frame(2, Kind.CLOSE))
    assert await raw.end(2) == (grpc.StatusCode.OK, "")
    assert port.cancelled == [1] and port.server.connections == {connection}


async def one_oversize_call(port: Port, details: str) -> None:
    """Two calls on one connection of ``port``'s channel (streams 1 and 2): after the small
    one's first exchange the big one sends 2,000 bytes, and must end RESOURCE_EXHAUSTED with
    ``details``; the small one's next exchange goes on."""
    channel = port.channel()
    small, big = channel.Session(timeout=BOUND_S), channel.Session(timeout=BOUND_S)
    await small.write(message(b"1"))
    assert (await small.read()).challenge == b"1"
    await big.write(message(b"x" * 2000))
    assert await refused(big) == (grpc.StatusCode.RESOURCE_EXHAUSTED, details)
    await small.write(message(b"2"))
    assert (await small.read()).challenge == b"2"


@scenario(max_message_bytes=1024)
async def test_an_oversize_message_through_the_channel(port: Port) -> None:
    """The device's channel sees the refusal as gRPC's would: RESOURCE_EXHAUSTED on that call;
    another call on the same connection is served."""
    await one_oversize_call(port, "a request above the 1024-byte receive cap")
    # (the big call's stream 2 opened in the same write as its message: its handler was
    # cancelled before it began, or as it waited for that message)
    assert port.cancelled in ([], [2]) and list(port.connection().streams) == [1]


@scenario(max_message_bytes=1024, max_streams_per_connection=1, idle_timeout_s=2.0)
async def test_a_stream_ended_in_the_read_that_opened_it_is_forgotten(port: Port) -> None:
    """Regression: a stream whose handler was cancelled before it began (its OPEN and an
    oversize message, or its OPEN and a CANCEL, in one read) was never ended nor forgotten:
    no END came, it held its place against max_streams_per_connection for good, and its
    connection never went idle. (Each stream opens within idle_timeout_s of the last one's
    end, which a loaded machine's stall must not reach: 2 s, not 0.5.)"""
    raw = await port.raw(open_frame(1), frame(1, Kind.MESSAGE, b"x" * 2000))
    assert await raw.end(1) == (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                "a request above the 1024-byte receive cap")
    connection = port.connection()
    assert not connection.streams and connection._unread == 0
    raw.send(open_frame(2), frame(2, Kind.MESSAGE, b"\x2a\x01y"), frame(2, Kind.CANCEL))
    await until(lambda: connection._last_id == 2 and not connection.streams,
                "stream 2 opened and forgotten")
    assert connection._unread == 0
    raw.send(open_frame(3), frame(3, Kind.MESSAGE, message(b"3").SerializeToString()))
    assert (await raw.event(3)).challenge == b"3"
    raw.send(frame(3, Kind.CLOSE))
    assert await raw.end(3) == (grpc.StatusCode.OK, "")
    await raw.eof()  # (idle)
    assert [s.stream_id for s in port.started] == [3]


@scenario()
async def test_streams_cancelled_before_they_began_leave_no_cycles_for_the_collector(
        port: Port) -> None:
    """A task cancelled before it began keeps its CancelledError, whose traceback holds the
    frame of the handler it never ran, which holds the stream, which held the task: a cycle,
    freed only by the cycle collector, which services run seldom (``serving.tune_gc``). A
    coordinator's framed port flooded with 4 x 65,536 calls of OPEN, MESSAGE and CANCEL in
    one write each went from 140 to 465 MB, ~220 MB more with each such flood (1,906 MB
    after eight, kept while idle). Now every stream is freed as it is forgotten."""
    request = message(b"m").SerializeToString()
    gc.collect()
    gc.disable()
    try:
        await port.raw(*(open_frame(i) + frame(i, Kind.MESSAGE, request) + frame(i, Kind.CANCEL)
                         for i in range(1, 33)))
        await until(lambda: len(port.server.connections) == 1, "the connection accepted")
        connection = port.connection()
        await until(lambda: connection._last_id == 32 and not connection.streams,
                    "every stream opened and forgotten")
        await asyncio.sleep(0)  # (the last forgotten stream's callback returns)
        left = [o for o in gc.get_objects()
                if isinstance(o, ServerStream) and all(o is not s for s in port.started)]
    finally:
        gc.enable()
    assert not left, f"{len(left)} streams wait for the cycle collector"


@scenario(max_streams_per_connection=2)
async def test_one_stream_over_the_limit_is_refused_at_once(port: Port) -> None:
    """With max_streams_per_connection streams open, one more ends UNAVAILABLE without a
    handler, a code devices retry (gRPC's client reports its port's REFUSED_STREAM so; before,
    RESOURCE_EXHAUSTED, which a device's session took for final); the others go on, and a
    stream that ended frees its place."""
    channel = port.channel()
    first, second = channel.Session(timeout=BOUND_S), channel.Session(timeout=BOUND_S)
    for call, data in ((first, b"1"), (second, b"2")):
        await call.write(message(data))
        assert (await call.read()).challenge == data
    third = channel.Session(timeout=BOUND_S)
    assert await refused(third) == (grpc.StatusCode.UNAVAILABLE, streams_busy(2))
    assert grpc.StatusCode.UNAVAILABLE in RETRIED_CODES
    assert [s.stream_id for s in port.started] == [1, 2] and not port.cancelled
    with pytest.raises(asyncio.InvalidStateError):
        await third.write(message(b"3"))
    for call, data in ((first, b"1b"), (second, b"2b")):
        await call.write(message(data))
        assert (await call.read()).challenge == data
    await first.done_writing()
    assert await first.read() is EOF and await first.code() == grpc.StatusCode.OK
    fourth = channel.Session(timeout=BOUND_S)
    await fourth.write(message(b"4"))
    assert (await fourth.read()).challenge == b"4"
    assert [s.stream_id for s in port.started] == [1, 2, 4]
    assert len(port.server.connections) == 1


@pytest.mark.parametrize("sent", [
    pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="bad-preface"),
    pytest.param(PREFACE[:-2] + b"\n\n", id="preface-cut-short"),
    pytest.param(PREFACE + open_frame(1) + any_frame(1, 9), id="unknown-kind"),
    pytest.param(PREFACE + open_frame(1) + frame(1, Kind.EVENT, b"x"),
                 id="server-kind-from-client"),
    pytest.param(PREFACE + any_frame(7, 200), id="unknown-kind-no-stream"),
    pytest.param(PREFACE + open_frame(0), id="open-zero"),
    pytest.param(PREFACE + open_frame(2) + open_frame(2), id="open-same-id"),
    pytest.param(PREFACE + open_frame(2) + open_frame(1), id="open-lower-id"),
    pytest.param(PREFACE + frame(3, Kind.MESSAGE, b""), id="message-never-opened"),
    pytest.param(PREFACE + open_frame(1) + frame(2, Kind.CLOSE), id="close-never-opened"),
    pytest.param(PREFACE + open_frame(1) + frame(1, Kind.CLOSE)
                 + frame(1, Kind.MESSAGE, b""), id="message-after-close"),
    pytest.param(PREFACE + open_frame(1) + frame(1, Kind.CLOSE) + frame(1, Kind.CLOSE),
                 id="close-twice"),
])
def test_breaking_the_framing_closes_the_connection(sent: bytes) -> None:
    async def main() -> None:
        async with serving(hold) as port:
            raw = await port.raw(sent, preface=False)
            await raw.eof()
            await until(lambda: not port.server.connections, "the server forgot it")
            # A handler the broken connection had is cancelled; the port serves on.
            assert port.cancelled == [s.stream_id for s in port.started]
            await port.works()
    run(main())


# -- deadlines and connection limits -----------------------------------------------------------


@scenario(handshake_timeout_s=0.5)
async def test_a_connection_without_its_preface_is_closed(port: Port) -> None:
    """No preface (or part of one) within handshake_timeout_s: closed, and not before."""
    started = time.monotonic()
    silent, partial = await port.raw(preface=False), await port.raw(PREFACE[:5], preface=False)
    closed = await asyncio.gather(silent.eof(), partial.eof())
    assert all(at - started >= 0.5 - TICK for at in closed), [at - started for at in closed]
    assert port.server.listener is not None and port.server.listener.refused == 0
    assert not port.server.connections
    await port.works()


@scenario(idle_timeout_s=0.5, handshake_timeout_s=0.3)
async def test_a_connection_without_streams_is_closed_when_idle(port: Port) -> None:
    """idle_timeout_s after its preface, or after its last stream ended, a connection with no
    stream is closed; one that holds a stream is not, past both timeouts. The idle connection's
    close is the clock: it is made after the busy one opened its stream, so the busy one's
    deadlines (as long or shorter) have run by then. Each preface is sent early, so a stalled
    machine cannot let the handshake deadline cut a connection before its preface is read."""
    busy = await port.raw(open_frame(1), early=True)
    await until(lambda: len(port.started) == 1, "the stream served")
    started = time.monotonic()
    idle = await port.raw(early=True)
    assert await idle.eof() - started >= 0.5 - TICK
    busy.send(frame(1, Kind.MESSAGE, message(b"alive").SerializeToString()))
    assert (await busy.event(1)).challenge == b"alive"
    closing = time.monotonic()
    busy.send(frame(1, Kind.CLOSE))
    assert await busy.end(1) == (grpc.StatusCode.OK, "")
    assert await busy.eof() - closing >= 0.5 - TICK


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_dev_pki(tmp_path_factory.mktemp("pki"), ["localhost", "127.0.0.1"])


def test_tls_connection_with_a_stream_outlives_the_handshake_timeout(pki: TlsFiles) -> None:
    """Regression (b19ef71): with TLS, the listener's head deadline was set on uvloop's SSL
    wrapper, not the port's protocol, so every TLS connection was cut handshake_timeout_s
    after its handshake, preface and streams or not. Once the deadline has passed, the
    connection and its stream are still served; a TLS connection that never sent its preface
    is closed at it, and so is a TCP connection that never began its handshake. Those two are
    the clock: made after the served connection's handshake, their deadlines run after its
    own. The window is long enough that a stalled machine still ends a handshake within it
    (at 0.5 s, a 0.6 s stall mid-handshake cut the served connection)."""
    window_s = 2.0

    async def main() -> None:
        async with serving(tls=pki, handshake_timeout_s=window_s) as port:
            channel = port.channel()
            call = channel.Session(timeout=BOUND_S)
            await call.write(message(b"1"))
            assert (await call.read()).challenge == b"1"
            connection = channel.channel.live_connection()
            assert connection is not None
            assert connection.transport.get_extra_info("ssl_object").selected_alpn_protocol() \
                == ALPN
            listener = port.server.listener
            assert listener is not None

            started = time.monotonic()
            no_preface = await port.raw(preface=False, context=client_context(pki.ca))
            no_handshake = await port.raw(preface=False)
            closed = await asyncio.gather(no_preface.eof(), no_handshake.eof())
            assert all(at - started >= window_s - TICK for at in closed), \
                [at - started for at in closed]
            # The served connection's head deadline has run (the listener forgets the
            # connection then), and did not cut it.
            assert not connection.closed and not call.done()
            assert not listener._pending_heads
            await call.write(message(b"2"))
            assert (await call.read()).challenge == b"2"
            assert channel.channel.live_connection() is connection
            assert len(port.server.connections) == 1
            await call.done_writing()
            assert await call.read() is EOF
    run(main())


@scenario(max_connections=2)
async def test_one_connection_over_the_limit_is_closed_on_arrival(port: Port) -> None:
    first, second = await port.raw(), await port.raw()
    await until(lambda: len(port.server.connections) == 2, "two connections held")
    listener = port.server.listener
    assert listener is not None
    extra = await port.raw(preface=False)
    await extra.eof()
    assert listener.refused == 1 and len(port.server.connections) == 2
    first.close()
    await until(lambda: len(port.server.connections) == 1, "a place freed")
    await port.works()
    assert listener.refused == 1
    second.send(open_frame(1), frame(1, Kind.MESSAGE, message(b"2").SerializeToString()))
    assert (await second.event(1)).challenge == b"2"


@scenario(max_connections=3)
async def test_a_newcomer_takes_an_idle_place_of_the_address_that_holds_every_one(
        port: Port) -> None:
    """When every connection is held, a connection from another address takes the place of an
    idle one (no stream open) of the address that holds the most; one in a call keeps its
    place. Before, one address that held every connection (a cheap stream on each within the
    idle timeout) kept every device of every other address out."""
    in_call = []
    for held in range(1, 3):  # (each call waited for: in a call before the newcomer comes)
        in_call.append(await port.raw(open_frame(1)))
        await until(functools.partial(lambda n: len(port.started) == n, held),
                    f"the hog's call {held}")
    idle = await port.raw()
    await until(lambda: len(port.server.connections) == 3, "the hog's three connections")
    listener = port.server.listener
    assert listener is not None
    newcomer = await port.raw(open_frame(1), source="127.0.0.2")
    await idle.eof()
    await until(lambda: len(port.started) == 3, "the newcomer's stream served")
    assert listener.evicted == 1 and listener.refused == 0
    # The hog's other two are in a call: one more newcomer finds no idle place, and is closed.
    another = await port.raw(source="127.0.0.3")
    await another.eof()
    assert listener.refused == 1 and listener.evicted == 1
    for raw in (*in_call, newcomer):
        raw.send(frame(1, Kind.MESSAGE, message(b"on").SerializeToString()))
        assert (await raw.event(1)).challenge == b"on"


@scenario(max_connections=1)
async def test_a_call_whose_connection_is_lost_on_arrival_ends_unavailable(port: Port) -> None:
    """A channel whose new connection the port closes on arrival (over max_connections): its
    call ends UNAVAILABLE at once, not at its deadline; it works once a place is free."""
    held = await port.raw()
    await until(lambda: len(port.server.connections) == 1, "the one connection held")
    channel = port.channel()
    started = time.monotonic()
    code, _ = await refused(channel.Session(timeout=BOUND_S))
    assert code == grpc.StatusCode.UNAVAILABLE and time.monotonic() - started < BOUND_S / 2
    held.close()
    await until(lambda: not port.server.connections, "the place freed")
    call = channel.Session(timeout=BOUND_S)
    await call.write(message(b"in"))
    assert (await call.read()).challenge == b"in"


@scenario(max_streams_per_connection=1)
async def test_a_client_that_does_not_read_is_not_read(port: Port) -> None:
    """A client that sends OPENs and never reads what they are answered (each over the
    stream limit answered END): once its answers back up, the port stops reading it, so what
    the port holds for it stays bounded however much it sends; the port serves others."""
    raw = await port.raw(rcvbuf=4096)
    raw.send(b"".join(open_frame(i) for i in range(1, 200_001)))  # 1.8 MB of OPENs
    await until(lambda: len(port.server.connections) == 1, "the connection")
    connection = port.connection()
    await until(lambda: not connection._reading, "the port stopped reading it")
    buffered = connection.transport.get_write_buffer_size()
    for _ in range(20):  # (loop turns in which nothing more may be read or queued)
        await asyncio.sleep(0)
    assert not connection._reading
    assert connection.transport.get_write_buffer_size() == buffered < 1 << 20
    assert connection._last_id < 200_000  # (most OPENs were never read)
    await port.works()


# -- the client's side: deadlines, cancels, lost connections -------------------------------------


@scenario(behave=hold)
async def test_a_call_past_its_timeout_ends_deadline_exceeded(port: Port) -> None:
    """The call ends DEADLINE_EXCEEDED, and the server's handler is cancelled (the client left:
    its writes fail from then on). The timeout leaves a busy machine time to connect and read
    the message first (with 1 s, a stall could end the call before its handler had it)."""
    channel = port.channel()
    began = asyncio.get_running_loop().time()
    call = channel.Session(timeout=BOUND_S / 2)
    await call.write(message(b"1"))
    await until(lambda: port.notes == [1], "the message read")
    assert await refused(call) == (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
    assert asyncio.get_running_loop().time() - began >= BOUND_S / 2 - TICK
    await until(lambda: port.cancelled == [1], "the handler cancelled")
    await until(lambda: len(port.notes) == 2, "the handler's late write")
    assert isinstance(port.notes[1], asyncio.InvalidStateError)
    with pytest.raises(asyncio.InvalidStateError):
        await call.write(message(b"2"))
    # The connection stays, and serves the next call.
    other = channel.Session(timeout=BOUND_S)
    await other.write(message(b"2"))
    await until(lambda: port.notes[2:] == [2], "the next call's message read")
    assert [s.stream_id for s in port.started] == [1, 2]


@scenario(behave=hold)
async def test_cancelling_a_call_cancels_its_handler(port: Port) -> None:
    channel = port.channel()
    call = channel.Session(timeout=BOUND_S)
    await call.write(message(b"1"))
    await until(lambda: port.notes == [1], "the message read")
    assert call.cancel() is True and call.cancel() is False
    assert await call.code() == grpc.StatusCode.CANCELLED
    await until(lambda: port.cancelled == [1], "the handler cancelled")
    await until(lambda: len(port.notes) == 2, "the handler's late write")
    assert isinstance(port.notes[1], asyncio.InvalidStateError)
    await until(lambda: not port.connection().streams, "the stream forgotten")
    assert channel.channel.live_connection() is not None  # (cancelling keeps the connection)


@scenario(behave=hold)
async def test_a_lost_connection_ends_its_calls_unavailable(port: Port) -> None:
    """Pending calls end UNAVAILABLE (their handlers are cancelled); the next call on the same
    channel connects again and is served."""
    channel = port.channel()
    calls = [channel.Session(timeout=BOUND_S) for _ in range(2)]
    for n, call in enumerate(calls, 1):
        await call.write(message(b"x"))
        await until(lambda n=n: len(port.notes) == n, "the message read")  # type: ignore[misc]
    before = channel.channel.live_connection()
    port.connection().transport.abort()
    for call in calls:
        code, details = await refused(call)
        assert code == grpc.StatusCode.UNAVAILABLE, code
        assert details.startswith("the connection to the framed port was lost"), details
    await until(lambda: sorted(port.cancelled) == [1, 2], "the handlers cancelled")
    assert channel.channel.live_connection() is None
    port.behave = echo
    again = channel.Session(timeout=BOUND_S)
    await again.write(message(b"again"))
    assert (await again.read()).challenge == b"again"
    assert channel.channel.live_connection() not in (None, before)
    assert len(port.server.connections) == 1


# -- handlers' errors, unparsable messages, ends -------------------------------------------------


async def refuse(port: Port, stream: ServerStream) -> None:
    got = await stream.read()
    if got.vector_data == b"auth":
        raise AuthenticationError("the open's signature does not verify")
    raise RuntimeError("secret at /srv/key.pem\nTraceback (most recent call last)")


@scenario(behave=refuse)
async def test_a_handlers_errors_end_its_stream_with_their_status(port: Port) -> None:
    """A FedhhError ends the stream with its code and details; anything else INTERNAL with
    "internal error", nothing of it shown."""
    channel = port.channel()
    call = channel.Session(timeout=BOUND_S)
    await call.write(message(b"auth"))
    assert await refused(call) == (grpc.StatusCode.UNAUTHENTICATED,
                                   "the open's signature does not verify")
    call = channel.Session(timeout=BOUND_S)
    await call.write(message(b"bug"))
    assert await refused(call) == (grpc.StatusCode.INTERNAL, "internal error")
    assert (await call.trailing_metadata()) == grpc.aio.Metadata()
    assert len(port.server.connections) == 1 and not port.cancelled


async def parse_one(port: Port, stream: ServerStream) -> None:
    try:
        await stream.read()
    except UnparsableRequest as error:
        port.notes.append(error)
        raise
    await echo(port, stream)


@scenario(behave=parse_one)
async def test_an_unparsable_message_ends_its_stream_invalid_argument(port: Port) -> None:
    raw = await port.raw(open_frame(1), frame(1, Kind.MESSAGE, b"\xff\xff\xff\xff"),
                         open_frame(2))
    code, details = await raw.end(1)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith("the request does not parse"), details
    assert len(port.notes) == 1 and isinstance(port.notes[0], UnparsableRequest)
    assert port.connection()._unread == 0
    # The connection's other stream is served (and the refused one's late frames ignored).
    raw.send(frame(1, Kind.MESSAGE, b"late"), frame(1, Kind.CLOSE),
             frame(2, Kind.MESSAGE, message(b"").SerializeToString()),
             frame(2, Kind.MESSAGE, message(b"ok").SerializeToString()))
    assert (await raw.event(2)).challenge == b"ok"
    assert len(port.server.connections) == 1


async def answer_in_status(port: Port, stream: ServerStream) -> None:
    got = await stream.read()
    await stream.write(event(got.vector_data))
    stream.set_trailing_metadata((("fedhh-unmask-accepted", "7"), ("x-other", "y")))


@scenario(behave=answer_in_status)
async def test_trailing_metadata_and_an_ok_end(port: Port) -> None:
    """Trailing metadata reaches trailing_metadata(); after an OK end read() returns EOF (every
    time) and write raises InvalidStateError."""
    channel = port.channel()
    call = channel.Session(timeout=BOUND_S)
    await call.write(message(b"shares"))
    assert (await call.read()).challenge == b"shares"
    assert await call.read() is EOF and await call.read() is EOF
    assert call.done() and await call.code() == grpc.StatusCode.OK
    assert await call.details() == ""
    assert await call.trailing_metadata() == grpc.aio.Metadata(
        ("fedhh-unmask-accepted", "7"), ("x-other", "y"))
    with pytest.raises(asyncio.InvalidStateError):
        await call.write(message(b"more"))
    assert call.cancel() is False


# -- back-pressure ---------------------------------------------------------------------------


async def slow_reader(port: Port, stream: ServerStream) -> None:
    """Reads nothing until released; then counts the messages until EOF and answers the
    count."""
    await port.release.wait()
    count = 0
    while await stream.read() is not EOF:
        count += 1
    await stream.write(event(str(count).encode()))


UNREAD = 1 << 16
READ_CHUNK = 1 << 18  # what one read of the event loop may deliver at once (uvloop: 256 KiB)


@scenario(behave=slow_reader, max_unread_bytes=UNREAD, max_message_bytes=1 << 14)
async def test_a_connection_whose_messages_wait_unread_is_not_read(port: Port) -> None:
    """A client floods a stream whose handler does not read: the server stops reading the
    connection (what it holds stays near max_unread_bytes, the rest waits in the kernel: the
    client's writes back up); once the handler reads, reading resumes and every message
    arrives."""
    raw = await port.raw(open_frame(1), sndbuf=1 << 15)
    await until(lambda: len(port.started) == 1, "the stream served")
    connection = port.connection()
    one = frame(1, Kind.MESSAGE, message(b"m" * 8000).SerializeToString())
    batch = one * 8
    sent = 0
    stop = asyncio.Event()

    async def flood() -> None:
        nonlocal sent
        while not stop.is_set():
            raw.send(batch)
            sent += 8
            await raw.writer.drain()

    flooding = asyncio.create_task(flood())
    try:
        await until(lambda: not connection._reading, "reading paused")
        # The kernel's buffers fill: the client's writes back up.
        await until(lambda: raw.writer.transport.get_write_buffer_size() > 0,
                    "the client's writes backed up")
        held = connection._unread
        assert UNREAD < held <= UNREAD + READ_CHUNK + len(one), held
        assert not connection.transport.is_reading()
        for _ in range(50):  # (the loop turns; the server reads nothing)
            await asyncio.sleep(0)
        assert connection._unread == held and not connection.transport.is_reading()
        assert sent * len(one) > held + len(connection.splitter._buffer)
        stop.set()
        port.release.set()
        await asyncio.wait_for(flooding, BOUND_S)
    finally:
        stop.set()
        port.release.set()
        flooding.cancel()
    raw.send(frame(1, Kind.CLOSE))
    assert (await raw.event(1)).challenge == str(sent).encode()
    assert await raw.end(1) == (grpc.StatusCode.OK, "")
    assert connection._reading and connection.transport.is_reading()
    assert connection._unread == 0


TALK = 200  # events of 64 KiB: far more than the kernel's buffers hold


async def talker(port: Port, stream: ServerStream) -> None:
    """Writes TALK events, counting each written."""
    data = event(b"e" * (1 << 16)).SerializeToString()
    for n in range(TALK):
        await stream.write(data)
        port.notes.append(n)


@scenario(behave=talker)
async def test_a_handlers_writes_wait_while_the_client_does_not_read(port: Port) -> None:
    """A handler's write waits while the peer does not read (what the server holds for it
    stays bounded); once the client reads, every event arrives, then the end."""
    raw = await port.raw(open_frame(1))
    await until(lambda: len(port.server.connections) == 1, "the connection")
    connection = port.connection()
    await until(lambda: connection.frames.paused, "writing paused")
    for _ in range(5):  # (the write that then waits)
        await asyncio.sleep(0)
    written = len(port.notes)
    for _ in range(50):  # (the loop turns; the handler writes nothing)
        await asyncio.sleep(0)
    assert len(port.notes) == written < TALK
    assert connection.transport.get_write_buffer_size() < 1 << 20
    for n in range(TALK):
        assert len((await raw.event(1)).challenge) == 1 << 16, n
    assert await raw.end(1) == (grpc.StatusCode.OK, "")
    assert len(port.notes) == TALK


LAZY_TALK = 1000  # events of 64 KiB: several times what the kernel's buffers hold


async def lazy_talker(port: Port, stream: ServerStream) -> None:
    """Writes LAZY_TALK events at once, each made (and counted) when its turn comes."""
    data = event(b"e" * (1 << 16)).SerializeToString()

    def make(n: int) -> bytes:
        port.notes.append(n)
        return data
    await asyncio.gather(*(stream.write(functools.partial(make, n)) for n in range(LAZY_TALK)))


@scenario(behave=lazy_talker)
async def test_events_waiting_for_a_client_that_does_not_read_are_not_made(port: Port) -> None:
    """Events written as functions that make them wait unmade while the client does not read
    (a stage's requests to a slow device process stay unencoded); once it reads, every event
    is made and arrives, in the order written."""
    raw = await port.raw(open_frame(1))
    await until(lambda: len(port.server.connections) == 1, "the connection")
    connection = port.connection()
    await until(lambda: connection.frames.paused, "writing paused")
    made = len(port.notes)
    for _ in range(50):  # (the loop turns; nothing more is made)
        await asyncio.sleep(0)
    assert len(port.notes) == made < LAZY_TALK // 2
    for n in range(LAZY_TALK):
        assert len((await raw.event(1)).challenge) == 1 << 16, n
    assert await raw.end(1) == (grpc.StatusCode.OK, "")
    assert port.notes == list(range(LAZY_TALK))


# -- configuration -------------------------------------------------------------------------------


async def serve_nothing(stream: ServerStream) -> None:
    pass


def test_limits_and_plaintext_are_checked() -> None:
    for bad in (dict(max_message_bytes=0), dict(max_message_bytes=1023),
                dict(max_message_bytes=(16 << 20) + 1), dict(max_streams_per_connection=0),
                dict(max_connections=0), dict(max_unread_bytes=0),
                dict(handshake_timeout_s=0.0), dict(request_timeout_s=0.0),
                dict(idle_timeout_s=-1.0)):
        with pytest.raises(ConfigError):
            FramedLimits(**{**LIMITS, **bad})

    async def main() -> None:
        limits = FramedLimits(**LIMITS)
        server = FramedServer(
            "test session port",
            {SESSION: StreamMethod(serve_nothing, pb.SessionMessage.FromString)}, limits, None)
        with pytest.raises(ConfigError, match="TLS"):
            await server.start("127.0.0.1", 0, insecure=False)
        with pytest.raises(ConfigError, match="loopback"):
            await server.start("0.0.0.0", 0, insecure=True)
        assert server.listener is None
        with pytest.raises(ConfigError, match="no methods"):
            FramedServer("test session port", {}, limits, None)
    run(main())
    with pytest.raises(ConfigError, match="loopback"):
        FramedChannel("10.0.0.1:443", None)
    with pytest.raises(ConfigError, match="no method Nope"):
        FramedStub(FramedChannel("127.0.0.1:443", None), SERVICE, ("Nope",))


# -- the wire format -------------------------------------------------------------------------


frames_strategy = st.lists(st.tuples(
    st.integers(0, (1 << 32) - 1), st.integers(0, 255), st.binary(max_size=40)), max_size=8)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(frames=frames_strategy, max_payload=st.integers(0, 24),
       cuts=st.lists(st.integers(0, 400), max_size=12), data=st.data())
def test_frame_splitter_at_any_byte_boundary(
        frames: list[tuple[int, int, bytes]], max_payload: int, cuts: list[int],
        data: st.DataObject) -> None:
    """Fed in pieces cut anywhere, a splitter gives exactly the frames that were framed, each as
    soon as it can: a frame once complete; an oversize one (payload None) once its header has
    arrived, its payload then skipped exactly. It holds only an incomplete frame's bytes."""
    wire = b"".join(any_frame(sid, kind, payload) for sid, kind, payload in frames)
    # Each frame: where it begins, when it comes out, where it ends, what comes out.
    expected: list[tuple[int, int, int, tuple[int, int, bytes | None]]] = []
    at = 0
    for sid, kind, payload in frames:
        end = at + HEADER.size + len(payload)
        oversize = len(payload) > max_payload
        expected.append((at, at + HEADER.size if oversize else end, end,
                         (sid, kind, None if oversize else payload)))
        at = end
    points = sorted({min(c, len(wire)) for c in cuts} | {len(wire)})
    splitter = FrameSplitter(max_payload)
    out: list[tuple[int, int, bytes | None]] = []
    previous = 0
    for point in points:
        chunk = wire[previous:point]
        if chunk and data.draw(st.booleans(), "feed an empty chunk first"):
            assert list(splitter.feed(b"")) == []
        out.extend(splitter.feed(chunk))
        previous = point
        assert out == [what for _, ready, _, what in expected if ready <= point]
        # Held: the bytes of the frame under way, unless it is an oversize one past its header
        # (its payload is dropped as it comes).
        held = [point - start for start, ready, end, what in expected
                if start < point < end and ready > point]
        assert len(splitter._buffer) == (held[0] if held else 0), (point, len(splitter._buffer))
    assert out == [what for _, _, _, what in expected]
    assert len(splitter._buffer) == 0 and splitter._skip == 0


def test_frame_splitter_skips_an_oversize_payload_fed_byte_by_byte() -> None:
    wire = frame(1, Kind.MESSAGE, b"a" * 30) + frame(2, Kind.MESSAGE, b"ok")
    splitter = FrameSplitter(8)
    out = [f for byte in range(len(wire)) for f in splitter.feed(wire[byte:byte + 1])]
    assert out == [(1, Kind.MESSAGE, None), (2, Kind.MESSAGE, b"ok")]
    assert len(splitter._buffer) == 0 and splitter._skip == 0


def test_frame_format() -> None:
    assert frame(0x01020304, Kind.END, b"xy") == b"\x01\x02\x03\x04\x06\x00\x00\x00\x02xy"
    assert HEADER.size == 9 and PREFACE.endswith(b"\r\n")


def test_a_channel_falls_back_while_its_port_cannot_be_reached() -> None:
    """A channel whose port cannot be reached: the call that tried ends UNAVAILABLE, and for
    FALLBACK_S afterwards its streams are its fallback's (the aggregator's gRPC stub); after
    that it tries the port again. Without a fallback it keeps trying the port."""
    class Fallback:
        def __init__(self) -> None:
            self.timeouts: list[float | None] = []

        def Session(self, timeout: float | None = None) -> str:
            self.timeouts.append(timeout)
            return "the gRPC stream"

    async def main() -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            address = f"127.0.0.1:{sock.getsockname()[1]}"  # (bound, not listening)
            fallback = Fallback()
            channel = FramedStub(FramedChannel(address, None), SERVICE, ("Session",), fallback)
            assert (await refused(channel.Session(timeout=BOUND_S)))[0] == \
                grpc.StatusCode.UNAVAILABLE
            assert channel.Session(timeout=5.0) == "the gRPC stream"
            assert fallback.timeouts == [5.0]
            channel.channel._unreachable_until = 0.0  # (FALLBACK_S later)
            assert isinstance(channel.Session(timeout=5.0), FramedCall)
            alone = FramedStub(FramedChannel(address, None), SERVICE, ("Session",))
            assert (await refused(alone.Session(timeout=BOUND_S)))[0] == \
                grpc.StatusCode.UNAVAILABLE
            assert isinstance(alone.Session(timeout=BOUND_S), FramedCall)
    run(main())


# -- unary methods and routing ---------------------------------------------------------------


OK = (("authorization", "Bearer ok"),)
NOPE = "/fedhh.v1.DeviceService/Nope"


class Devices:
    """The coordinator's device service as the port serves it (``Port(unary=True)``): GetTask
    answers with what it was given (the request's ``known_task`` as its task, the call's
    authorization as its signature) and records the request, the metadata and the peer its
    context held; device ids 404, 429, 412 and 500 end it otherwise, and device 102 is held
    (a long-poll: ``holding`` is set) until cancelled. Enroll aborts by itself. GetTask's
    credential check (``check``) records what it was shown and wants ``Bearer ok``."""

    def __init__(self) -> None:
        self.checked: list[dict[str, str]] = []
        self.seen: list[tuple[int, dict[str, str], str]] = []
        self.holding = asyncio.Event()

    def check(self, metadata: tuple[tuple[str, str | bytes], ...]) -> None:
        shown = {key: str(value) for key, value in metadata}
        self.checked.append(shown)
        if shown.get("authorization") == "Bearer store-down":
            raise KeyError("the store failed")  # (not a FedhhError: a bug, or the store)
        if shown.get("authorization") != "Bearer ok":
            raise AuthenticationError("a device credential is required")

    @status_errors
    async def GetTask(self, request: coordinator_pb.GetTaskRequest, context: CallContext
                      ) -> coordinator_pb.GetTaskResponse:
        metadata = dict(context.invocation_metadata())
        self.seen.append((request.device_id, metadata, context.peer()))
        if request.device_id == 404:
            raise NotFoundError("no device 404")
        if request.device_id == 429:
            raise RateLimited("device 429 asks too often")
        if request.device_id == 412:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "device 412 is in no run")
        if request.device_id == 500:
            raise RuntimeError("secret at /srv/key.pem")
        if request.device_id == 102:
            self.holding.set()
            await asyncio.Event().wait()
        return coordinator_pb.GetTaskResponse(task=coordinator_pb.SignedTask(
            task=request.known_task,
            shared_signature=metadata.get("authorization", "").encode()))

    async def Enroll(self, request: coordinator_pb.EnrollRequest, context: CallContext
                     ) -> coordinator_pb.EnrollResponse:
        await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{request.label}: not enrolled")
        raise AssertionError("unreachable")


def get_task(device_id: int) -> coordinator_pb.GetTaskRequest:
    return coordinator_pb.GetTaskRequest(device_id=device_id, known_task=b"t%d" % device_id)


def unary_frames(stream_id: int, request: bytes, method: str = GET_TASK, **metadata: str
                 ) -> bytes:
    """A unary call by hand: its OPEN, its request, its CLOSE."""
    return (open_frame(stream_id, method, **metadata) + frame(stream_id, Kind.MESSAGE, request)
            + frame(stream_id, Kind.CLOSE))


async def answered(raw: Raw, stream_id: int) -> coordinator_pb.GetTaskResponse:
    """A unary call's answer on ``raw``: one EVENT, then an OK end."""
    got = await raw.frame()
    assert got[:2] == (stream_id, Kind.EVENT), got
    assert await raw.end(stream_id) == (grpc.StatusCode.OK, "")
    return coordinator_pb.GetTaskResponse.FromString(got[2])


def calls_opened(method: str) -> float:
    """CALLS's count for ``method`` (0 before its first call)."""
    return next((sample.value for metric in CALLS.collect() for sample in metric.samples
                 if sample.name.endswith("_total") and sample.labels == {"method": method}),
                0.0)


async def refused_unary(call: Awaitable[Any]) -> tuple[grpc.StatusCode, str]:
    """The unary call fails: its code and details."""
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        async with asyncio.timeout(BOUND_S):
            await call
    return failed.value.code(), failed.value.details()


@scenario(unary=True)
async def test_a_unary_method_is_served_with_its_metadata(port: Port) -> None:
    """A Procedure on the port, called through a FramedStub: its credential check and then the
    servicer's method see the call's metadata, the method its request and the peer (as gRPC
    names it), and its answer is the call's; each call opened is counted by its method.
    Concurrent calls share the connection, each answered its own."""
    stub = port.device_stub()
    before = calls_opened(GET_TASK)
    answer = await stub.GetTask(get_task(7), metadata=(*OK, ("x-trace", "abc")),
                                timeout=BOUND_S)
    assert answer == coordinator_pb.GetTaskResponse(task=coordinator_pb.SignedTask(
        task=b"t7", shared_signature=b"Bearer ok"))
    shown = {"authorization": "Bearer ok", "x-trace": "abc"}
    assert port.devices.checked == [shown]
    connection = stub.channel.live_connection()
    assert connection is not None
    local = connection.transport.get_extra_info("sockname")
    assert port.devices.seen == [(7, shown, f"ipv4:127.0.0.1:{local[1]}")]
    assert calls_opened(GET_TASK) == before + 1
    answers = await asyncio.gather(*(stub.GetTask(get_task(n), metadata=OK, timeout=BOUND_S)
                                     for n in range(1, 5)))  # (4: the port's stream limit)
    assert [a.task.task for a in answers] == [b"t1", b"t2", b"t3", b"t4"]
    assert sorted(seen[0] for seen in port.devices.seen) == [1, 2, 3, 4, 7]
    assert calls_opened(GET_TASK) == before + 5
    assert stub.channel.live_connection() is connection and len(port.server.connections) == 1
    await until(lambda: not port.connection().streams, "the calls forgotten")


@scenario(unary=True)
async def test_a_credential_check_that_fails_ends_only_its_call(port: Port) -> None:
    """A credential check that fails otherwise than by refusing (the store down, a bug) ends
    its call INTERNAL, without the handler; the connection's other calls go on. A stub's
    unary method takes its timeout and metadata by keyword only, as a grpc.aio stub's."""
    stub = port.device_stub()
    with pytest.raises(TypeError):
        await stub.GetTask(get_task(7), BOUND_S)
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await stub.GetTask(get_task(7), timeout=BOUND_S,
                           metadata=(("Authorization", "Bearer store-down"),))
    assert (failed.value.code(), failed.value.details()) == \
        (grpc.StatusCode.INTERNAL, "internal error")
    assert port.devices.seen == []
    connection = stub.channel.live_connection()
    answer = await stub.GetTask(get_task(8), timeout=BOUND_S, metadata=OK)
    assert answer.task.task == b"t8" and stub.channel.live_connection() is connection


@scenario(unary=True)
async def test_a_call_refused_by_its_credential_check_is_never_read(port: Port) -> None:
    """A call whose metadata fail its method's credential check ends UNAUTHENTICATED as soon as
    its OPEN arrives, before its request was even sent: its handler never runs, the request
    that follows is dropped unread, the call is not counted, and the connection serves the
    next call. Through the stub: the same refusal, without metadata too."""
    before = calls_opened(GET_TASK)
    raw = await port.raw(open_frame(1, GET_TASK, authorization="Bearer forged"))
    assert await raw.end(1) == (grpc.StatusCode.UNAUTHENTICATED,
                                "a device credential is required")
    assert port.devices.checked == [{"authorization": "Bearer forged"}]
    connection = port.connection()
    assert not connection.streams
    raw.send(frame(1, Kind.MESSAGE, get_task(1).SerializeToString()), frame(1, Kind.CLOSE),
             unary_frames(2, get_task(2).SerializeToString(), authorization="Bearer ok"))
    assert (await answered(raw, 2)).task.task == b"t2"
    assert [seen[0] for seen in port.devices.seen] == [2]
    assert connection._unread == 0 and not connection.streams
    assert calls_opened(GET_TASK) == before + 1
    stub = port.device_stub()
    for metadata in ((("authorization", "Bearer forged"),), None):
        assert await refused_unary(stub.GetTask(get_task(3), metadata=metadata,
                                                timeout=BOUND_S)) == \
            (grpc.StatusCode.UNAUTHENTICATED, "a device credential is required")
    assert port.devices.checked[-2:] == [{"authorization": "Bearer forged"}, {}]
    assert [seen[0] for seen in port.devices.seen] == [2]
    assert calls_opened(GET_TASK) == before + 1


@scenario(unary=True)
async def test_an_open_the_port_cannot_serve_ends_only_its_call(port: Port) -> None:
    """An OPEN of a method the port does not serve ends UNIMPLEMENTED, one whose payload does
    not parse INVALID_ARGUMENT, one above max_message_bytes RESOURCE_EXHAUSTED as soon as its
    header arrives (its payload skipped): each at once, uncounted, no check nor handler run;
    the refused calls' later frames are dropped, and the connection serves the next call."""
    before = {path: calls_opened(path) for path in (GET_TASK, NOPE)}
    raw = await port.raw(open_frame(1, NOPE, authorization="Bearer ok"))
    assert await raw.end(1) == (grpc.StatusCode.UNIMPLEMENTED, f"no method {NOPE!r} on this port")
    for stream_id, payload in ((2, b"\xff"), (3, b"\x00"), (4, b"\x0a\x05ab")):
        raw.send(frame(stream_id, Kind.OPEN, payload))
        assert await raw.end(stream_id) == (grpc.StatusCode.INVALID_ARGUMENT,
                                            "the OPEN does not parse"), payload
    big = framed_pb2.FramedOpen(method=GET_TASK, metadata={
        "authorization": "Bearer ok", "x-pad": "p" * 5000}).SerializeToString()
    raw.send(HEADER.pack(5, Kind.OPEN, len(big)), big[:100])  # (the header, a little more)
    assert await raw.end(5) == (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                "an OPEN above 4096 bytes")
    request = get_task(6).SerializeToString()
    raw.send(big[100:], frame(5, Kind.MESSAGE, request), frame(5, Kind.CLOSE),
             frame(1, Kind.MESSAGE, request), frame(2, Kind.CLOSE),
             unary_frames(6, request, authorization="Bearer ok"))
    assert (await answered(raw, 6)).task.task == b"t6"
    assert port.devices.checked == [{"authorization": "Bearer ok"}]
    assert [seen[0] for seen in port.devices.seen] == [6]
    assert calls_opened(GET_TASK) == before[GET_TASK] + 1 and calls_opened(NOPE) == 0.0
    connection = port.connection()
    assert not connection.streams and connection._unread == 0
    assert len(connection.splitter._buffer) == 0 and connection.splitter._skip == 0


@scenario(unary=True)
async def test_an_open_the_port_cannot_serve_through_the_channel(port: Port) -> None:
    """The device's channel sees those refusals as AioRpcError with gRPC's codes, and its
    connection serves the next call."""
    stub = port.device_stub()
    channel = stub.channel
    assert await refused_unary(channel.unary(
        NOPE, get_task(1), coordinator_pb.GetTaskResponse, metadata=OK, timeout=BOUND_S)) == \
        (grpc.StatusCode.UNIMPLEMENTED, f"no method {NOPE!r} on this port")
    connection = channel.live_connection()
    assert connection is not None
    assert await refused_unary(stub.GetTask(
        get_task(2), metadata=(*OK, ("x-pad", "p" * 5000)), timeout=BOUND_S)) == \
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "an OPEN above 4096 bytes")
    assert (await stub.GetTask(get_task(3), metadata=OK, timeout=BOUND_S)).task.task == b"t3"
    assert channel.live_connection() is connection and len(port.server.connections) == 1
    assert [seen[0] for seen in port.devices.seen] == [3]


@scenario(unary=True)
async def test_a_handlers_abort_ends_its_call_with_its_status(port: Port) -> None:
    """A FedhhError in a status_errors method ends the call with its code and details, as does
    a handler's own ``context.abort`` (within status_errors or not); anything else INTERNAL
    "internal error". The client gets them as AioRpcError, with no answer before the end; the
    connection serves on."""
    stub = port.device_stub(("GetTask", "Enroll"))
    for device_id, status in (
            (404, (grpc.StatusCode.NOT_FOUND, "no device 404")),
            (429, (grpc.StatusCode.RESOURCE_EXHAUSTED, "device 429 asks too often")),
            (412, (grpc.StatusCode.FAILED_PRECONDITION, "device 412 is in no run")),
            (500, (grpc.StatusCode.INTERNAL, "internal error"))):
        assert await refused_unary(stub.GetTask(get_task(device_id), metadata=OK,
                                                timeout=BOUND_S)) == status, device_id
    assert await refused_unary(stub.Enroll(coordinator_pb.EnrollRequest(label="d9"),
                                           timeout=BOUND_S)) == \
        (grpc.StatusCode.PERMISSION_DENIED, "d9: not enrolled")
    assert (await stub.GetTask(get_task(1), metadata=OK, timeout=BOUND_S)).task.task == b"t1"
    raw = await port.raw(unary_frames(1, get_task(404).SerializeToString(),
                                      authorization="Bearer ok"))
    assert await raw.end(1) == (grpc.StatusCode.NOT_FOUND, "no device 404")  # (and no EVENT)
    raw.send(unary_frames(2, get_task(2).SerializeToString(), authorization="Bearer ok"))
    assert (await answered(raw, 2)).task.task == b"t2"


@scenario(unary=True)
async def test_a_unary_call_without_a_request_that_parses(port: Port) -> None:
    """A unary call closed before its request ends INVALID_ARGUMENT "a unary call without its
    request", one whose request does not parse INVALID_ARGUMENT too; the servicer's method
    never runs (the calls were opened: their checks passed) and the connection serves on."""
    before = calls_opened(GET_TASK)
    raw = await port.raw(open_frame(1, GET_TASK, authorization="Bearer ok"),
                         frame(1, Kind.CLOSE))
    assert await raw.end(1) == (grpc.StatusCode.INVALID_ARGUMENT,
                                "a unary call without its request")
    raw.send(unary_frames(2, b"\xff\xff\xff\xff", authorization="Bearer ok"))
    code, details = await raw.end(2)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith("the request does not parse"), details
    assert not port.devices.seen and len(port.devices.checked) == 2
    assert calls_opened(GET_TASK) == before + 2
    raw.send(unary_frames(3, get_task(3).SerializeToString(), authorization="Bearer ok"))
    assert (await answered(raw, 3)).task.task == b"t3"
    connection = port.connection()
    assert not connection.streams and connection._unread == 0


def test_a_stubs_unary_methods_fall_back_while_its_port_cannot_be_reached() -> None:
    """A stub's methods not named framed are always its fallback's, the port reachable or not;
    a framed unary method's call that cannot reach the port is made on the fallback at once
    (same request, metadata and timeout), and so is the method for FALLBACK_S afterwards;
    after that it tries the port again. Without a fallback the call ends UNAVAILABLE."""
    class Fallback:
        def __init__(self) -> None:
            self.calls: list[tuple[str, Any, Any, float | None]] = []

        async def GetTask(self, request: coordinator_pb.GetTaskRequest, metadata: Any = None,
                          timeout: float | None = None) -> coordinator_pb.GetTaskResponse:
            self.calls.append(("GetTask", request.device_id, metadata, timeout))
            return coordinator_pb.GetTaskResponse(retry_after_ms=request.device_id)

        async def Enroll(self, request: coordinator_pb.EnrollRequest, metadata: Any = None,
                         timeout: float | None = None) -> coordinator_pb.EnrollResponse:
            self.calls.append(("Enroll", request.label, metadata, timeout))
            return coordinator_pb.EnrollResponse(device_id=9)

    enroll = coordinator_pb.EnrollRequest(label="d9")

    async def main() -> None:
        async with serving(unary=True) as port:  # (a port that serves Enroll too)
            fallback = Fallback()
            stub = port.device_stub(("GetTask",), fallback)
            assert (await stub.GetTask(get_task(1), metadata=OK, timeout=BOUND_S)).task.task \
                == b"t1"
            assert (await stub.Enroll(enroll, timeout=5.0)).device_id == 9
            assert fallback.calls == [("Enroll", "d9", None, 5.0)]
            assert [seen[0] for seen in port.devices.seen] == [1]
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            address = f"127.0.0.1:{sock.getsockname()[1]}"  # (bound, not listening)
            fallback = Fallback()
            stub = FramedStub(FramedChannel(address, None), DEVICES, ("GetTask",), fallback)
            assert not stub.channel.unreachable()
            assert (await stub.Enroll(enroll, timeout=5.0)).device_id == 9
            tried = time.monotonic()
            assert (await stub.GetTask(get_task(1), metadata=OK, timeout=5.0)) \
                == coordinator_pb.GetTaskResponse(retry_after_ms=1)
            assert stub.channel.unreachable()
            assert tried + FALLBACK_S <= stub.channel._unreachable_until \
                <= time.monotonic() + FALLBACK_S
            assert (await stub.GetTask(get_task(2), metadata=OK, timeout=5.0)) \
                == coordinator_pb.GetTaskResponse(retry_after_ms=2)
            assert fallback.calls == [("Enroll", "d9", None, 5.0), ("GetTask", 1, OK, 5.0),
                                      ("GetTask", 2, OK, 5.0)]
            stub.channel._unreachable_until = 0.0  # (FALLBACK_S later: the port again)
            assert (await stub.GetTask(get_task(3), metadata=OK, timeout=5.0)).retry_after_ms \
                == 3
            assert stub.channel.unreachable()
            assert (await stub.Enroll(enroll)).device_id == 9
            assert [call[:2] for call in fallback.calls] == [
                ("Enroll", "d9"), ("GetTask", 1), ("GetTask", 2), ("GetTask", 3),
                ("Enroll", "d9")]
            alone = FramedStub(FramedChannel(address, None), DEVICES, ("GetTask",))
            for device_id in (4, 5):  # (no fallback: it keeps trying the port)
                code, details = await refused_unary(alone.GetTask(
                    get_task(device_id), metadata=OK, timeout=BOUND_S))
                assert code == grpc.StatusCode.UNAVAILABLE, code
                assert details.startswith(f"cannot reach the framed port {address}"), details
            with pytest.raises(AttributeError):
                alone.Enroll  # noqa: B018
    run(main())


@scenario(unary=True, request_timeout_s=0.5)
async def test_a_unary_call_takes_one_request_in_time(port: Port) -> None:
    """A unary call's request is due within request_timeout_s of its OPEN: one that does not
    come ends the call DEADLINE_EXCEEDED (the port holds no call for a request that never
    comes); a second request ends it INVALID_ARGUMENT. The connection serves the next call."""
    raw = await port.raw(open_frame(1, GET_TASK, authorization="Bearer ok"))
    opened = time.monotonic()
    assert await raw.end(1) == (grpc.StatusCode.DEADLINE_EXCEEDED,
                                "the request did not arrive within 0.5 s")
    assert time.monotonic() - opened >= 0.5 - TICK
    request = get_task(2).SerializeToString()
    raw.send(open_frame(2, GET_TASK, authorization="Bearer ok"), frame(2, Kind.MESSAGE, request),
             frame(2, Kind.MESSAGE, request))  # (both read before the handler runs)
    assert await raw.end(2) == (grpc.StatusCode.INVALID_ARGUMENT,
                                "a unary call takes one request")
    raw.send(unary_frames(3, get_task(3).SerializeToString(), authorization="Bearer ok"))
    assert (await answered(raw, 3)).task.task == b"t3"
    assert [seen[0] for seen in port.devices.seen] == [3]


@scenario(unary=True, max_streams_per_connection=8, max_waiting_requests=3,
          request_timeout_s=2.0)
async def test_unary_calls_waiting_for_their_requests_are_capped_per_port(port: Port) -> None:
    """At most max_waiting_requests unary calls of the port, over all its connections, wait for
    their requests at once (an opener of calls that never sends them held ~3.5 KB a call, for
    65,536 calls a connection): one more is ended UNAVAILABLE at once, unread, uncounted. A
    place is given back when the request arrives, when the call is closed or cancelled
    without it, when its deadline ends it, and when its connection is lost; a call whose
    request came with its OPEN never holds one for long, and session streams hold none."""
    waits = port.server.request_waits
    assert (waits.limit, waits.timeout_s) == (3, 2.0)
    request = get_task(9).SerializeToString()
    before = calls_opened(GET_TASK)
    first = await port.raw(open_frame(1, GET_TASK, authorization="Bearer ok"),
                           open_frame(2, GET_TASK, authorization="Bearer ok"))
    second = await port.raw(open_frame(1, GET_TASK, authorization="Bearer ok"))
    await until(lambda: waits.waiting == 3, "three calls waiting")
    other = await port.raw(open_frame(1, GET_TASK, authorization="Bearer ok"),
                           open_frame(3, SESSION))  # (a session stream: no place taken)
    assert await other.end(1) == (grpc.StatusCode.UNAVAILABLE,
                                  "busy: 3 calls wait for their requests here; retry after a "
                                  "backoff")
    assert calls_opened(GET_TASK) == before + 3 and waits.waiting == 3
    other.send(frame(3, Kind.MESSAGE, message(b"session").SerializeToString()))
    assert (await other.event(3)).challenge == b"session"
    other.send(frame(1, Kind.MESSAGE, request), unary_frames(5, request, authorization="Bearer ok"))
    assert await other.end(5) == (grpc.StatusCode.UNAVAILABLE, waits.busy)
    # The request of one, a CLOSE of another, a CANCEL of the third: three places back.
    first.send(frame(1, Kind.MESSAGE, request))
    assert (await answered(first, 1)).task.task == b"t9"
    first.send(frame(2, Kind.CLOSE))
    assert await first.end(2) == (grpc.StatusCode.INVALID_ARGUMENT,
                                  "a unary call without its request")
    second.send(frame(1, Kind.CANCEL))
    await until(lambda: waits.waiting == 0, "every place given back")
    # A request with its OPEN: served, holding no place after its read.
    other.send(unary_frames(7, request, authorization="Bearer ok"))
    assert (await answered(other, 7)).task.task == b"t9"
    # A place held until the deadline, and places held by a connection that is lost.
    first.send(open_frame(3, GET_TASK, authorization="Bearer ok"))
    second.send(open_frame(3, GET_TASK, authorization="Bearer ok"),
                open_frame(5, GET_TASK, authorization="Bearer ok"))
    await until(lambda: waits.waiting == 3, "three calls waiting again")
    second.close()
    await until(lambda: waits.waiting == 1, "the lost connection's places given back")
    assert await first.end(3) == (grpc.StatusCode.DEADLINE_EXCEEDED,
                                  "the request did not arrive within 2 s")
    await until(lambda: waits.waiting == 0, "the late call's place given back")
    other.send(unary_frames(9, request, authorization="Bearer ok"))
    assert (await answered(other, 9)).task.task == b"t9"


@scenario(unary=True, max_streams_per_connection=64, max_waiting_requests=3)
async def test_a_cancel_gives_its_calls_place_back_at_once(port: Port) -> None:
    """A CANCEL gives its call's place among those waiting for their requests back as it is
    read, not once its handler's end is seen a turn or two of the loop later. Before, a
    client that opened and cancelled calls, each pair in one write (4 x 65,536 at a
    coordinator's framed port), had 224,873 of them refused UNAVAILABLE "busy", and every
    other device's call with them, the places held by calls already cancelled."""
    request = get_task(9).SerializeToString()
    raw = await port.raw(*(open_frame(i, GET_TASK, authorization="Bearer ok")
                           + frame(i, Kind.CANCEL) for i in range(1, 64, 2)),
                         unary_frames(65, request, authorization="Bearer ok"))
    # (the first frame back: no END of a refused call before it)
    assert (await answered(raw, 65)).task.task == b"t9"
    await until(lambda: port.server.request_waits.waiting == 0, "every place given back")


@scenario(unary=True, max_message_bytes=1 << 16)
async def test_an_open_above_grpcs_metadata_cap_is_refused(port: Port) -> None:
    """An OPEN of more than MAX_OPEN_BYTES (gRPC's cap on a call's metadata), though within the
    receive cap, ends its call RESOURCE_EXHAUSTED before any check; keys arrive lowercase."""
    stub = port.device_stub()
    code, details = await refused_unary(stub.GetTask(get_task(1), timeout=BOUND_S, metadata=(
        *OK, ("x-pad", "p" * MAX_OPEN_BYTES))))
    assert (code, details) == (grpc.StatusCode.RESOURCE_EXHAUSTED,
                               f"an OPEN above {MAX_OPEN_BYTES} bytes")
    assert port.devices.checked == []
    await stub.GetTask(get_task(2), timeout=BOUND_S, metadata=(("AUTHORIZATION", "Bearer ok"),))
    assert port.devices.checked == [{"authorization": "Bearer ok"}]


@scenario(unary=True)
async def test_a_unary_call_left_by_its_caller_ends_at_the_port(port: Port) -> None:
    """A unary call whose caller is cancelled (a device stopping) tells the port, whose handler
    is cancelled, as grpc.aio's call does; the connection stays."""
    stub = port.device_stub()
    call = asyncio.ensure_future(stub.GetTask(get_task(102), metadata=OK))  # (no deadline)
    async with asyncio.timeout(BOUND_S):
        await port.devices.holding.wait()
    call.cancel()
    await until(lambda: not port.connection().streams, "the port's call ended")
    assert stub.channel.live_connection() is not None


def test_a_port_that_closes_at_once_is_unreachable() -> None:
    """A port that closes each connection before sending anything (another version's, one at
    its connection limit) counts as unreachable: the call is made on the fallback at once, and
    so are the next ones for FALLBACK_S."""
    class Fallback:
        async def GetTask(self, request: Any, *, timeout: float | None = None,
                          metadata: Any = None) -> coordinator_pb.GetTaskResponse:
            return coordinator_pb.GetTaskResponse(retry_after_ms=request.device_id)

    async def main() -> None:
        accepted: list[int] = []

        def closing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(1)
            writer.transport.abort()

        server = await asyncio.start_server(closing, "127.0.0.1", 0)
        address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        try:
            stub = FramedStub(FramedChannel(address, None), DEVICES, ("GetTask",), Fallback())
            for device_id in (1, 2):
                answer = await stub.GetTask(get_task(device_id), timeout=BOUND_S, metadata=OK)
                assert answer.retry_after_ms == device_id
            assert stub.channel.unreachable() and accepted == [1]
        finally:
            server.close()
    run(main())


async def greet(port: Port, stream: ServerStream) -> None:
    """Write at once (as the session's challenge is), then read until the end."""
    await stream.write(event(b"challenge"))
    while await stream.read() is not EOF:
        pass


def test_framing_broken_under_a_writing_handler_logs_no_error(
        caplog: pytest.LogCaptureFixture) -> None:
    """The connection closes under a handler that is writing: its call ends quietly (an
    outsider could otherwise fill the error log, one traceback per connection)."""
    async def main() -> None:
        async with serving(greet) as port:
            for _ in range(5):
                raw = await port.raw(PREFACE + open_frame(1) + any_frame(1, 9), preface=False)
                await raw.eof()
            await until(lambda: not port.server.connections, "the server forgot them")
            await port.works()

    with caplog.at_level(logging.INFO, logger="fedhh.rpc.framed.server"):
        run(main())
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_an_oversize_answer_ends_only_its_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer above the channel's receive cap ends its call RESOURCE_EXHAUSTED (final, as
    on gRPC's channels and the Connect client), the port told the call left (its handler
    cancelled); the connection's other call goes on. Before, the channel dropped the
    connection: both calls ended UNAVAILABLE ("the framed port broke the framing"), which a
    device retries, to the same answer."""
    monkeypatch.setattr(framed_client, "MAX_MESSAGE_BYTES", 1024)

    async def main() -> None:
        async with serving() as port:
            await one_oversize_call(port, answer_too_large(1024))
            await until(lambda: port.cancelled == [2], "the big call's handler cancelled")
            assert list(port.connection().streams) == [1]
    run(main())



@pytest.mark.parametrize("kind", [Kind.OPEN, Kind.MESSAGE, Kind.CLOSE, Kind.CANCEL, 9])
def test_an_oversize_frame_no_server_sends_breaks_the_framing(
        kind: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A frame of a kind no server sends breaks the framing above the receive cap as below it:
    the connection is dropped, its calls ended UNAVAILABLE. Before, an oversize one was taken
    for an answer above the cap, its call alone ended RESOURCE_EXHAUSTED, the connection kept
    with a port that does not speak the wire format."""
    monkeypatch.setattr(framed_client, "MAX_MESSAGE_BYTES", 1024)

    async def main() -> None:
        opened = asyncio.Event()

        async def port(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            splitter = FrameSplitter(1 << 24)
            assert await reader.readexactly(len(PREFACE)) == PREFACE
            while True:
                data = await reader.read(1 << 16)
                assert data, "the client left before it opened its call"
                if any(k == Kind.OPEN for _, k, _ in splitter.feed(data)):
                    break
            writer.write(any_frame(1, kind, b"x" * 2000))
            opened.set()
            with contextlib.suppress(ConnectionError):
                await reader.read()

        server = await asyncio.start_server(port, "127.0.0.1", 0)
        address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        try:
            channel = FramedStub(FramedChannel(address, None), SERVICE, ("Session",))
            call = channel.Session(timeout=BOUND_S)
            await call.write(message(b"1"))
            code, details = await refused(call)
            assert opened.is_set()
            assert code == grpc.StatusCode.UNAVAILABLE, (code, details)
            assert details == f"the framed port broke the framing: frame kind {kind} is not " \
                "a server's", details
        finally:
            server.close()
    run(main())
