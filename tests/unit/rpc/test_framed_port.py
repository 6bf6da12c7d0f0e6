"""The framed session port's own limits and failure behaviour (``fedhh.rpc.framed``): a
``FramedServer`` on 127.0.0.1 with small limits and a test handler, reached with the device's
``FramedChannel`` or, to send what no channel sends, with raw streams. Each test waits for the
outcome it asserts (a bound far above the limit under test), never a fixed time, except where
the outcome is that something does *not* happen for a while."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import grpc
import pytest
import uvloop
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.errors import AuthenticationError, ConfigError
from fedhh.rpc.framed.client import FramedCall, FramedChannel, client_context
from fedhh.rpc.framed.frames import ALPN, HEADER, PREFACE, FrameSplitter, Kind
from fedhh.rpc.framed.server import FramedLimits, FramedServer, ServerStream
from fedhh.rpc.serving import UnparsableRequest
from fedhh.rpc.tls import TlsFiles, make_dev_pki
from fedhh.v1 import aggregator_pb2 as pb

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
        end = pb.SessionEnd.FromString(got[2])
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
    streams its handlers served and which of them were cancelled."""

    def __init__(self, behave: Callable[[Port, ServerStream], Awaitable[None]],
                 limits: FramedLimits, tls: TlsFiles | None) -> None:
        self.behave = behave
        self.tls = tls
        self.server = FramedServer("test session port", self._handle, pb.SessionMessage,
                                   limits, tls)
        self.port = 0
        self.started: list[ServerStream] = []
        self.cancelled: list[int] = []
        self.notes: list[Any] = []  # what a behaviour saw
        self.release = asyncio.Event()  # lets a waiting behaviour go on
        self._channels: list[FramedChannel] = []
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

    def channel(self) -> FramedChannel:
        context = client_context(self.tls.ca) if self.tls is not None else None
        channel = FramedChannel(self.address, context)
        self._channels.append(channel)
        return channel

    async def raw(self, *frames: bytes, preface: bool = True,
                  context: ssl.SSLContext | None = None, sndbuf: int = 0, rcvbuf: int = 0
                  ) -> Raw:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:  # (before connecting: the window it advertises)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.connect(("127.0.0.1", self.port))
        if sndbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        sock.setblocking(False)
        reader, writer = await asyncio.open_connection(
            sock=sock, ssl=context, server_hostname="127.0.0.1" if context else None)
        raw = Raw(reader, writer)
        self._raws.append(raw)
        if preface or frames:
            raw.send(PREFACE if preface else b"", *frames)
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
                  tls: TlsFiles | None = None, **limits: Any) -> AsyncIterator[Port]:
    port = Port(behave, FramedLimits(**{**LIMITS, **limits}), tls)
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
    raw = await port.raw(frame(1, Kind.OPEN), frame(2, Kind.OPEN))
    await until(lambda: len(port.started) == 2, "both streams served")
    big = message(b"x" * 5000).SerializeToString()
    raw.send(HEADER.pack(1, Kind.MESSAGE, len(big)), big[:100])  # (the header, a little more)
    assert await raw.end(1) == (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                "a message above the 1024-byte receive cap")
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


@scenario(max_message_bytes=1024)
async def test_an_oversize_message_through_the_channel(port: Port) -> None:
    """The device's channel sees the refusal as gRPC's would: RESOURCE_EXHAUSTED on that call;
    another call on the same connection is served."""
    channel = port.channel()
    big, small = channel.Session(timeout=BOUND_S), channel.Session(timeout=BOUND_S)
    await small.write(message(b"1"))
    assert (await small.read()).challenge == b"1"
    await big.write(message(b"x" * 2000))
    assert await refused(big) == (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                  "a message above the 1024-byte receive cap")
    await small.write(message(b"2"))
    assert (await small.read()).challenge == b"2"
    # (the big call's stream 2 opened in the same write as its message: its handler was
    # cancelled before it began, or as it waited for that message)
    assert port.cancelled in ([], [2]) and list(port.connection().streams) == [1]


@scenario(max_message_bytes=1024, max_streams_per_connection=1, idle_timeout_s=0.5)
async def test_a_stream_ended_in_the_read_that_opened_it_is_forgotten(port: Port) -> None:
    """Regression: a stream whose handler was cancelled before it began (its OPEN and an
    oversize message, or its OPEN and a CANCEL, in one read) was never ended nor forgotten:
    no END came, it held its place against max_streams_per_connection for good, and its
    connection never went idle."""
    raw = await port.raw(frame(1, Kind.OPEN), frame(1, Kind.MESSAGE, b"x" * 2000))
    assert await raw.end(1) == (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                "a message above the 1024-byte receive cap")
    connection = port.connection()
    assert not connection.streams and connection._unread == 0
    raw.send(frame(2, Kind.OPEN), frame(2, Kind.MESSAGE, b"\x2a\x01y"), frame(2, Kind.CANCEL))
    await until(lambda: connection._last_id == 2 and not connection.streams,
                "stream 2 opened and forgotten")
    assert connection._unread == 0
    raw.send(frame(3, Kind.OPEN), frame(3, Kind.MESSAGE, message(b"3").SerializeToString()))
    assert (await raw.event(3)).challenge == b"3"
    raw.send(frame(3, Kind.CLOSE))
    assert await raw.end(3) == (grpc.StatusCode.OK, "")
    await raw.eof()  # (idle)
    assert [s.stream_id for s in port.started] == [3]


@scenario(max_streams_per_connection=2)
async def test_one_stream_over_the_limit_is_refused_at_once(port: Port) -> None:
    """With max_streams_per_connection streams open, one more ends RESOURCE_EXHAUSTED without a
    handler; the others go on, and a stream that ended frees its place."""
    channel = port.channel()
    first, second = channel.Session(timeout=BOUND_S), channel.Session(timeout=BOUND_S)
    for call, data in ((first, b"1"), (second, b"2")):
        await call.write(message(data))
        assert (await call.read()).challenge == data
    third = channel.Session(timeout=BOUND_S)
    assert await refused(third) == (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                    "at most 2 streams per connection")
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
    pytest.param(PREFACE + frame(1, Kind.OPEN) + any_frame(1, 9), id="unknown-kind"),
    pytest.param(PREFACE + frame(1, Kind.OPEN) + frame(1, Kind.EVENT, b"x"),
                 id="server-kind-from-client"),
    pytest.param(PREFACE + any_frame(7, 200), id="unknown-kind-no-stream"),
    pytest.param(PREFACE + frame(0, Kind.OPEN), id="open-zero"),
    pytest.param(PREFACE + frame(2, Kind.OPEN) + frame(2, Kind.OPEN), id="open-same-id"),
    pytest.param(PREFACE + frame(2, Kind.OPEN) + frame(1, Kind.OPEN), id="open-lower-id"),
    pytest.param(PREFACE + frame(1, Kind.OPEN, b"\x00"), id="open-with-payload"),
    pytest.param(PREFACE + frame(1, Kind.OPEN, b"x" * 5000), id="open-with-oversize-payload"),
    pytest.param(PREFACE + frame(3, Kind.MESSAGE, b""), id="message-never-opened"),
    pytest.param(PREFACE + frame(1, Kind.OPEN) + frame(2, Kind.CLOSE), id="close-never-opened"),
    pytest.param(PREFACE + frame(1, Kind.OPEN) + frame(1, Kind.CLOSE)
                 + frame(1, Kind.MESSAGE, b""), id="message-after-close"),
    pytest.param(PREFACE + frame(1, Kind.OPEN) + frame(1, Kind.CLOSE) + frame(1, Kind.CLOSE),
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
    stream is closed; one that holds a stream is not (past both timeouts)."""
    started = time.monotonic()
    idle = await port.raw()
    assert await idle.eof() - started >= 0.5 - TICK
    busy = await port.raw(frame(1, Kind.OPEN))
    await until(lambda: len(port.started) == 1, "the stream served")
    with pytest.raises(TimeoutError):  # (the outcome: nothing happens for 1.5 s)
        async with asyncio.timeout(1.5):
            await busy.reader.read(1)
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
    is closed at it, and so is a TCP connection that never began its handshake."""
    async def main() -> None:
        async with serving(tls=pki, handshake_timeout_s=0.5) as port:
            channel = port.channel()
            call = channel.Session(timeout=BOUND_S)
            await call.write(message(b"1"))
            assert (await call.read()).challenge == b"1"
            connection = channel.live_connection()
            assert connection is not None
            assert connection.transport.get_extra_info("ssl_object").selected_alpn_protocol() \
                == ALPN
            listener = port.server.listener
            assert listener is not None
            # The head deadline has run (the listener forgets the connection then), or the
            # connection was cut.
            await until(lambda: not listener._pending_heads or connection.closed,
                        "the head deadline")
            assert not connection.closed and not call.done()
            await call.write(message(b"2"))
            assert (await call.read()).challenge == b"2"
            assert channel.live_connection() is connection and len(port.server.connections) == 1

            started = time.monotonic()
            no_preface = await port.raw(preface=False, context=client_context(pki.ca))
            no_handshake = await port.raw(preface=False)
            closed = await asyncio.gather(no_preface.eof(), no_handshake.eof())
            assert all(at - started >= 0.5 - TICK for at in closed), [at - started for at in closed]
            await call.write(message(b"3"))
            assert (await call.read()).challenge == b"3"
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
    second.send(frame(1, Kind.OPEN), frame(1, Kind.MESSAGE, message(b"2").SerializeToString()))
    assert (await second.event(1)).challenge == b"2"


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
    raw.send(b"".join(frame(i, Kind.OPEN) for i in range(1, 200_001)))  # 1.8 MB of OPENs
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
    its writes fail from then on)."""
    channel = port.channel()
    began = asyncio.get_running_loop().time()
    call = channel.Session(timeout=1.0)
    await call.write(message(b"1"))
    await until(lambda: port.notes == [1], "the message read")
    assert await refused(call) == (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
    assert asyncio.get_running_loop().time() - began >= 1.0 - TICK
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
    assert channel.live_connection() is not None  # (cancelling keeps the connection)


@scenario(behave=hold)
async def test_a_lost_connection_ends_its_calls_unavailable(port: Port) -> None:
    """Pending calls end UNAVAILABLE (their handlers are cancelled); the next call on the same
    channel connects again and is served."""
    channel = port.channel()
    calls = [channel.Session(timeout=BOUND_S) for _ in range(2)]
    for n, call in enumerate(calls, 1):
        await call.write(message(b"x"))
        await until(lambda n=n: len(port.notes) == n, "the message read")  # type: ignore[misc]
    before = channel.live_connection()
    port.connection().transport.abort()
    for call in calls:
        code, details = await refused(call)
        assert code == grpc.StatusCode.UNAVAILABLE, code
        assert details.startswith("the connection to the session port was lost"), details
    await until(lambda: sorted(port.cancelled) == [1, 2], "the handlers cancelled")
    assert channel.live_connection() is None
    port.behave = echo
    again = channel.Session(timeout=BOUND_S)
    await again.write(message(b"again"))
    assert (await again.read()).challenge == b"again"
    assert channel.live_connection() not in (None, before)
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
    raw = await port.raw(frame(1, Kind.OPEN), frame(1, Kind.MESSAGE, b"\xff\xff\xff\xff"),
                         frame(2, Kind.OPEN))
    code, details = await raw.end(1)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith("the message does not parse"), details
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
    raw = await port.raw(frame(1, Kind.OPEN), sndbuf=1 << 15)
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
    raw = await port.raw(frame(1, Kind.OPEN))
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


# -- configuration -------------------------------------------------------------------------------


async def serve_nothing(stream: ServerStream) -> None:
    pass


def test_limits_and_plaintext_are_checked() -> None:
    for bad in (dict(max_message_bytes=0), dict(max_streams_per_connection=0),
                dict(max_connections=0), dict(max_unread_bytes=0),
                dict(handshake_timeout_s=0.0), dict(idle_timeout_s=-1.0)):
        with pytest.raises(ConfigError):
            FramedLimits(**{**LIMITS, **bad})

    async def main() -> None:
        limits = FramedLimits(**LIMITS)
        server = FramedServer("test session port", serve_nothing, pb.SessionMessage, limits,
                              None)
        with pytest.raises(ConfigError, match="TLS"):
            await server.start("127.0.0.1", 0, insecure=False)
        with pytest.raises(ConfigError, match="loopback"):
            await server.start("0.0.0.0", 0, insecure=True)
        assert server.listener is None
    run(main())
    with pytest.raises(ConfigError, match="loopback"):
        FramedChannel("10.0.0.1:443", None)


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
            channel = FramedChannel(address, None, fallback)
            assert (await refused(channel.Session(timeout=BOUND_S)))[0] == \
                grpc.StatusCode.UNAVAILABLE
            assert channel.Session(timeout=5.0) == "the gRPC stream"
            assert fallback.timeouts == [5.0]
            channel._unreachable_until = 0.0  # (FALLBACK_S later)
            assert isinstance(channel.Session(timeout=5.0), FramedCall)
            alone = FramedChannel(address, None)
            assert (await refused(alone.Session(timeout=BOUND_S)))[0] == \
                grpc.StatusCode.UNAVAILABLE
            assert isinstance(alone.Session(timeout=BOUND_S), FramedCall)
    run(main())
