"""Serving a grpc.aio server: uvloop, TLS or loopback-only plaintext, health and reflection,
limits before work (receive cap, concurrent streams per connection, a unary request due within
a deadline with a cap on the calls waiting for theirs, requests that do not parse answered
INVALID_ARGUMENT), and graceful shutdown on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import errno
import gc
import inspect
import ipaddress
import logging
import os
import signal
import socket
import ssl
import traceback
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import grpc
from cryptography.exceptions import UnsupportedAlgorithm
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2_grpc

from fedhh.errors import ConfigError, FedhhError
from fedhh.output_paths import check_output
from fedhh.rpc import task_census
from fedhh.rpc.channel_pool import stream_cap_warning
from fedhh.rpc.errors import bounded_details, details_of
from fedhh.rpc.health import Health, Reflection
from fedhh.rpc.http_listener import (
    FILE_SHARE,
    HEAD_TIMEOUT_S,
    open_file_limit,
    raise_open_file_limit,
)
from fedhh.rpc.request_waits import RequestWaits
from fedhh.rpc.tls import TlsFiles, ca_certificates, ca_credentials, read_tls_file

log = logging.getLogger(__name__)

# Vectors travel in bounded chunks; this caps any single message well above a chunk. Clients'
# channels use it; a service passes its own, smaller receive cap to new_server.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# A call's metadata, at most, on the gRPC port and the framed one (its OPEN): gRPC's default
# soft limit, made its hard one too. With gRPC's defaults (8 KiB soft, 16 KiB hard) a call
# with 9 to 16 KiB of metadata was refused RESOURCE_EXHAUSTED at random (of 20 calls with 12
# KiB, 10), where the framed port refused every one.
MAX_METADATA_BYTES = 8 << 10
OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]


def does_not_parse(error: BaseException | str) -> str:
    """The words a request that did not parse is refused with, INVALID_ARGUMENT: the same on
    every port a device reaches (gRPC, Connect, framed), in a call or a stream. The parser's
    reason on one line, cut to 200 characters (it may quote the sender's bytes)."""
    return f"the request does not parse: {' '.join(str(error).split())[:200]}"


def too_large(cap: int) -> str:
    """The words a request above a port's receive cap of ``cap`` bytes is refused with,
    RESOURCE_EXHAUSTED, on the Connect and framed ports. gRPC's port refuses it in gRPC's own
    words ("Received message larger than max (N vs. cap)"), before any code of ours runs."""
    return f"a request above the {cap}-byte receive cap"


class Unparsable:
    """Stands in for a request message that did not parse; the call is answered
    INVALID_ARGUMENT (with ``details``, :func:`does_not_parse`'s words) before its handler
    sees it (:class:`ParseErrors`)."""

    __slots__ = ("details",)

    def __init__(self, details: str) -> None:
        self.details = details


def response_bytes(response: Any) -> bytes:
    """A streaming handler's response as the bytes a port sends: bytes as they are (encoded by
    the handler), a protobuf message serialized, a function called first (a response made only
    when the port writes it: on the framed port, once the connection's turn comes to it,
    ``fedhh.rpc.framed.frames.FrameWriter``; on gRPC, at the write)."""
    if callable(response):
        response = response()
    return response if isinstance(response, bytes) else response.SerializeToString()


class UnparsableRequest(ConfigError):
    """What ``context.read()`` raises in a streaming handler for a message that does not parse
    (INVALID_ARGUMENT as any ConfigError: the handler may first tell it in its own way)."""


class _BoundedAborts:
    """A handler's context whose ``abort`` sends its details bounded
    (``errors.bounded_details``), as the Connect and framed ports send every status's: gRPC
    sends them as given, percent-encoded in a header, and its clients refuse a header past
    8 KiB now and then, past 16 KiB always: an abort of 1,400 four-byte characters reached the
    caller as RESOURCE_EXHAUSTED "received metadata size exceeds hard limit", not its status."""

    __slots__ = ("_context",)

    def __init__(self, context: grpc.aio.ServicerContext) -> None:
        self._context = context

    async def abort(self, code: grpc.StatusCode, details: str = "",
                    trailing_metadata: Any = ()) -> None:
        await self._context.abort(code, bounded_details(details), trailing_metadata)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


class _CheckedReads(_BoundedAborts):
    """A streaming handler's context whose ``read()`` never returns an :class:`Unparsable`
    (the request iterator's are answered by :func:`_checked_stream`; a handler that reads from
    its context, the session stream and the leader's selector link, saw them as messages)."""

    __slots__ = ()

    async def read(self) -> Any:
        message = await self._context.read()
        if isinstance(message, Unparsable):
            raise UnparsableRequest(message.details)
        return message


def _tolerant(deserializer: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as error:  # protobuf's DecodeError, or anything a parser raises
            return Unparsable(does_not_parse(error))
    return parse


async def _reject(context: grpc.aio.ServicerContext, bad: Unparsable) -> None:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, bad.details)


def _checked_stream(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
                    ) -> AsyncIterator[Any]:
    async def checked() -> AsyncIterator[Any]:
        async for request in requests:
            if isinstance(request, Unparsable):
                await _reject(context, request)
            yield request
    return checked()


def _forget_frames(error: BaseException) -> None:
    """Drop the locals of the finished frames ``error`` passed through. gRPC keeps a call's
    abort (and any error a handler raised) in reference cycles that only the cycle collector
    frees, which the services run seldom (:func:`tune_gc`), and the error's traceback holds
    every frame it left, with their locals: the request, whatever a handler had built. A
    flood of refused megabyte requests held ~25 MB each until a collection. Called by the
    outermost wrapper of each handler (:func:`_reading_first`'s for a unary request, else
    :func:`_guard`'s), whose own frame holds no request."""
    traceback.clear_frames(error.__traceback__)


async def _checked(request: Any, context: grpc.aio.ServicerContext, streaming_request: bool
                   ) -> tuple[Any, grpc.aio.ServicerContext]:
    """The request (a stream of them, checked as each comes) and the context (its reads
    checked, its aborts bounded) that a handler gets; a unary request that does not parse
    answered INVALID_ARGUMENT here."""
    if streaming_request:
        return _checked_stream(request, context), _CheckedReads(context)
    if isinstance(request, Unparsable):
        await _reject(context, request)
    return request, _BoundedAborts(context)


def _guard(behaviour: Callable[..., Any], streaming_request: bool) -> Callable[..., Any]:
    """``behaviour`` with unparsable requests answered INVALID_ARGUMENT."""
    if inspect.isasyncgenfunction(behaviour):
        async def generator(request: Any, context: grpc.aio.ServicerContext) -> Any:
            request, context = await _checked(request, context, streaming_request)
            try:
                async for response in behaviour(request, context):
                    yield response
            except BaseException as error:
                _forget_frames(error)
                raise
        return generator

    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        request, context = await _checked(request, context, streaming_request)
        try:
            return await behaviour(request, context)
        except BaseException as error:
            _forget_frames(error)
            raise
    return call


class ParseErrors(grpc.aio.ServerInterceptor):
    """Answer a request that does not parse INVALID_ARGUMENT with a one-line reason (gRPC itself
    answers UNKNOWN with the parser's exception); handlers never see such a request."""

    def __init__(self) -> None:
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}

    async def intercept_service(self, continuation: Callable[..., Any],
                                details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or handler.request_deserializer is None:
            return handler
        method = details.method
        method = method.decode() if isinstance(method, bytes) else str(method)
        wrapped = self._wrapped.get(method)
        if wrapped is None:
            kinds = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")
            changes: dict[str, Any] = {
                "request_deserializer": _tolerant(handler.request_deserializer)}
            for kind in kinds:
                behaviour = getattr(handler, kind)
                if behaviour is not None:
                    changes[kind] = _guard(behaviour, kind.startswith("stream"))
            wrapped = handler._replace(**changes)  # a namedtuple in grpc
            self._wrapped[method] = wrapped
        return wrapped


async def _request(context: grpc.aio.ServicerContext, waits: RequestWaits) -> Any:
    """A unary call's request, read within ``waits.timeout_s`` while the call holds one of
    ``waits``' places; else the call ends (UNAVAILABLE at the cap, DEADLINE_EXCEEDED, or
    INVALID_ARGUMENT for a call without its request)."""
    if not waits.take():
        await context.abort(grpc.StatusCode.UNAVAILABLE, waits.busy)
    late = False
    try:
        async with asyncio.timeout(waits.timeout_s):
            request = await context.read()
    except TimeoutError:
        late = True  # (aborted outside the except block: no exception chained into a cycle)
    finally:
        waits.release()
    if late:
        await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, waits.late)
    if request is grpc.aio.EOF:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a unary call without its request")
    return request


def _reading_first(handler: grpc.RpcMethodHandler, waits: RequestWaits) -> grpc.RpcMethodHandler:
    """``handler`` (a unary-request method's) as a stream-request handler that reads its one
    request itself, under ``waits``."""
    options = {"request_deserializer": handler.request_deserializer,
               "response_serializer": handler.response_serializer}
    behaviour = handler.unary_unary
    if behaviour is not None:
        async def unary(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                return await behaviour(await _request(context, waits), context)
            except BaseException as error:
                _forget_frames(error)
                raise
        return grpc.stream_unary_rpc_method_handler(unary, **options)
    streaming = handler.unary_stream
    if inspect.isasyncgenfunction(streaming):
        async def generator(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                async for response in streaming(await _request(context, waits), context):
                    yield response
            except BaseException as error:
                _forget_frames(error)
                raise
        return grpc.stream_stream_rpc_method_handler(generator, **options)

    async def writer(requests: Any, context: grpc.aio.ServicerContext) -> None:
        try:
            await streaming(await _request(context, waits), context)  # (it writes its responses)
        except BaseException as error:
            _forget_frames(error)
            raise
    return grpc.stream_stream_rpc_method_handler(writer, **options)


class RequestDeadline(grpc.aio.ServerInterceptor):
    """A unary call's request is due within ``waits.timeout_s`` of the call, and at most
    ``waits.limit`` calls of the server wait for theirs at once (``fedhh.rpc.request_waits``:
    gRPC itself would hold any number, each for ever). The method's handler is served as a
    stream-request one that reads the request (the wire is the same)."""

    def __init__(self, waits: RequestWaits) -> None:
        self.waits = waits
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}

    async def intercept_service(self, continuation: Callable[..., Any],
                                details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or handler.request_streaming:
            return handler
        method = details.method
        method = method.decode() if isinstance(method, bytes) else str(method)
        wrapped = self._wrapped.get(method)
        if wrapped is None:
            wrapped = self._wrapped[method] = _reading_first(handler, self.waits)
        return wrapped


CredentialCheck = Callable[[tuple[tuple[str, str | bytes], ...]], object]


def _refuse_unread(code: grpc.StatusCode, reason: str) -> grpc.RpcMethodHandler:
    async def refuse(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        await context.abort(code, reason)
    return grpc.stream_unary_rpc_method_handler(refuse)


def check_failure_status(error: BaseException) -> grpc.StatusCode:
    """The status of a credential check that raised ``error``: UNAUTHENTICATED, unless the
    error names its own (``grpc_status``: the coordinator's store unavailable is UNAVAILABLE).
    Before, a database outage told every device "UNAUTHENTICATED: the database is
    unavailable", and a device takes that for its credential rejected."""
    custom = getattr(error, "grpc_status", None)
    return custom if isinstance(custom, grpc.StatusCode) else grpc.StatusCode.UNAUTHENTICATED


def credential_refusal(check: CredentialCheck, metadata: tuple[tuple[str, str | bytes], ...],
                       port: str) -> tuple[grpc.StatusCode, str] | None:
    """None when ``metadata`` passes ``check``, else the code and words the call is refused
    with, the same on every port (gRPC's :class:`CredentialGate`, Connect, framed): a domain
    error's :func:`check_failure_status` and its message on one bounded line
    (``errors.details_of``); any other error INTERNAL, logged, its words not sent. Before,
    gRPC's gate sent a refusal's text unbounded, over as many lines as it had, and let any
    other error out to gRPC, which answered UNKNOWN with its type and text."""
    try:
        check(metadata)
    except FedhhError as error:
        return check_failure_status(error), details_of(error)
    except Exception:  # (a bug, or the store failing: this call's end, not the port's)
        log.exception("a call's credential check failed", extra={"port": port})
        return grpc.StatusCode.INTERNAL, "internal error"
    return None


def credential_check_for(checks: Mapping[str, CredentialCheck], method: str
                         ) -> CredentialCheck | None:
    """The check of ``method`` (``/package.Service/Method``) in ``checks``: its own, else its
    service's (``/package.Service/``), else None. The gRPC port (:class:`CredentialGate`) and
    the Connect port (``fedhh.rpc.connect``) both look a method's check up here."""
    check = checks.get(method)
    if check is None:
        check = checks.get(method[: method.rfind("/") + 1])
    return check


class CredentialGate(grpc.aio.ServerInterceptor):
    """Refuse a call whose credentials (metadata) fail their check before its message is read.

    ``checks`` maps a method's full name (``/package.Service/Method``) or a service's prefix
    (``/package.Service/``) to a check that raises :class:`fedhh.errors.AuthenticationError`.
    A refused call is answered as :func:`credential_refusal` words it (UNAUTHENTICATED, unless
    the error names its own code) by a stream-request handler that never asks for the request,
    so an unauthenticated caller costs the service its metadata only: gRPC would otherwise
    receive and parse a unary request in full (up to the receive cap) before the servicer could
    look at the caller. Servicers keep their own checks."""

    def __init__(self, checks: Mapping[str, CredentialCheck]) -> None:
        self._checks = checks

    async def intercept_service(self, continuation: Callable[..., Any],
                                details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method = details.method
        method = method.decode() if isinstance(method, bytes) else str(method)
        check = credential_check_for(self._checks, method)
        if check is not None:
            refused = credential_refusal(check, tuple(details.invocation_metadata or ()),
                                         "grpc")
            if refused is not None:
                return _refuse_unread(*refused)
        return await continuation(details)


def tune_gc() -> None:
    """Run CPython's cycle collector less often in a service process.

    A service allocates many short-lived objects per call (protobuf messages, futures), so with
    the default generation-0 threshold (700 allocations) the collector runs thousands of times
    per round, and each older-generation pass walks every long-lived object of the open rounds
    (rosters, shares): profiles of the aggregator under a 1000-device load showed about 15% of
    its CPU time there. Objects allocated so far (modules, generated classes) are frozen out of
    its sight; cycles are still collected, only in larger batches.

    A collection of generation 0 walks the objects allocated since the last one and still
    alive; under load most of those are the awaits of thousands of open streams (a worker
    holds ~100 tracked objects per stream: coroutines, futures, batch operations), alive for
    seconds, so a small generation 0 passes them on to generation 1, whose collections walked
    them again: at 20,000 devices (10,000 per worker) generation 0 at 50,000 cost each worker
    1.6 s and generation 1 (every 20th) 0.9 s; at 200,000, 1.4 s and nothing (12 collections
    of ~0.1 s during the round instead of ~65 of ~25 ms and three of ~0.3 s).

    At 50,000 devices (25,000 a worker) the threshold of 200,000 still ran the youngest
    generation during the round, over the objects of a stage's pushes, 46 us a device in all,
    and the workers cost 0.114 ms per ms of the devices' CPU; at 1,000,000, 15 us and 0.101
    (0.102 against 0.109 in a second pair), the same peak memory (docs/benchmarks.md,
    twenty-fourth stop). At 5,000 devices neither collects during the round. What waits for
    a collection is cyclic garbage only (the rest is freed by reference counting): at most a
    million objects' worth, ~100 MB of small ones; gRPC's own per-call garbage (each call's
    method-handler closure, ~1.7 tracked objects and ~250 bytes a call, cancelled or not) is
    larger: a flood of ~600,000 calls cancelled before they began held ~150-180 MB until the
    collection, then freed it (2026-12-06; none of it our handlers', whose cancelled calls
    leave no cycle)."""
    gc.freeze()
    gc.set_threshold(1_000_000, 20, 10)


def install_uvloop() -> None:
    """Use uvloop's event loop when available (it is a dependency on POSIX)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - Windows
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


T = TypeVar("T")


def run_service(main: Coroutine[Any, Any, T]) -> T:
    """Run a service process's ``main`` to its end, the process prepared as every service's
    is: uvloop's event loop (:func:`install_uvloop`), the cycle collector run seldom
    (:func:`tune_gc`), the soft open-file limit raised to the hard one (a listener takes a
    quarter of it, :func:`server_options`; a fleet of devices a file per connection). The
    coordinator, a selector, an aggregator, a combiner and a device process all start here
    (before, each had its own copy, and the combiner's set neither the collector nor the
    limit: its port took a quarter of the soft limit, 256 connections at the usual 1,024)."""
    install_uvloop()
    tune_gc()
    raise_open_file_limit()
    return asyncio.run(main)


def check_address(address: str, what: str) -> str:
    """``address`` if it is HOST:PORT (``[::1]:PORT`` for IPv6); ConfigError otherwise."""
    host, sep, port = address.rpartition(":")
    if (not sep or not host or not port.isascii() or not port.isdigit()
            or not 0 < int(port) < 65536):
        raise ConfigError(f"{what} is HOST:PORT, got {address!r}")
    return address


def check_web_url(url: str, what: str) -> str:
    """``url`` if it is a Connect base URL devices can be given: ``https://HOST:PORT`` (or
    ``http://`` to a loopback host), nothing after the port; ConfigError otherwise."""
    scheme, sep, rest = url.partition("://")
    host, colon, port = rest.rpartition(":")
    if (sep != "://" or scheme not in ("https", "http") or not host or not colon
            or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536
            or "/" in rest):
        raise ConfigError(f"{what} is https://HOST:PORT, got {url!r}")
    if scheme == "http" and not is_loopback(rest):
        raise ConfigError(f"{what}: plaintext http:// only to a loopback host, got {url!r}")
    return url


def check_plaintext_listener(address: str, insecure: bool, what: str = "") -> None:
    """For a listener without TLS files (gRPC's, the framed, Connect and dashboard ports):
    ConfigError, naming ``what`` and ``address``, unless plaintext was asked for (--insecure)
    and ``address`` is on loopback. (Before, each listener kept a copy, worded its own way.)"""
    where = f"{what} on {address}" if what else address
    if not insecure:
        raise ConfigError(f"{where}: give TLS files (--tls-dir) or ask for --insecure on "
                          "loopback")
    if not is_loopback(address):
        raise ConfigError(f"{where}: plaintext is allowed on loopback addresses only; it needs "
                          "TLS files (--tls-dir)")


def listener_context(tls: TlsFiles | None, address: str, insecure: bool, what: str
                     ) -> ssl.SSLContext | None:
    """An HTTP or framed listener's TLS context from the service's files (HTTP/1.1 by ALPN), or
    None for plaintext, allowed only when asked for and on loopback
    (:func:`check_plaintext_listener`); ``what`` ("the ...") names the listener in a refusal.
    (Before, the framed and Connect ports each wrote these lines, and the framed port's
    refusals named it without its article.)"""
    if tls is not None:
        return tls.server_context(what)
    check_plaintext_listener(address, insecure, what)
    return None


# What a client that trusts the services' CA by --ca (a device's gRPC, framed and Connect
# channels, fedhh admin and health) is told its plaintext needs off loopback: one word for all
# (before, the framed client's read "it needs TLS (--ca)", the others' "it needs --ca").
CA_REMEDY = "--ca"


def check_plaintext_peer(address: str, option: str = "", remedy: str = "TLS") -> None:
    """ConfigError, naming ``option`` and the ``remedy``, unless ``address`` is on loopback: the
    rule of every client that dials in plaintext (a device, a coordinator its aggregator, a
    selector its leader, a combiner its workers), as ``bind``'s is every server's: the calls
    carry tokens and credentials in their metadata. (Before, the services dialled their peers in
    plaintext wherever they were, sending the control and selector tokens in clear.)"""
    if not is_loopback(address):
        where = f"{option} {address}" if option else address
        raise ConfigError(f"{where}: plaintext is allowed to loopback addresses only (the "
                          f"calls carry tokens); it needs {remedy}")


def open_channel(address: str, credentials: grpc.ChannelCredentials | None = None,
                 options: Sequence[tuple[str, Any]] | None = None, remedy: str = "TLS"
                 ) -> grpc.aio.Channel:
    """A process's grpc.aio channel to a service: a service's to its peer (the aggregator or
    combiner, a worker, a selector's leader; ``options`` by default ``PEER_OPTIONS``, the
    message caps and the clients' pings) or a device's (its own options): TLS with
    ``credentials``, else plaintext to a loopback address only (:func:`check_plaintext_peer`,
    naming ``remedy``). (Before, the device process built its channels with a copy of this.)"""
    chosen = list(PEER_OPTIONS if options is None else options)
    if credentials is None:
        check_plaintext_peer(address, remedy=remedy)
        return grpc.aio.insecure_channel(address, options=chosen)
    return grpc.aio.secure_channel(address, credentials, options=chosen)


# A command's call that a wait makes again (``fedhh admin wait``'s polls, ``fedhh health
# --wait``): the service unreachable, or too slow to answer within the call's deadline. Any
# other answer is the service's, and final. (Before, each wait named the pair itself.)
COMMAND_RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})

# gRPC's words for a call it never sent: no connection to the address could be made (refused,
# unreachable, a TLS handshake refused) or its name did not resolve. A call that was sent and
# lost its connection says otherwise ("Socket closed", "Connection reset").
_NEVER_SENT = ("failed to connect to all addresses", "errors resolving",
               "dns resolution failed")


def never_sent(error: Any) -> bool:
    """Whether a failed call of a command (a grpc.RpcError) never reached the service:
    UNAVAILABLE with ``_NEVER_SENT``'s words. Such a StartRun started nothing, and such a mint
    stored nothing (``fedhh admin``)."""
    details = (error.details() or "").lower()
    return error.code() is grpc.StatusCode.UNAVAILABLE and any(
        words in details for words in _NEVER_SENT)


def command_channel(address: str, ca: str | os.PathLike[str] | None,
                    options: Sequence[tuple[str, Any]] = (), tls_name: str | None = None
                    ) -> grpc.Channel:
    """A synchronous channel for a command (``fedhh admin``, ``fedhh health``, a start's
    preflight): TLS trusting the CA in ``ca`` (checking the name ``tls_name`` instead of the
    address's, if given), else plaintext to a loopback address only."""
    if not ca:
        check_plaintext_peer(address, remedy=CA_REMEDY)
        return grpc.insecure_channel(address, options=list(options))
    extra = [("grpc.ssl_target_name_override", tls_name)] if tls_name else []
    return grpc.secure_channel(address, ca_credentials(ca), options=[*options, *extra])


def is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# Calls a device-facing server lets gRPC core queue before it sheds them (backlog_options).
MAX_PENDING_CALLS = 16_384


def backlog_options(max_pending_calls: int = MAX_PENDING_CALLS) -> list[tuple[str, int]]:
    """Server options: a backlog of not yet started calls sized for a fleet's bursts.

    The asyncio server starts one call per turn of its event loop; calls that arrive faster
    wait in gRPC core's queue. Past ``grpc.server.max_pending_requests`` (default 1000) core
    sheds new calls at random, with a probability rising to 1 at the hard limit (default 3000),
    answering CANCELLED before any handler runs (so the service neither logs nor counts them),
    and the callers retry: the shed work comes back, with a backoff, as more work."""
    if not 1 <= max_pending_calls <= 1 << 30:  # gRPC takes twice it as a C int
        raise ConfigError(f"max_pending_calls must be in [1, {1 << 30}], got {max_pending_calls}")
    return [("grpc.server.max_pending_requests", max_pending_calls),
            ("grpc.server.max_pending_requests_hard_limit", 2 * max_pending_calls)]


# A connection's TLS and HTTP/2 handshakes, the listeners' figure (http_listener.HEAD_TIMEOUT_S,
# the framed port's too): gRPC's default, 120 s, let a connection that never sends its preface
# hold its place long.
HANDSHAKE_TIMEOUT_MS = round(HEAD_TIMEOUT_S * 1000)
# A connection with no call for this long is sent GOAWAY (its client reconnects at its next
# call, as gRPC's clients do by themselves); the framed port closes one with no stream after as
# long (``FramedLimits.idle_timeout_s`` takes this figure). gRPC keeps an idle connection for
# ever by default, so that connections that made one call and then nothing held every place
# of the port's connection cap, and no newcomer (a device) could connect for as long as they
# stayed.
MAX_CONNECTION_IDLE_MS = 120_000
# Client pings (HTTP/2 PING) a server takes: one per MIN_PING_INTERVAL_MS while no data flows,
# only while a call is open; a ping sooner is a "strike", and past MAX_PING_STRIKES the
# connection is closed (GOAWAY ENHANCE_YOUR_CALM). Clients ping every KEEPALIVE_S (320 s,
# below) during a call, so that a long-poll on a dead connection
# fails: these were gRPC's defaults, relied on unsaid, so a change of either side (or of gRPC's
# defaults) could close every device's long-poll for pinging too often, with no test to say.
MIN_PING_INTERVAL_MS = 300_000
MAX_PING_STRIKES = 2


def keepalive_options() -> list[tuple[str, int]]:
    """The servers' ping policy (``MIN_PING_INTERVAL_MS``), set rather than defaulted."""
    return [("grpc.http2.min_recv_ping_interval_without_data_ms", MIN_PING_INTERVAL_MS),
            ("grpc.http2.max_ping_strikes", MAX_PING_STRIKES),
            ("grpc.keepalive_permit_without_calls", 0)]


# A client's connections are pinged every KEEPALIVE_S while a call is open, and closed when a
# ping goes unanswered for KEEPALIVE_TIMEOUT_S: a call held on a connection that went dead
# without a reset (the peer's host lost, a network partition, a NAT or load balancer that
# dropped the idle flow) fails and is made again, where without pings it hung for good (a
# device's GetTask long-poll, up to 30 minutes with no deadline; a selector's stream to its
# leader, with none). The pings also keep such a flow from going idle. The services accept a
# ping per MIN_PING_INTERVAL_MS (5 minutes) during a call (more often, and past
# MAX_PING_STRIKES the connection is closed), hence the margin above 300 s
# (tests/unit/test_ping_policy.py holds the two together).
KEEPALIVE_S = 320.0
KEEPALIVE_TIMEOUT_S = 20.0


# The framed and Connect clients' connections carry no HTTP/2 pings: TCP keepalive does their
# work. The first probe after TCP_KEEPIDLE_S of silence, then one every TCP_KEEPINTVL_S; after
# TCP_KEEPCNT unanswered the kernel closes the connection (about two minutes), and its calls
# fail UNAVAILABLE and are made again, as a gRPC call's on a connection whose ping went
# unanswered. The probes also keep such a flow from going idle.
TCP_KEEPIDLE_S = 60
TCP_KEEPINTVL_S = 15
TCP_KEEPCNT = 4


def tcp_keepalive(sock: Any) -> None:
    """Probe ``sock``'s peer when the connection is silent (above): a client socket of the
    framed or the Connect port, or the socket of an asyncio transport. A platform that refuses
    a timing keeps the system's."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", TCP_KEEPIDLE_S), ("TCP_KEEPALIVE", TCP_KEEPIDLE_S),
                        ("TCP_KEEPINTVL", TCP_KEEPINTVL_S), ("TCP_KEEPCNT", TCP_KEEPCNT)):
        option = getattr(socket, name, None)  # (TCP_KEEPALIVE: macOS's TCP_KEEPIDLE)
        if option is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, option, value)


def client_keepalive_options(keepalive_s: float = KEEPALIVE_S,
                             timeout_s: float = KEEPALIVE_TIMEOUT_S) -> list[tuple[str, int]]:
    """A client channel's pings (above), for the devices' channels and the services' channels
    to their peers alike (grpc 1.85 times an unanswered ping out by
    ``grpc.http2.ping_timeout_ms``, not ``grpc.keepalive_timeout_ms`` alone, and by default
    sends only 2 pings while no data flows: ``max_pings_without_data`` 0 lifts that)."""
    keepalive_ms, timeout_ms = int(keepalive_s * 1000), int(timeout_s * 1000)
    return [("grpc.keepalive_time_ms", keepalive_ms), ("grpc.keepalive_timeout_ms", timeout_ms),
            ("grpc.http2.ping_timeout_ms", timeout_ms),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.keepalive_permit_without_calls", 0)]


# A channel whose service went away (a device's, or any of PEER_OPTIONS') tries to connect
# again at least this often. gRPC's own backoff grows 1.6x to 120 s, and between its tries a
# call fails at once: after a coordinator restart (20 s down) a device process's channel next
# tried 4-6 s after the coordinator served again, a selector's 8.7 s after (24.8 s after 150 s
# down), where the coordinator's first check-in waits for them 20 s
# (fedhh_coordinator.lobby.RETURN_S); a combiner saw a worker restarted after 20 / 60 / 150 s
# down serving again 9.0 / 12.0 / 22.1 s later (2.0 s after 3 s down), and a coordinator its
# aggregator likewise, the round waiting meanwhile. A process opens a few such channels, not
# one a device, so a try every 2 s costs nothing.
RECONNECT_MAX_MS = 2_000


# A service's channels to its peers (the coordinator's to its aggregator or combiner, a
# combiner's to its workers, a selector's stream to its leader): the message caps, the
# devices' pings (before, no pings: a selector attached to a leader whose host vanished
# without a reset waited on the stream for good, its devices told nothing) and the devices'
# reconnection bound (before, the selector's channel alone had it).
PEER_OPTIONS = [*OPTIONS, *client_keepalive_options(),
                ("grpc.max_reconnect_backoff_ms", RECONNECT_MAX_MS)]


def check_receive_cap(name: str, cap: int) -> None:
    """ConfigError unless ``cap``, a port's receive cap, is 1 KiB to ``MAX_MESSAGE_BYTES`` (what
    the devices' and peers' channels send at most): the gRPC, Connect and framed ports alike
    (before, the framed port took any cap from one byte up, above what any client sends)."""
    if isinstance(cap, bool) or not isinstance(cap, int) or not 1024 <= cap <= MAX_MESSAGE_BYTES:
        raise ConfigError(f"{name} must be in [1024, {MAX_MESSAGE_BYTES}] bytes, got {cap!r}")


def server_options(max_receive_bytes: int = MAX_MESSAGE_BYTES,
                   max_concurrent_streams: int | None = None,
                   extra: Sequence[tuple[str, Any]] = ()) -> list[tuple[str, Any]]:
    """gRPC server options: the receive cap (a larger message is refused with
    RESOURCE_EXHAUSTED before it is parsed), the cap on concurrent streams (calls) per client
    connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; a client's further calls wait for a
    stream), at most a quarter of the open-file limit in connections (one more is closed as
    it arrives, before its handshake: gRPC has no cap of its own, and connections alone could
    take every file the service may open; each listener of ``http_listener`` has the same
    share), the handshakes within ``HANDSHAKE_TIMEOUT_MS``, a connection with no call for
    ``MAX_CONNECTION_IDLE_MS`` sent away, a call's metadata at most ``MAX_METADATA_BYTES``,
    the client pings of :func:`keepalive_options`, and ``extra``."""
    check_receive_cap("max_receive_bytes", max_receive_bytes)
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", max_receive_bytes),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.so_reuseport", 0),
        ("grpc.max_allowed_incoming_connections", max(1, open_file_limit() // FILE_SHARE)),
        ("grpc.server_handshake_timeout_ms", HANDSHAKE_TIMEOUT_MS),
        ("grpc.max_connection_idle_ms", MAX_CONNECTION_IDLE_MS),
        ("grpc.max_metadata_size", MAX_METADATA_BYTES),
        ("grpc.absolute_max_metadata_size", MAX_METADATA_BYTES),
        *keepalive_options(),
    ]
    if max_concurrent_streams is not None:
        if not 1 <= max_concurrent_streams <= 1 << 20:
            raise ConfigError(f"max_concurrent_streams must be in [1, {1 << 20}], got "
                              f"{max_concurrent_streams}")
        options.append(("grpc.max_concurrent_streams", max_concurrent_streams))
    return [*options, *extra]


def new_server(max_receive_bytes: int = MAX_MESSAGE_BYTES,
               max_concurrent_streams: int | None = None,
               extra_options: Sequence[tuple[str, Any]] = (),
               credential_checks: Mapping[str, CredentialCheck] | None = None,
               request_waits: RequestWaits | None = None) -> grpc.aio.Server:
    """A grpc.aio server with the limits of :func:`server_options`; calls failing their
    ``credential_checks`` are refused unread (:class:`CredentialGate`); a unary request is due
    under ``request_waits`` (:class:`RequestDeadline`; by default ``RequestWaits("grpc")``);
    requests that do not parse are answered INVALID_ARGUMENT (:class:`ParseErrors`)."""
    if max_concurrent_streams is not None and (note := stream_cap_warning(
            max_concurrent_streams)):
        log.warning(note, extra={"max_streams_per_connection": max_concurrent_streams})
    interceptors: list[grpc.aio.ServerInterceptor] = []
    if credential_checks:
        interceptors.append(CredentialGate(credential_checks))
    interceptors.append(RequestDeadline(request_waits or RequestWaits("grpc")))
    interceptors.append(ParseErrors())
    return grpc.aio.server(
        options=server_options(max_receive_bytes, max_concurrent_streams, extra_options),
        interceptors=interceptors)


def check_tls_files(tls: TlsFiles) -> None:
    """ConfigError naming the file unless ``tls``'s key and certificate load and belong together
    (gRPC would only fail to bind, with no word of why, and log OpenSSL's errors) and its
    ca.pem holds a certificate (``tls.ca_certificates``: the service's channels to its peers
    trust it; before, a combiner whose ca.pem held none started, and every call to its
    workers failed their handshakes, UNAVAILABLE)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    key_pem, cert_pem = read_tls_file(tls.key), read_tls_file(tls.cert)
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:  # (cryptography's way of saying that a password is needed)
        raise ConfigError(f"TLS key {tls.key} is encrypted; the service needs it "
                          f"unencrypted") from None
    except (ValueError, UnsupportedAlgorithm):
        raise ConfigError(f"TLS key {tls.key} does not load as a PEM private key") from None
    try:
        cert = x509.load_pem_x509_certificates(cert_pem)[0]  # the leaf, then its chain
    except ValueError:
        raise ConfigError(f"TLS certificate {tls.cert} does not load as a PEM "
                          f"certificate") from None
    der = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if cert.public_key().public_bytes(*der) != key.public_key().public_bytes(*der):
        raise ConfigError(f"TLS key {tls.key} is not the key of the certificate {tls.cert}")
    check_certificate_dates(cert, tls.cert)
    ca_certificates(tls.ca)


# A certificate is refused while it is valid only from this far ahead of the machine's clock.
CLOCK_SKEW = dt.timedelta(minutes=5)
# A certificate that expires within this is served with a WARNING as the service starts.
EXPIRY_WARNING = dt.timedelta(days=7)
_expiry_warned: set[str] = set()


def check_certificate_dates(cert: Any, path: object, now: dt.datetime | None = None) -> None:
    """ConfigError if the certificate ``cert`` (an ``x509.Certificate``, read from ``path``)
    has expired or is not valid yet (beyond ``CLOCK_SKEW``): every client refuses it, so a
    service that served it would take calls from nobody. Before, a service started with an
    expired certificate logged "serving" and every call and health check failed at the
    clients' end. A certificate that expires within ``EXPIRY_WARNING`` is one WARNING."""
    now = now or dt.datetime.now(dt.UTC)
    until, since = cert.not_valid_after_utc, cert.not_valid_before_utc
    if until <= now:
        raise ConfigError(
            f"TLS certificate {path} expired on {until:%Y-%m-%d %H:%M} UTC: every client "
            f"refuses it; renew it (`fedhh certs` again keeps the CA, or your PKI) and start "
            f"the service again")
    if since > now + CLOCK_SKEW:
        raise ConfigError(
            f"TLS certificate {path} is valid only from {since:%Y-%m-%d %H:%M} UTC, and this "
            f"machine's clock says {now:%Y-%m-%d %H:%M} UTC: every client would refuse it "
            f"(is the clock right?)")
    if until - now < EXPIRY_WARNING and str(path) not in _expiry_warned:
        _expiry_warned.add(str(path))
        log.warning("the TLS certificate expires soon: renew it (`fedhh certs` again, or your "
                    "PKI) and restart the services that serve it",
                    extra={"certificate": str(path), "expires": f"{until:%Y-%m-%d %H:%M} UTC"})


_BIND_HINTS = {
    errno.EADDRINUSE: "the port is in use",
    errno.EADDRNOTAVAIL: "the host is not an address of this machine",
    errno.EACCES: "ports below 1024 need privileges",
}


def unbindable(address: str) -> str | None:
    """Why ``address`` (HOST:PORT) cannot be listened on, or None if it can now: the host
    does not resolve, or a plain socket can bind none of its addresses (the OS's reason for
    the first; gRPC too listens on those it can). gRPC only says that it failed, and logs its
    own line about it first."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        found = socket.getaddrinfo(host or None, int(port), type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError, ValueError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        return f"the host {host!r} does not resolve ({reason})"
    first: OSError | None = None
    for family, kind, proto, _, where in found:
        try:
            with socket.socket(family, kind, proto) as probe:
                # as gRPC's listeners: a port in TIME_WAIT is free, one listened on is not
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(where)
            return None
        except OSError as error:
            first = first or error
    if first is None:
        return f"the host {host!r} has no address"
    hint = _BIND_HINTS.get(first.errno or 0)
    reason = first.strerror or str(first)
    return f"{hint} ({reason})" if hint else reason


def host_port(host: str, port: int) -> str:
    """HOST:PORT of a listener given as a host and a port (``[::1]:PORT`` for IPv6)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def check_listeners(listeners: Iterable[tuple[str, str | None]]) -> None:
    """ConfigError naming the option for the first (option, HOST:PORT) that cannot be bound now
    (``unbindable``; None: the listener is off), so a service refuses it before it writes
    anything or starts a loop."""
    for option, address in listeners:
        if address is None:
            continue
        problem = unbindable(address)
        if problem is not None:
            raise ConfigError(f"{option}: cannot listen on {address}: {problem}")


def check_start(tls: TlsFiles | None, ready_file: str | os.PathLike[str] | None,
                listeners: Iterable[tuple[str, str | None]]) -> None:
    """What every service (coordinator, selector, aggregator, combiner) and the device process
    refuse before they write anything, bind a port or start a loop, each refusal a ConfigError
    naming the option: its TLS key and certificate (:func:`check_tls_files`), a
    ``--ready-file`` it could not write once serving (``fedhh.output_paths.check_output``), and
    each (option, HOST:PORT) of ``listeners`` it cannot bind now (:func:`check_listeners`).
    (Before, the selector and the combiner checked none of them: a ready file in a missing
    folder failed once they served, "No such file or directory: x.ready.tmp"; the device
    process, its ready file once every device had enrolled.)"""
    if tls is not None:
        check_tls_files(tls)
    check_output("--ready-file", None if ready_file is None else os.fspath(ready_file))
    check_listeners(listeners)


def metrics_listener(args: Any) -> tuple[str, str | None]:
    """A service's ("--metrics-port", HOST:PORT) for :func:`check_start` (None: off)."""
    return ("--metrics-port", None if args.metrics_port is None
            else host_port(args.metrics_host, args.metrics_port))


def bind(server: grpc.aio.Server, address: str, tls: TlsFiles | None, insecure: bool) -> int:
    """Bind ``address`` with TLS, or in plaintext only when asked for and on loopback.

    Returns the bound port (the OS's choice for port 0). Checked first, each with its own
    message: the TLS key and certificate (``check_tls_files``), then the address
    (``unbindable``); gRPC itself raises a RuntimeError that says neither which nor why
    (older versions returned port 0).
    """
    if tls is not None:
        check_tls_files(tls)
        credentials = tls.server_credentials()
    else:
        check_plaintext_listener(address, insecure)
    problem = unbindable(address)
    if problem is None:
        try:
            if tls is not None:
                port = server.add_secure_port(address, credentials)
            else:
                port = server.add_insecure_port(address)
        except RuntimeError:
            port = 0
        if port == 0:  # (taken between the check and the bind, or refused by gRPC alone)
            problem = "the port may be in use, or the host not an address of this machine"
    if problem is not None:
        raise ConfigError(f"cannot bind {address}: {problem}")
    return port


def add_health_and_reflection(server: grpc.aio.Server, services: Iterable[str]) -> Health:
    """Register gRPC health checking (``set_serving`` reports every service SERVING) and
    reflection, each bounded (``fedhh.rpc.health``: grpcio's own held any number of watches
    and reflection streams of callers with no credential, for ever)."""
    names = list(services)
    servicer = Health(names)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(Reflection(names), server)
    return servicer


async def set_serving(servicer: Health, services: Iterable[str]) -> None:
    for name in ["", *services]:
        await servicer.set(name, health_pb2.HealthCheckResponse.SERVING)


def stop_event() -> asyncio.Event:
    """An event the first SIGTERM or SIGINT sets: how every service process and the device
    process learn to stop (before, the device process installed the same handlers itself)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def wait_for_signal(server: grpc.aio.Server, grace: float = 5.0) -> None:
    """Serve until SIGTERM or SIGINT (:func:`stop_event`), then stop gracefully (in-flight
    calls get ``grace`` s)."""
    stop = stop_event()
    task_census.install(asyncio.get_running_loop())
    await stop.wait()
    log.info("shutting down")
    await server.stop(grace)
