"""A device's side of a framed port (``fedhh.rpc.framed.server``).

``FramedStub(channel, service, framed, fallback)`` has the methods of ``service`` named in
``framed`` as attributes, as a grpc.aio stub has them, carried on ``channel`` (a
``FramedChannel``): a unary method is awaited (``await stub.GetTask(request,
metadata=...)``: the answer, or ``grpc.aio.AioRpcError`` with the call's code); a streaming
one returns a ``FramedCall`` (``stub.Session(timeout=...)``), which behaves as grpc.aio's
stream-stream call does where the session's device side (``fedhh.rpc.device_stream``) uses
it: ``read`` returns the next event, ``grpc.aio.EOF`` once the stream ended OK, and raises
``grpc.aio.AioRpcError`` with the stream's code once it ended otherwise; ``write`` on an
ended stream raises ``asyncio.InvalidStateError``; ``code``, ``details`` and
``trailing_metadata`` wait for the end; ``cancel`` leaves the stream. A call past its
``timeout`` ends DEADLINE_EXCEEDED, one whose connection broke UNAVAILABLE, and one answered
above the receive cap RESOURCE_EXHAUSTED (the answer skipped, the port told the call left, the
connection's other calls going on), as gRPC's would. The channel holds one connection, opened
by the first call that needs it and again after it broke; its calls share it, as a gRPC
channel's calls share theirs.

A stub may be given a ``fallback``: a gRPC stub of the same service at the same service's gRPC
port. Its other methods are the fallback's, and for ``FALLBACK_S`` after the framed port could
not be reached (a connection that could not be made: a firewall that lets only the gRPC port
through, a service without the port; or one closed within ``SILENT_LOSS_S`` of its making
before the port sent anything: a port of another version, one at its connection limit) so are
the framed ones: a call is the same on both, so a device that cannot reach the port still takes
part, and tries the port again afterwards. A unary call that found the port unreachable so is
made on the fallback at once, as a retry would be (on a connection never made its request
never left; on one closed before the port sent anything it may have arrived). The first time
the port proves unreachable, and again only after the port has been heard from, a stub with a
fallback logs one warning naming the port: the calls go on over gRPC, so without it an
operator would not see a firewall dropping the port.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from fedhh.errors import ConfigError
from fedhh.rpc import tls
from fedhh.rpc.errors import CODES_BY_NUMBER
from fedhh.rpc.framed.frames import (
    ALPN,
    MAX_STREAM_ID,
    PREFACE,
    FrameError,
    FrameSplitter,
    FrameWriter,
    Kind,
)
from fedhh.rpc.serving import (
    CA_REMEDY,
    MAX_MESSAGE_BYTES,
    check_address,
    check_plaintext_peer,
    tcp_keepalive,
)
from fedhh.v1 import framed_pb2

__all__ = ["FramedCall", "FramedChannel", "FramedStub"]

CONNECT_TIMEOUT_S = 20.0
FALLBACK_S = 60.0
SILENT_LOSS_S = 10.0
FIREWALL = "a firewall that lets only the gRPC port through does this"
_EMPTY = grpc.aio.Metadata()
Metadata = tuple[tuple[str, str], ...]
log = logging.getLogger(__name__)


def client_context(ca: str | Path) -> ssl.SSLContext:
    """TLS to a framed port: the services' CA, TLS 1.2 or later, the port's ALPN
    (``fedhh.rpc.tls.client_context``, every client's)."""
    return tls.client_context(ca, ALPN)


class FramedChannel:
    """Calls to one framed port at ``address`` (HOST:PORT): TLS with ``context``, or plaintext
    (``context`` None) to a loopback address only."""

    def __init__(self, address: str, context: ssl.SSLContext | None) -> None:
        host, _, port = check_address(address, "a framed port").rpartition(":")
        if context is None:
            check_plaintext_peer(address, remedy=CA_REMEDY)
        self.address = address
        self._host, self._port = host.strip("[]"), int(port)
        self._context = context
        self._connection: _Connection | None = None
        self._connecting: asyncio.Future[_Connection] | None = None
        self._unreachable_until = 0.0  # (time.monotonic(): the port could not be reached)
        self.falls_back = False  # (a stub's calls go to its fallback while unreachable)
        self._warned = False  # (of the port unreachable, and not heard from since)

    def unreachable(self) -> bool:
        """Whether the port could not be reached in the last ``FALLBACK_S`` (module
        docstring)."""
        return time.monotonic() < self._unreachable_until

    def mark_unreachable(self, why: str, cause: str = FIREWALL) -> None:
        self._unreachable_until = time.monotonic() + FALLBACK_S
        if self.falls_back and not self._warned:
            self._warned = True
            log.warning("the framed port %s cannot be reached (%s): its calls go over gRPC, to "
                        "the service's gRPC port, until the port answers (tried again every "
                        "%g s); %s", self.address, why, FALLBACK_S, cause)

    def heard(self) -> None:
        """The port sent a frame: a later unreachable port is told again."""
        if self._warned:
            self._warned = False
            log.info("the framed port %s answers again: its calls go over it", self.address)

    def stream(self, method: str, response_type: type[Message], timeout: float | None = None,
               metadata: Metadata = ()) -> FramedCall:
        """A call of the streaming ``method`` (``/package.Service/Method``)."""
        return FramedCall(self, method, metadata, response_type.FromString, timeout)

    async def unary(self, method: str, request: Message, response_type: type[Message],
                    metadata: Metadata | None = None, timeout: float | None = None) -> Any:
        """The answer of the unary ``method`` to ``request``; ``grpc.aio.AioRpcError`` with
        the call's code if it ended otherwise."""
        call = FramedCall(self, method, metadata or (), response_type.FromString, timeout)
        try:
            await call.send_only(request)
            answer = await call.read()
        except BaseException:
            call.cancel()  # (the caller left, as grpc.aio's call: the port is told so)
            raise
        if answer is grpc.aio.EOF:
            raise grpc.aio.AioRpcError(grpc.StatusCode.INTERNAL, _EMPTY, _EMPTY,
                                       "the call ended OK without an answer")
        if await call.code() != grpc.StatusCode.OK:
            raise call.error()
        return answer

    def live_connection(self) -> _Connection | None:
        connection = self._connection
        return connection if connection is not None and not connection.closed else None

    async def connection(self) -> _Connection:
        """The open connection, or a new one (calls that need one at once share its opening)."""
        connection = self.live_connection()
        if connection is not None:
            return connection
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
        connecting = self._connecting
        try:
            return await asyncio.shield(connecting)
        finally:
            if connecting.done() and self._connecting is connecting:
                self._connecting = None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                transport, connection = await loop.create_connection(
                    _Connection, self._host, self._port, ssl=self._context,
                    server_hostname=self._host if self._context else None)
        except (OSError, TimeoutError) as error:
            if isinstance(error, socket.gaierror):
                # (no firewall's doing: the gRPC port's name is the same, and fails alike)
                self.mark_unreachable(str(error), f"the name {self._host} does not resolve here")
            else:
                self.mark_unreachable(f"no connection in {CONNECT_TIMEOUT_S:g} s"
                                      if isinstance(error, TimeoutError) else str(error))
            raise ConnectionError(f"cannot reach the framed port {self.address}: "
                                  f"{error}") from None
        # (a long-poll on a connection that went dead without a reset fails and is made again,
        # as on the Connect port: before, it hung for good, a GetTask without a deadline)
        tcp_keepalive(transport.get_extra_info("socket"))
        connection.on_silent_loss = functools.partial(
            self.mark_unreachable, "it closed the connection before sending anything")
        connection.on_heard = self.heard
        self._connection = connection
        return connection

    async def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def answer_too_large(cap: int) -> str:
    """The words a call answered above the device's receive cap of ``cap`` bytes ends with."""
    return f"an answer above the {cap}-byte receive cap: not read"


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.splitter = FrameSplitter(MAX_MESSAGE_BYTES)
        self.calls: dict[int, FramedCall] = {}
        self.transport: Any = None
        self.closed = False
        self._next_id = 1
        self._made_at = time.monotonic()
        self._heard = False  # (a frame from the port)
        self.on_silent_loss: Callable[[], None] | None = None
        self.on_heard: Callable[[], None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.frames = FrameWriter(transport)
        transport.write(PREFACE)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        try:
            for stream_id, kind, payload in self.splitter.feed(data):
                if not self._heard:
                    self._heard = True
                    if self.on_heard is not None:
                        self.on_heard()
                if kind not in (Kind.EVENT, Kind.END):
                    # (checked before the oversize skip: a frame no server sends is broken
                    # framing, whatever its size or stream, not an answer above the cap)
                    raise FrameError(f"frame kind {kind} is not a server's")
                call = self.calls.get(stream_id)
                if call is None:
                    continue  # (a stream this side left)
                if payload is None:
                    # (the splitter skips its bytes: the framing holds, and only this call
                    # ends, final, as on gRPC's and the Connect client's channels; before, the
                    # connection was dropped and every call on it told UNAVAILABLE, retried)
                    call.finish(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                answer_too_large(self.splitter.max_payload), True)
                    continue
                if kind == Kind.EVENT:
                    call.deliver(payload)
                else:
                    call.finish_from(payload)
        except FrameError as error:
            self.lost(f"the framed port broke the framing: {error}")

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost(f"the connection to the framed port was lost: {exc or 'closed'}")

    def pause_writing(self) -> None:
        self.frames.pause()

    def resume_writing(self) -> None:
        self.frames.resume()

    def lost(self, why: str) -> None:
        if not self.closed:
            self.closed = True
            self.transport.abort()
            if (not self._heard and time.monotonic() - self._made_at < SILENT_LOSS_S
                    and self.on_silent_loss is not None):
                self.on_silent_loss()
        for call in list(self.calls.values()):
            call.finish(grpc.StatusCode.UNAVAILABLE, why)
        self.calls.clear()
        self.frames.release()

    def close(self) -> None:
        self.lost("the channel was closed")

    def open(self, call: FramedCall, opening: bytes) -> int:
        if self.closed:  # (lost while the call waited for it)
            raise ConnectionError("the connection to the framed port was lost")
        if self._next_id > MAX_STREAM_ID:
            raise ConnectionError("the connection's stream ids are spent")
        stream_id, self._next_id = self._next_id, self._next_id + 1
        self.calls[stream_id] = call
        self.frames.add(stream_id, Kind.OPEN, opening)
        return stream_id

    async def send(self, stream_id: int, kind: Kind, payload: bytes = b"") -> None:
        await self.frames.send(stream_id, kind, payload)

    def leave(self, stream_id: int) -> None:
        if self.calls.pop(stream_id, None) is not None and not self.closed:
            self.frames.add(stream_id, Kind.CANCEL)


class FramedCall:
    """One call (see the module docstring)."""

    __slots__ = ("_channel", "_code", "_connection", "_details", "_done", "_events",
                 "_expiry", "_open_payload", "_opening", "_parse", "_stream_id", "_trailing",
                 "_waiter")

    def __init__(self, channel: FramedChannel, method: str, metadata: Metadata,
                 parse: Callable[[bytes], Any], timeout: float | None) -> None:
        self._channel = channel
        self._open_payload = framed_pb2.FramedOpen(method=method, metadata={
            key.lower(): value for key, value in metadata}).SerializeToString()
        self._parse = parse
        self._connection: _Connection | None = None
        self._stream_id = 0
        self._events: collections.deque[bytes] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._code: grpc.StatusCode | None = None
        self._details = ""
        self._trailing = _EMPTY
        self._done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._opening: asyncio.Task[None] | None = None
        self._expiry = None if timeout is None else asyncio.get_running_loop().call_later(
            timeout, self.finish, grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", True)

    # -- grpc.aio's call, as the session uses it -----------------------------------------------

    async def read(self) -> Any:
        await self._open()
        while not self._events:
            if self._code is not None:
                if self._code == grpc.StatusCode.OK:
                    return grpc.aio.EOF
                raise self.error()
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        try:
            return self._parse(self._events.popleft())
        except DecodeError:
            self.finish(grpc.StatusCode.INTERNAL, "an answer that does not parse", True)
            raise self.error() from None

    async def write(self, message: Message) -> None:
        await self._open()
        if self._code is not None:
            raise asyncio.InvalidStateError("RPC already finished")
        assert self._connection is not None
        await self._connection.send(self._stream_id, Kind.MESSAGE, message.SerializeToString())

    async def send_only(self, request: Message) -> None:
        """Send ``request`` and half-close, as a unary call does (nothing if it ended)."""
        await self._open()
        if self._code is None and self._connection is not None:
            self._connection.frames.add(self._stream_id, Kind.MESSAGE,
                                        request.SerializeToString())
            await self._connection.send(self._stream_id, Kind.CLOSE)

    async def done_writing(self) -> None:
        await self._open()
        if self._code is None and self._connection is not None:
            await self._connection.send(self._stream_id, Kind.CLOSE)

    def cancel(self) -> bool:
        if self._code is not None:
            return False
        self.finish(grpc.StatusCode.CANCELLED, "Locally cancelled by application!", True)
        return True

    def done(self) -> bool:
        return self._code is not None

    async def code(self) -> grpc.StatusCode:
        await asyncio.shield(self._done)
        assert self._code is not None
        return self._code

    async def details(self) -> str:
        await asyncio.shield(self._done)
        return self._details

    async def trailing_metadata(self) -> grpc.aio.Metadata:
        await asyncio.shield(self._done)
        return self._trailing

    # -- the connection's side -----------------------------------------------------------------

    async def _open(self) -> None:
        if self._connection is not None or self._code is not None:
            return
        connection = self._channel.live_connection()
        if connection is not None:  # (the usual case: no task to wait for)
            try:
                self._attach_to(connection)
            except ConnectionError as error:  # (its stream ids are spent)
                self.finish(grpc.StatusCode.UNAVAILABLE, str(error))
            return
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._attach())
        await asyncio.shield(self._opening)

    async def _attach(self) -> None:
        try:
            connection = await self._channel.connection()
            if self._code is None:
                self._attach_to(connection)
        except ConnectionError as error:
            self.finish(grpc.StatusCode.UNAVAILABLE, str(error))

    def _attach_to(self, connection: _Connection) -> None:
        self._stream_id = connection.open(self, self._open_payload)
        self._connection = connection

    def deliver(self, payload: bytes) -> None:
        self._events.append(payload)
        self._wake()

    def finish_from(self, payload: bytes) -> None:
        """End the call as the port's END says. A code no ``grpc.StatusCode`` has ends it
        UNKNOWN, the code and the port's details told, as gRPC's client reads an unknown
        status ("Server sent unknown code ...") and a Connect client an unknown code (before,
        INTERNAL "an end that does not parse", the port's words lost); an END that does not
        parse, INTERNAL."""
        try:
            end = framed_pb2.FramedEnd.FromString(payload)
        except DecodeError:
            self.finish(grpc.StatusCode.INTERNAL, "an end that does not parse", True)
            return
        self._trailing = grpc.aio.Metadata(*sorted(end.trailing.items()))
        code = CODES_BY_NUMBER.get(end.code)
        if code is None:
            self.finish(grpc.StatusCode.UNKNOWN,
                        f"the port sent unknown code {end.code}: {end.details}")
            return
        self.finish(code, end.details)

    def finish(self, code: grpc.StatusCode, details: str, leave: bool = False) -> None:
        """End the call with ``code`` (``leave``: and tell the port this side left)."""
        if self._code is not None:
            return
        self._code, self._details = code, details
        if self._expiry is not None:
            self._expiry.cancel()
        connection = self._connection
        if connection is not None:
            if leave:
                connection.leave(self._stream_id)
            else:
                connection.calls.pop(self._stream_id, None)
        self._done.set_result(None)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def error(self) -> grpc.aio.AioRpcError:
        assert self._code is not None
        return grpc.aio.AioRpcError(self._code, _EMPTY, self._trailing, self._details)



def _unary(channel: FramedChannel, path: str, answer: type[Message], fallback: Any | None
           ) -> Callable[..., Awaitable[Any]]:
    """A unary method called as a grpc.aio stub's is: ``(request, *, timeout=, metadata=)``;
    made on ``fallback``'s method of the same name if the port proves unreachable."""
    name = path.rsplit("/", 1)[1]

    async def call(request: Message, *, timeout: float | None = None,
                   metadata: Metadata | None = None) -> Any:
        try:
            return await channel.unary(path, request, answer, metadata, timeout)
        except grpc.aio.AioRpcError as error:
            if (fallback is None or error.code() != grpc.StatusCode.UNAVAILABLE
                    or not channel.unreachable()):
                raise
        return await getattr(fallback, name)(request, timeout=timeout, metadata=metadata)
    return call


class FramedStub:
    """The methods of ``service`` named in ``framed`` on ``channel``, the others (and those,
    while the port is unreachable) the ``fallback`` stub's (see the module docstring)."""

    def __init__(self, channel: FramedChannel, service: ServiceDescriptor,
                 framed: Iterable[str], fallback: Any | None = None) -> None:
        self.channel = channel
        self.fallback = fallback
        channel.falls_back = fallback is not None
        self._methods: dict[str, Callable[..., Any]] = {}
        by_name = {method.name: method for method in service.methods}
        for name in framed:
            method = by_name.get(name)
            if method is None:
                raise ConfigError(f"{service.full_name} has no method {name}")
            path, answer = f"/{service.full_name}/{name}", GetMessageClass(method.output_type)
            if method.client_streaming or method.server_streaming:
                self._methods[name] = functools.partial(channel.stream, path, answer)
            else:
                self._methods[name] = _unary(channel, path, answer, fallback)

    async def close(self) -> None:
        """Close the framed channel (not the fallback, whose channel is its owner's)."""
        await self.channel.close()

    def __getattr__(self, name: str) -> Any:
        method = self.__dict__["_methods"].get(name)
        fallback = self.__dict__["fallback"]
        if fallback is not None and (method is None or self.channel.unreachable()):
            return getattr(fallback, name)
        if method is None:
            raise AttributeError(f"{name} is not a method of this stub")
        return method
