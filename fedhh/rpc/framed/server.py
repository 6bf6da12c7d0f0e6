"""The framed port: a service's calls in frames (``fedhh.rpc.framed.frames``) on connections
the event loop's own TLS protocol reads, each call served by the handler gRPC's port calls. An
aggregator serves its session stream there (a ``StreamMethod``: the handler is the gRPC
``Session``'s, ``stream`` standing in for its context: ``read``, ``write``,
``set_trailing_metadata``), a coordinator or selector its device service's unary calls (each a
``fedhh.rpc.procedures.Procedure``: the servicer's method with a ``CallContext``, after the
method's credential check). Paced as the load test's devices are (P = 2 to 8 s between
messages), grpc.aio spends 0.97-1.36 ms of the server's CPU per device on the session's ten
messages and this port 0.35-0.51, and 0.27-0.44 ms on a GetTask call where this port spends
0.12-0.21 (docs/benchmarks/grpc-floor.md, 2,000 devices on two shared connections).

A call opens with the method's path and its metadata (``FramedOpen``, at most
``MAX_OPEN_BYTES``, the gRPC port's cap on a call's metadata; a larger one ends
RESOURCE_EXHAUSTED, as there).
Before its handler runs, as gRPC's port: a method the port does not serve ends UNIMPLEMENTED,
and one whose credential check fails UNAUTHENTICATED, its request never read.

What gRPC's server gave the session, built again here, each before work:

- connections are accepted by ``fedhh.rpc.http_listener.Listener``: at most
  ``max_connections`` held, TLS handshakes included (one more is closed as soon as it is
  accepted, before a byte is read, unless it takes the place of an idle connection, one with
  no stream open, of the address that holds the most, when that address holds more than the
  newcomer's: the listener's ``fair``, as on the Connect ports; before, one address that held
  every connection, a cheap stream on each within ``idle_timeout_s``, kept every device of
  every other address out); the handshake, then the preface, each within
  ``handshake_timeout_s``; a connection with no stream for ``idle_timeout_s`` is closed (by
  default the figures of every port: ``http_listener.HEAD_TIMEOUT_S``,
  ``serving.MAX_CONNECTION_IDLE_MS``);
- at most ``max_streams_per_connection`` streams at once on a connection (one more is ended
  UNAVAILABLE at once, which devices retry after a backoff: gRPC's HTTP/2 refuses a stream
  past its cap with REFUSED_STREAM, which a gRPC client reports UNAVAILABLE, "no processing
  occurred", and a gRPC client does not even send it; before, RESOURCE_EXHAUSTED, which a
  device takes for final, so its session or call ended where over gRPC it would have waited);
- a message above ``max_message_bytes`` ends its stream RESOURCE_EXHAUSTED unread (its bytes
  are skipped), one that does not parse INVALID_ARGUMENT (as gRPC's port answers both);
- back-pressure both ways: a connection is not read while its delivered messages wait unread
  beyond ``max_unread_bytes`` (until its handlers catch up) nor while it does not read what it
  is sent (so a client cannot queue answers it does not take); a handler's write waits while
  the client does not read (the session's deadlines still run). Back-pressure is per
  connection, not per stream: a stream whose handler does not read holds up its connection's
  other streams once ``max_unread_bytes`` wait (a session's handler reads each message as it
  comes, a vector's parts too, but for the wait for an upload slot, ``max_uploads``, which
  only vectors above one message, D > 2^18, have to wait with parts unread);
- a unary call's request is its first message, due within ``request_timeout_s`` of its
  OPEN (by default ``request_waits.REQUEST_TIMEOUT_S``, gRPC's and Connect's figure; else
  DEADLINE_EXCEEDED; a CLOSE before it, or a second message, INVALID_ARGUMENT), and at most
  ``max_waiting_requests`` unary calls of the port wait for theirs at once (one more is ended
  UNAVAILABLE at once: ``fedhh.rpc.request_waits``); its answer, one message, goes out before
  the end;
- the handler's errors become the stream's end as ``fedhh.rpc.errors.status_errors`` makes
  them gRPC's status (a ``FedhhError``'s code and details; anything else INTERNAL, logged);
  every end's details are bounded as gRPC's and Connect's (``errors.bounded_details``);
  a client's CANCEL or a lost connection cancels the handler, as gRPC does (the port does not
  learn the client's deadline: the session's own deadlines bound a stream).

Breaking the framing (an unknown kind, a stream id that does not rise, a frame for a stream
never opened, a message or a CLOSE after the stream's CLOSE, a bad preface) closes the
connection.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message

from fedhh.errors import ConfigError, FedhhError
from fedhh.rpc.errors import bounded_details, details_of, status_of
from fedhh.rpc.framed.frames import (
    ALPN,
    PREFACE,
    FrameError,
    FrameSplitter,
    FrameWriter,
    Kind,
)
from fedhh.rpc.http_listener import HEAD_TIMEOUT_S, Listener, peer_name
from fedhh.rpc.procedures import CallAbort, CallContext, Procedure
from fedhh.rpc.request_waits import MAX_WAITING_REQUESTS, REQUEST_TIMEOUT_S, RequestWaits
from fedhh.rpc.serving import (
    MAX_CONNECTION_IDLE_MS,
    MAX_METADATA_BYTES,
    CredentialCheck,
    UnparsableRequest,
    check_receive_cap,
    credential_refusal,
    does_not_parse,
    listener_context,
    response_bytes,
    too_large,
)
from fedhh.rpc.tally import Count, CountFamily
from fedhh.rpc.tls import TlsFiles
from fedhh.v1 import framed_pb2

__all__ = ["CALLS", "FramedLimits", "FramedServer", "ServerStream", "StreamMethod",
           "streams_busy"]

log = logging.getLogger(__name__)

# Devices reconnect in bursts (a stage's deadline, a worker's restart): a deep accept queue
# keeps a burst from being dropped by the kernel and retried a second later.
BACKLOG = 4096
# Each connection is an open file: a device holds one for its session (a device process one per
# --devices-per-connection devices).
MAX_CONNECTIONS = 16384
# A call's OPEN (its method and metadata): the gRPC port's cap on a call's metadata, so a
# stream held open costs no more here than there.
MAX_OPEN_BYTES = MAX_METADATA_BYTES
# (A process serves one framed port; its methods are the port's routes, a bounded set.)
# (a tally, fedhh.rpc.tally: every device's every call is counted)
CALLS = CountFamily("fedhh_framed_calls_total", "Calls opened on the framed port", ["method"])


@dataclass(frozen=True)
class FramedLimits:
    max_message_bytes: int
    max_streams_per_connection: int
    max_connections: int | None = None  # the operator's figure; None: MAX_CONNECTIONS
    # (each timeout by default the figure the gRPC and Connect ports take: one definition each)
    handshake_timeout_s: float = HEAD_TIMEOUT_S
    request_timeout_s: float = REQUEST_TIMEOUT_S
    idle_timeout_s: float = MAX_CONNECTION_IDLE_MS / 1000
    max_unread_bytes: int = 1 << 20
    max_waiting_requests: int = MAX_WAITING_REQUESTS

    def __post_init__(self) -> None:
        check_receive_cap("max_message_bytes", self.max_message_bytes)
        for name in ("max_streams_per_connection", "max_connections",
                     "max_unread_bytes", "max_waiting_requests"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("handshake_timeout_s", "request_timeout_s", "idle_timeout_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)}")


StreamHandler = Callable[["ServerStream"], Awaitable[None]]


def streams_busy(cap: int) -> str:
    """The words a stream past the cap of ``cap`` on its connection is refused with,
    UNAVAILABLE (module docstring)."""
    return f"at most {cap} streams per connection; retry after a backoff"


@dataclass(frozen=True)
class StreamMethod:
    """A streaming method: ``handler(stream)`` serves each call; ``parse`` makes each message
    of its bytes (a message type's ``FromString``, or a function that also counts them)."""

    handler: StreamHandler
    parse: Callable[[bytes], Message]


@dataclass(frozen=True)
class _Route:
    handler: StreamHandler
    parse: Callable[[bytes], Message]
    check: CredentialCheck | None
    unary: bool
    opened: Count  # (CALLS's child for the route's path: looked up once, not per call)


def _route(path: str, method: StreamMethod | Procedure) -> _Route:
    if isinstance(method, Procedure):
        return _Route(functools.partial(_serve_unary, method), method.request_type.FromString,
                      method.check, True, CALLS.labels(path))
    return _Route(method.handler, method.parse, None, False, CALLS.labels(path))


async def _serve_unary(procedure: Procedure, stream: ServerStream) -> None:
    waits = stream.request_waits
    try:
        async with asyncio.timeout(waits.timeout_s):
            request = await stream.read()
    except TimeoutError:
        raise CallAbort(grpc.StatusCode.DEADLINE_EXCEEDED, waits.late) from None
    if request is grpc.aio.EOF:
        raise CallAbort(grpc.StatusCode.INVALID_ARGUMENT, "a unary call without its request")
    context = CallContext(stream.metadata, stream.peer, None)
    await stream.write(await procedure.handler(request, context))


class ServerStream:
    """One stream, as its handler sees it (the part of grpc.aio's servicer context the session
    uses). ``read`` returns ``grpc.aio.EOF`` once the client closed its side."""

    __slots__ = ("_connection", "_ended", "_messages", "_parse", "_waiter", "awaiting",
                 "client_left", "forced", "half_closed", "metadata", "requests_left",
                 "stream_id", "task", "trailing")

    def __init__(self, connection: _Connection, stream_id: int,
                 parse: Callable[[bytes], Message],
                 metadata: tuple[tuple[str, str], ...] = (), unary: bool = False) -> None:
        self._connection = connection
        self.stream_id = stream_id
        self._parse = parse
        self.metadata = metadata  # the call's, as its OPEN carried them
        self.requests_left = 1 if unary else None  # (None: a stream takes any number)
        # A unary call holds a place of the port's RequestWaits until its request arrives.
        self.awaiting = unary
        self._messages: collections.deque[bytes | None] = collections.deque()  # None: EOF
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self.trailing: tuple[tuple[str, str], ...] = ()
        self.forced: tuple[grpc.StatusCode, str] | None = None  # the port ended it so
        self.task: asyncio.Task[None] | None = None
        self.half_closed = False  # the client sent CLOSE
        self.client_left = False  # it sent CANCEL, or its connection was lost

    # -- the handler's side --------------------------------------------------------------------

    async def read(self) -> Any:
        if not self._messages:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        data = self._messages.popleft()
        if data is None:
            self._messages.append(None)  # (EOF stays: every later read sees it)
            return grpc.aio.EOF
        self._connection.consumed(len(data))
        try:
            return self._parse(data)
        except Exception as error:  # protobuf's DecodeError, or anything a parser raises
            raise UnparsableRequest(does_not_parse(error)) from None

    async def write(self, event: Message | bytes | Callable[[], Message | bytes]) -> None:
        """Send ``event``; a function that makes it is called when the connection's turn comes
        to this write (``FrameWriter.send``), so that what waits is not yet encoded."""
        if self._ended:
            raise asyncio.InvalidStateError("the stream has ended")
        await self._connection.send(self.stream_id, Kind.EVENT,
                                    functools.partial(response_bytes, event))

    def set_trailing_metadata(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self.trailing = tuple(metadata)

    @property
    def peer(self) -> str:
        return self._connection.peer

    @property
    def request_waits(self) -> RequestWaits:
        return self._connection.server.request_waits

    # -- the connection's side -----------------------------------------------------------------

    def deliver(self, data: bytes | None) -> None:
        self._messages.append(data)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def force_end(self, code: grpc.StatusCode, details: str) -> None:
        """End the stream from outside its handler (the handler is cancelled)."""
        if self.forced is None:
            self.forced = (code, details)
            if self.task is not None:
                self.task.cancel()

    def ended(self) -> None:
        """No more writes: the stream's end is (being) sent, or its client left."""
        self._ended = True

    def unread_bytes(self) -> int:
        return sum(len(data) for data in self._messages if data is not None)


class _Connection(asyncio.Protocol):
    def __init__(self, server: FramedServer) -> None:
        self.server = server
        self.limits = server.limits
        self.splitter = FrameSplitter(server.limits.max_message_bytes)
        self.streams: dict[int, ServerStream] = {}
        self.transport: Any = None  # (uvloop's TLS transport is no asyncio.Transport)
        self.peer = ""
        self._last_id = 0
        self._preface: bytearray | None = bytearray()
        self._unread = 0
        self._reading = True
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.frames = FrameWriter(transport)
        self.peer = peer_name(transport)
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        try:
            if self._preface is not None:
                data = self._read_preface(data)
            for stream_id, kind, payload in self.splitter.feed(data):
                self._dispatch(stream_id, kind, payload)
        except FrameError as error:
            log.info("framed port: closing a connection", extra={
                "peer": self.peer, "error": str(error)})
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.server.connections.discard(self)
        if self._timer is not None:
            self._timer.cancel()
        for stream in list(self.streams.values()):
            stream.client_left = True
            stream.ended()
            if stream.task is not None:
                stream.task.cancel()
        self.frames.release()

    def pause_writing(self) -> None:
        self.frames.pause()
        self._update_reading()

    def resume_writing(self) -> None:
        self.frames.resume()
        self._update_reading()

    # -- frames --------------------------------------------------------------------------------

    def _read_preface(self, data: bytes) -> bytes:
        preface = self._preface
        assert preface is not None
        needed = len(PREFACE) - len(preface)
        preface += data[:needed]
        if not PREFACE.startswith(preface):
            raise FrameError("not a framed session client (bad preface)")
        if len(preface) < len(PREFACE):
            return b""
        self._preface = None
        if self.server.listener is not None:
            self.server.listener.saw_request(self)
        self._idle()
        return data[needed:]

    def _dispatch(self, stream_id: int, kind: int, payload: bytes | None) -> None:
        stream = self.streams.get(stream_id)
        if kind == Kind.OPEN:
            if stream_id <= self._last_id:
                raise FrameError(f"stream {stream_id} opened out of order")
            self._last_id = stream_id
            self._open(stream_id, payload)
            return
        if stream is None:
            if stream_id > self._last_id or kind not in (Kind.MESSAGE, Kind.CLOSE, Kind.CANCEL):
                raise FrameError(f"frame kind {kind} for stream {stream_id}, never opened")
            return  # (a stream that ended while the client still wrote to it)
        if kind == Kind.MESSAGE:
            if payload is None:
                stream.force_end(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                 too_large(self.limits.max_message_bytes))
                return
            if stream.half_closed:
                raise FrameError(f"a message on stream {stream_id} after its CLOSE")
            if stream.requests_left is not None:
                if stream.requests_left == 0:
                    stream.force_end(grpc.StatusCode.INVALID_ARGUMENT,
                                     "a unary call takes one request")
                    return
                stream.requests_left -= 1
                self._arrived(stream)
            self._unread += len(payload)
            stream.deliver(payload)
            self._update_reading()
        elif kind == Kind.CLOSE:
            if stream.half_closed:
                raise FrameError(f"stream {stream_id} closed twice")
            stream.half_closed = True
            self._arrived(stream)
            stream.deliver(None)
        elif kind == Kind.CANCEL:
            stream.client_left = True
            stream.ended()
            # (its place among the calls waiting for their requests: now, not when its end is
            # seen a turn or two later, else opens and cancels in one write fill the places)
            self._arrived(stream)
            if stream.task is not None:
                stream.task.cancel()
        else:
            raise FrameError(f"frame kind {kind} is not a client's")

    def _open(self, stream_id: int, payload: bytes | None) -> None:
        """Start serving the call ``stream_id`` opens, or end it at once (a refused call's
        later frames are dropped as those of an ended one)."""
        if len(self.streams) >= self.limits.max_streams_per_connection:
            self._write_end(stream_id, grpc.StatusCode.UNAVAILABLE,
                            streams_busy(self.limits.max_streams_per_connection))
            return
        if payload is None or len(payload) > MAX_OPEN_BYTES:
            limit = min(MAX_OPEN_BYTES, self.limits.max_message_bytes)
            self._write_end(stream_id, grpc.StatusCode.RESOURCE_EXHAUSTED,
                            f"an OPEN above {limit} bytes")
            return
        try:
            opening = framed_pb2.FramedOpen.FromString(payload)
        except DecodeError:
            self._write_end(stream_id, grpc.StatusCode.INVALID_ARGUMENT,
                            "the OPEN does not parse")
            return
        route = self.server.routes.get(opening.method)
        if route is None:
            self._write_end(stream_id, grpc.StatusCode.UNIMPLEMENTED,
                            f"no method {opening.method[:200]!r} on this port")
            return
        metadata = tuple((key.lower(), value) for key, value in opening.metadata.items())
        if route.check is not None and (
                refused := credential_refusal(route.check, metadata, "framed")) is not None:
            self._write_end(stream_id, *refused)
            return
        if route.unary and not self.server.request_waits.take():
            self._write_end(stream_id, grpc.StatusCode.UNAVAILABLE,
                            self.server.request_waits.busy)
            return
        route.opened.inc()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        stream = self.streams[stream_id] = ServerStream(self, stream_id, route.parse, metadata,
                                                        route.unary)
        stream.task = asyncio.get_running_loop().create_task(self._serve(stream, route.handler))
        stream.task.add_done_callback(functools.partial(self._forget_if_never_started, stream))

    def _arrived(self, stream: ServerStream) -> None:
        """``stream`` waits no longer for its request (it came, or the call ended)."""
        if stream.awaiting:
            stream.awaiting = False
            self.server.request_waits.release()

    def consumed(self, size: int) -> None:
        self._unread -= size
        self._update_reading()

    def _update_reading(self) -> None:
        """Read the connection only while the client reads what it is sent (a client that
        does not read gets nothing more read from it: neither new streams nor messages, each
        of which would queue an answer) and while its delivered messages do not wait unread
        beyond ``max_unread_bytes`` (reading resumes at half of it)."""
        if self._closed:
            return
        limit = self.limits.max_unread_bytes
        if self._reading and (self.frames.paused or self._unread > limit):
            self._reading = False
            self.transport.pause_reading()
        elif not self._reading and not self.frames.paused and self._unread <= limit // 2:
            self._reading = True
            self.transport.resume_reading()

    async def send(self, stream_id: int, kind: Kind,
                   payload: bytes | Callable[[], bytes]) -> None:
        if self._closed:
            raise asyncio.InvalidStateError("the connection has closed")
        await self.frames.send(stream_id, kind, payload)

    def _write_end(self, stream_id: int, code: grpc.StatusCode, details: str,
                   trailing: tuple[tuple[str, str], ...] = ()) -> None:
        if self._closed:
            return
        end = framed_pb2.FramedEnd(code=code.value[0], details=bounded_details(details),
                                   trailing=dict(trailing))
        self.frames.add(stream_id, Kind.END, end.SerializeToString())

    async def _serve(self, stream: ServerStream, handler: StreamHandler) -> None:
        code, details = grpc.StatusCode.OK, ""
        try:
            await handler(stream)
        except CallAbort as abort:
            code, details = abort.code, abort.details
        except FedhhError as error:
            code, details = status_of(error), details_of(error)
        except asyncio.CancelledError:
            if stream.client_left:
                return  # (nobody to tell)
            code, details = stream.forced or (grpc.StatusCode.CANCELLED, "cancelled")
        except Exception as error:
            if isinstance(error, asyncio.InvalidStateError) and self._closed:
                # The connection closed under the call (its client broke the framing, or
                # left): nobody to tell, nothing unexpected; the close was logged once.
                return
            log.exception("unexpected error in a framed call")
            code, details = grpc.StatusCode.INTERNAL, "internal error"
        finally:
            self._forget(stream)
        if stream.forced is not None:
            code, details = stream.forced
        self._write_end(stream.stream_id, code, details, stream.trailing)

    def _forget_if_never_started(self, stream: ServerStream, task: asyncio.Task[None]) -> None:
        """A stream whose handler was cancelled before it began (a CANCEL, an oversize message
        or the connection's loss in the same read as its OPEN): ``_serve`` never ran, so it is
        forgotten, and ended if the port ended it, here. The stream lets go of its task, every
        task's: one cancelled before it began keeps its CancelledError, whose traceback holds
        the frame of ``_serve`` and so the stream, a cycle that only the cycle collector freed,
        which services run seldom (``serving.tune_gc``): 262,144 such calls grew a coordinator
        by ~220 MB, kept while it idled."""
        stream.task = None
        if task.cancelled():
            self._forget(stream)
            if stream.forced is not None:
                self._write_end(stream.stream_id, *stream.forced)

    def _forget(self, stream: ServerStream) -> None:
        stream.ended()
        self._arrived(stream)
        if self.streams.get(stream.stream_id) is stream:
            del self.streams[stream.stream_id]
            self.consumed(stream.unread_bytes())  # (no longer holds reading up)
            if not self.streams:
                self._idle()

    # -- timers and closing --------------------------------------------------------------------

    def _idle(self) -> None:
        if self._closed or self.streams:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(
            self.limits.idle_timeout_s, self._expire, "idle")

    def _expire(self, why: str) -> None:
        self._timer = None
        if not self.streams:
            log.info("framed port: closing a connection", extra={
                "peer": self.peer, "error": why})
            self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.transport.abort()

    # -- what the listener's fairness reads (``Listener(fair=True)``), as of aiohttp's handler --

    @property
    def _request_in_progress(self) -> bool:
        """A connection with a stream open is in a call; one with none is idle, and closing it
        cuts nothing (its client opens another, as after ``idle_timeout_s``)."""
        return bool(self.streams)

    def force_close(self) -> None:
        self.close()


class FramedServer:
    """The port: ``methods`` by path (``/package.Service/Method``), each a ``StreamMethod``
    or a unary ``Procedure``. (It is the listener's protocol factory: each call makes a
    connection's protocol.)"""

    def __init__(self, name: str, methods: Mapping[str, StreamMethod | Procedure],
                 limits: FramedLimits, tls: TlsFiles | None) -> None:
        if not methods:
            raise ConfigError(f"{name}: no methods to serve")
        self.name = name
        self.routes = {path: _route(path, method) for path, method in methods.items()}
        self.limits = limits
        self.request_waits = RequestWaits("framed", limits.max_waiting_requests,
                                          limits.request_timeout_s)
        self.tls = tls
        self.connections: set[_Connection] = set()  # (the listener counts them)
        self.listener: Listener | None = None
        self.port: int | None = None  # (bound, once started)

    def __call__(self) -> _Connection:
        return _Connection(self)

    async def start(self, host: str, port: int, insecure: bool) -> int:
        """Listen on ``host:port`` with TLS, or in plaintext only when asked for and on
        loopback (as ``fedhh.rpc.serving.bind``); returns the bound port."""
        context = listener_context(self.tls, f"{host}:{port}", insecure, f"the {self.name}")
        if context is not None:
            context.set_alpn_protocols([ALPN])
        listener = Listener(self, context, self.limits.max_connections,
                            self.limits.handshake_timeout_s, self.name, BACKLOG, fair=True,
                            default_connections=MAX_CONNECTIONS)
        bound = self.port = listener.bind(host, port)
        self.listener = listener
        listener.start()
        return bound

    async def close(self) -> None:
        """Stop accepting, and end every connection (their streams' handlers are cancelled)."""
        if self.listener is not None:
            await self.listener.close()
        for connection in list(self.connections):
            connection.close()
