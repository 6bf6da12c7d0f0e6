"""A client of the Connect port (``fedhh.rpc.connect``) shaped like a grpc.aio stub, so that
the device code that runs over gRPC (``fedhh_device.fleet.Fleet``,
``fedhh.rpc.device_client.participate``) runs unchanged over Connect: ``fedhh device
--connect`` and the tests of the port use it. A browser uses ``@connectrpc/connect-web``.

``stub.Method(request, metadata=..., timeout=...)`` POSTs the request as
``application/proto`` with ``Connect-Timeout-Ms`` and returns the response message, or raises
``grpc.aio.AioRpcError`` with the gRPC status of the Connect error code (UNAVAILABLE when the
port cannot be reached, DEADLINE_EXCEEDED when the answer does not come in time), so callers'
retries and outcomes are those of gRPC.

Long-polls: a call is cut only by its own deadline. aiohttp's default (300 s for the whole
request) cut the device's 30-minute GetTask long-poll every 5 minutes, each cut a failed
check-in and a backoff. What protects a call from a connection that went dead without a reset
(the port's host lost, a partition, a NAT or load balancer that dropped the flow), as gRPC's
pings do (``fedhh_device.main.KEEPALIVE_S``): the socket's TCP keepalive
(``fedhh.rpc.serving.tcp_keepalive``, as the framed client's: the connection closed after about
two minutes of unanswered probes), and a read deadline: the call's
timeout, or for a call without one, the wait it asked the server for (a request's ``wait_ms``)
plus ``HOLD_GRACE_S``, else ``DEFAULT_READ_S``; past it the call fails UNAVAILABLE (the
connection went silent), as a gRPC call on a connection whose ping went unanswered.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp
import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from fedhh.errors import ConfigError
from fedhh.rpc.connect_wire import CODES, CONTENT_TYPE, PROTOCOL_VERSION
from fedhh.rpc.serving import CA_REMEDY, MAX_MESSAGE_BYTES, check_plaintext_peer, tcp_keepalive
from fedhh.rpc.tls import client_context

_STATUS = {name: code for code, (name, _) in CODES.items()}
# What a Connect client infers from an HTTP status when the body is no Connect error.
_HTTP = {400: grpc.StatusCode.INTERNAL, 401: grpc.StatusCode.UNAUTHENTICATED,
         403: grpc.StatusCode.PERMISSION_DENIED, 404: grpc.StatusCode.UNIMPLEMENTED,
         429: grpc.StatusCode.UNAVAILABLE, 502: grpc.StatusCode.UNAVAILABLE,
         503: grpc.StatusCode.UNAVAILABLE, 504: grpc.StatusCode.UNAVAILABLE}
Metadata = Sequence[tuple[str, str]]
# A connection's setup (TCP, TLS), and how long an answer may keep the socket silent (module
# docstring): beyond a long-poll's own wait, HOLD_GRACE_S; a call with neither a timeout nor a
# wait, DEFAULT_READ_S (aiohttp's former cut).
CONNECT_TIMEOUT_S = 30.0
HOLD_GRACE_S = 60.0
DEFAULT_READ_S = 300.0
# The most bytes of one answer a call reads (after decompression): the gRPC channels' cap
# (``grpc.max_receive_message_length``). A larger answer fails RESOURCE_EXHAUSTED, as on gRPC,
# not read past the cap; before, aiohttp read an answer of any size into memory.
MAX_ANSWER_BYTES = MAX_MESSAGE_BYTES


def _error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


def keepalive_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """A client socket (aiohttp's ``socket_factory``) with TCP keepalive
    (``serving.tcp_keepalive``, the framed client's too)."""
    family, type_, proto = addr_info[:3]
    sock = socket.socket(family=family, type=type_, proto=proto)
    tcp_keepalive(sock)
    return sock


def read_deadline(request: Message, timeout: float | None) -> float:
    """How long the socket may stay silent during a call of ``request`` (module docstring)."""
    if timeout is not None:  # (the call's own deadline cuts it first: asyncio.timeout)
        return max(timeout, 0.0) + HOLD_GRACE_S
    fields = request.DESCRIPTOR.fields_by_name
    wait_ms = int(getattr(request, "wait_ms", 0)) if "wait_ms" in fields else 0
    return wait_ms / 1000 + HOLD_GRACE_S if wait_ms > 0 else DEFAULT_READ_S


async def _bounded_body(answer: aiohttp.ClientResponse, url: str) -> bytes:
    """The body of ``answer``, read at most ``MAX_ANSWER_BYTES`` far (RESOURCE_EXHAUSTED past
    it: one whose Content-Length says so unread, one that streams past the cap there)."""
    cap = MAX_ANSWER_BYTES
    if answer.content_length is not None and answer.content_length > cap:
        raise _error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                     f"the answer of {url} is {answer.content_length} bytes, over the "
                     f"device's cap of {cap} bytes: not read")
    chunks: list[bytes] = []
    size = 0
    async for chunk in answer.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > cap:
            raise _error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                         f"the answer of {url} is over {cap} bytes, over the device's cap of "
                         f"{cap} bytes: not read")
        chunks.append(chunk)
    return b"".join(chunks)


class ConnectChannel:
    """One HTTP client session to a Connect port at ``address`` (HOST:PORT): HTTPS trusting
    ``ca`` (a PEM file), or plaintext when ``insecure`` (loopback only)."""

    def __init__(self, address: str, ca: str | None = None, insecure: bool = False) -> None:
        if insecure:
            check_plaintext_peer(address, remedy=CA_REMEDY)
            self.base, self._ssl = f"http://{address}", None
        elif ca:
            self.base = f"https://{address}"
            self._ssl = client_context(ca)
        else:
            raise ConfigError("give the CA that signed the services' certificates, or ask "
                              "for plaintext on loopback")
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:  # made in the running loop, on first use
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl if self._ssl else False,
                                               limit=0, socket_factory=keepalive_socket),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S,
                                              sock_read=DEFAULT_READ_S))
        return self._session

    async def call(self, path: str, request: Message, response_type: type[Message],
                   metadata: Metadata | None = None, timeout: float | None = None
                   ) -> Message:
        headers = {"Content-Type": CONTENT_TYPE, "Connect-Protocol-Version": PROTOCOL_VERSION}
        if timeout is not None:
            headers["Connect-Timeout-Ms"] = str(max(1, int(timeout * 1000)))
        for key, value in metadata or ():
            headers[key] = value
        silent_s = read_deadline(request, timeout)
        try:
            async with asyncio.timeout(timeout), self._client().post(
                    self.base + path, data=request.SerializeToString(), headers=headers,
                    timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S,
                                                  sock_read=silent_s)) as answer:
                body = await _bounded_body(answer, self.base + path)
                status, media = answer.status, answer.content_type
        except aiohttp.ConnectionTimeoutError:  # (these two before TimeoutError: they are ones)
            raise _error(grpc.StatusCode.UNAVAILABLE, f"no connection to {self.base} within "
                         f"{CONNECT_TIMEOUT_S:g} s") from None
        except aiohttp.ServerTimeoutError:
            raise _error(grpc.StatusCode.UNAVAILABLE,
                         f"the connection went silent for {silent_s:g} s, past the time its "
                         f"answer was due by") from None
        except TimeoutError:
            raise _error(grpc.StatusCode.DEADLINE_EXCEEDED, "no answer in time") from None
        except aiohttp.ClientError as error:
            raise _error(grpc.StatusCode.UNAVAILABLE, f"{type(error).__name__}: {error}") \
                from None
        if status == 200 and media == CONTENT_TYPE:
            try:
                return response_type.FromString(body)
            except Exception as error:  # protobuf's DecodeError
                raise _error(grpc.StatusCode.INTERNAL, f"the answer does not parse: {error}") \
                    from None
        raise _error(*error_of_answer(status, media, body))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def error_of_answer(status: int, media: str, body: bytes) -> tuple[grpc.StatusCode, str]:
    """The status and details of a Connect answer that is not a message: its JSON error body's
    ``code`` and ``message``, else its HTTP status's. A body that is not such an object (not
    JSON, not an object, nested too deep to parse: before, a RecursionError ended the device
    process) gives the HTTP status's."""
    if media == "application/json":
        try:
            parsed = json.loads(body)
            return (_STATUS.get(str(parsed.get("code")), grpc.StatusCode.UNKNOWN),
                    str(parsed.get("message", "")))
        except (ValueError, AttributeError, RecursionError):
            pass
    return _HTTP.get(status, grpc.StatusCode.UNKNOWN), f"HTTP {status}"


class ConnectStub:
    """The unary methods of ``service`` over ``channel``, as attributes named like a gRPC
    stub's (``await stub.GetTask(request, metadata=..., timeout=...)``); ``close()`` closes
    the channel."""

    def __init__(self, channel: ConnectChannel, service: ServiceDescriptor) -> None:
        self.channel = channel
        self._methods: dict[str, Callable[..., Awaitable[Any]]] = {}
        for method in service.methods:
            if not (method.client_streaming or method.server_streaming):
                self._methods[method.name] = self._method(
                    f"/{service.full_name}/{method.name}", GetMessageClass(method.output_type))

    def _method(self, path: str, response_type: type[Message]) -> Callable[..., Awaitable[Any]]:
        async def call(request: Message, metadata: Metadata | None = None,
                       timeout: float | None = None) -> Any:
            return await self.channel.call(path, request, response_type, metadata, timeout)
        return call

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        try:
            return self.__dict__["_methods"][name]
        except KeyError:
            raise AttributeError(f"{name} is not a unary method of this service") from None

    async def close(self) -> None:
        await self.channel.close()
