"""The Connect protocol's unary calls (https://connectrpc.com/docs/protocol) in front of a
service's own gRPC servicers, so that a browser, which cannot speak gRPC, reaches the same
methods with the same TLS, credentials and limits.

A call is ``POST /<package>.<Service>/<Method>`` with ``Content-Type: application/proto`` and
the request message as the body; the answer is HTTP 200 with the response message, or an
error status with ``{"code": ..., "message": ...}`` as JSON. Each call is handed to the
servicer method gRPC calls (``fedhh.rpc.procedures``), with a ``CallContext`` in place of
gRPC's context: its metadata are the request's headers, its deadline the
``Connect-Timeout-Ms`` header, its peer the client's address as gRPC writes it (so
per-address limits count both ports together), and its ``abort`` ends the call with the
Connect code of the gRPC status (``fedhh.rpc.errors.status_errors`` chose that status, as for
gRPC).

Checks run in gRPC's order, and each before anything costs more than it: the route, the
method, CORS, the content type and encoding, the timeout, then the credentials
(``fedhh.rpc.serving.credential_check_for``, the checks gRPC's ``CredentialGate`` runs), all
before a byte of the body is read (and, for a request that sends ``Expect: 100-continue``,
before it is told to send it); then the declared length against the service's receive cap
(larger: refused unread), the body, read within ``body_timeout_s`` (by default
``request_waits.REQUEST_TIMEOUT_S``, a unary request's deadline on every port), cut off past
the cap, and if large read only a few at a time (``large_bodies``), a method with a
``head_check`` (the masked vector, whose signed header is its first field) giving a turn only
to a caller its first bytes show admitted, one at a time, and the parse
(``invalid_argument``, as ``ParseErrors`` answers).
Client-streaming and server-streaming methods are not served (a browser uploads a masked
vector with the unary ``SubmitMaskedVector``). A refused call whose body has not all arrived
ends its connection: what is left of the body is never read.

The port is an aiohttp server in the service's event loop behind
``fedhh.rpc.http_listener.Listener``: at most ``max_connections`` held, a TLS handshake and
the first request head each within ``http_listener.HEAD_TIMEOUT_S``. It serves TLS from the
service's files, or plaintext on loopback only, like gRPC (``fedhh.rpc.serving.bind``).
Requests from a browser page are answered only for the configured origins (CORS preflight and
the call itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import Hashable, Mapping, Sequence

import grpc
from aiohttp import HttpVersion11, web
from aiohttp.http_exceptions import HttpProcessingError

from fedhh.errors import ConfigError, FedhhError
from fedhh.rpc.connect_wire import CODES, CONTENT_TYPE, PROTOCOL_VERSION
from fedhh.rpc.errors import bounded_details, details_of, status_of
from fedhh.rpc.http_listener import Served, peer_name, serve_app
from fedhh.rpc.procedures import CallAbort, CallContext, HeadCheck, Procedure
from fedhh.rpc.request_waits import REQUEST_TIMEOUT_S
from fedhh.rpc.serving import (
    check_receive_cap,
    credential_refusal,
    does_not_parse,
    listener_context,
    too_large,
)
from fedhh.rpc.tls import TlsFiles

log = logging.getLogger(__name__)
# At most one warning of calls refused for their origin in this many seconds (_refused_origin).
ORIGIN_WARNING_INTERVAL_S = 60.0

# The request headers a page may send (CORS preflight), and how long a browser may keep that.
ALLOWED_HEADERS = "Authorization, Connect-Protocol-Version, Connect-Timeout-Ms, Content-Type"
PREFLIGHT_MAX_AGE_S = 7200
# Devices hold a long-poll each (GetTask, AwaitStage), so a port holds one connection per
# device at a time that it serves; the operator sizes this against the open-file limit.
MAX_CONNECTIONS = 512
# Bodies above this many bytes are read a few at a time (``large_bodies``): the check-ins and
# the stage messages of a device are below it; masked vectors and oversized junk are not.
SMALL_BODY_BYTES = 64 * 1024
LARGE_BODIES = 32
# How much of a large body a head check may need to know its caller (a masked vector's header
# is at most 8 KiB: fedhh_aggregator.servicers.MAX_HEADER_BYTES).
MAX_HEAD_BYTES = 16 * 1024
_ORIGIN = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?|https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?",
                     re.IGNORECASE)

_DEFAULT_PORTS = {"http": 80, "https": 443}
# A call's head once checked: its procedure, timeout and metadata (``_checked_head``).
_Checked = tuple[Procedure, float | None, tuple[tuple[str, str], ...]]
# Where a request keeps its head's checks when its Expect ran them (``_expect``).
_CHECKED: web.RequestKey[_Checked] = web.RequestKey("fedhh.connect.checked")


def check_origins(origins: Sequence[str]) -> tuple[str, ...]:
    """Origins as a browser sends them (``https://host[:port]``), checked, and written as a
    browser writes its ``Origin``: scheme and host in lower case, no default port, no leading
    zeros. Origins are compared exactly, so before, ``https://App.example`` or
    ``https://app.example:443`` was accepted and then every call of the page was refused 403."""
    out = []
    for origin in origins:
        if not _ORIGIN.fullmatch(origin):
            raise ConfigError(f"a web origin is scheme://host[:port] with no path, got "
                              f"{origin!r}{_ascii_form(origin)}")
        scheme, _, rest = origin.partition("://")
        host, port = rest, ""
        if rest.startswith("["):
            host, _, after = rest.partition("]")
            host += "]"
            port = after[1:]
        elif ":" in rest:
            host, _, port = rest.partition(":")
        scheme, host = scheme.lower(), host.lower()
        if port and not 1 <= int(port) <= 65535:
            # (port 0 is no port a page is served from: no browser sends it)
            raise ConfigError(f"a web origin's port is 1 to 65535, got {origin!r}")
        keep = bool(port) and int(port) != _DEFAULT_PORTS[scheme]
        out.append(f"{scheme}://{host}" + (f":{int(port)}" if keep else ""))
    return tuple(out)


def _ascii_form(origin: str) -> str:
    """Where ``origin``'s host is an internationalised name (``https://пример.рф``), the form a
    browser sends it in, its ASCII (punycode) name; else "". Before, only the shape was told,
    "with no path", of an origin that has none."""
    scheme, sep, rest = origin.partition("://")
    if not sep or rest.isascii():
        return ""
    host, colon, port = rest.partition(":")
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        return ""
    written = f"{scheme}://{ascii_host}{colon}{port}"
    if not _ORIGIN.fullmatch(written):
        return ""
    return f" (a browser sends an internationalised host in its ASCII form: {written!r})"


def peer_of(request: web.BaseRequest) -> str:
    """The client's address as gRPC names a peer (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``)."""
    return peer_name(request.transport)


class ConnectError(Exception):
    """A call refused by the port itself, before the servicer ran."""

    def __init__(self, code: grpc.StatusCode, message: str, http_status: int | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = http_status
        self.headers = dict(headers or {})


def _too_large(cap: int) -> ConnectError:
    # (Made where it is raised: an exception held in a local of a frame its traceback holds is
    # a reference cycle, which the services' collector settings keep for long, per refusal.)
    return ConnectError(grpc.StatusCode.RESOURCE_EXHAUSTED, too_large(cap))


def _timeout_s(header: str | None) -> float | None:
    """The call's timeout: the protocol's grammar is a positive integer of at most 10 digits,
    so 0 (or 000) is refused as malformed, before anything of the call runs. Before, 0 was
    taken as a deadline already passed, which ended the call at its first wait: a call that
    waited for nothing was answered, another one was deadline_exceeded."""
    if header is None:
        return None
    if not (header.isascii() and header.isdigit() and 1 <= len(header) <= 10):
        raise ConnectError(grpc.StatusCode.INVALID_ARGUMENT,
                           "Connect-Timeout-Ms must be 1 to 10 digits")
    if int(header) == 0:
        raise ConnectError(grpc.StatusCode.INVALID_ARGUMENT,
                           "Connect-Timeout-Ms must be a positive number of milliseconds, got 0")
    return int(header) / 1000


class ConnectServer:
    """The Connect port of a service: ``await start(host, port)``, ``await close()``."""

    def __init__(self, name: str, served: Sequence[Procedure], max_request_bytes: int,
                 tls: TlsFiles | None, origins: Sequence[str] = (),
                 max_connections: int | None = None,
                 body_timeout_s: float = REQUEST_TIMEOUT_S,
                 large_bodies: int = LARGE_BODIES) -> None:
        check_receive_cap("max_request_bytes", max_request_bytes)
        if max_connections is not None and not 1 <= max_connections <= 1 << 20:
            raise ConfigError(f"max_connections must be in [1, {1 << 20}], got "
                              f"{max_connections}")
        self.name = name
        self.procedures = {p.path: p for p in served}
        self.max_request_bytes = max_request_bytes
        self.tls = tls
        self.origins = frozenset(check_origins(origins))
        self.max_connections = max_connections
        self.body_timeout_s = body_timeout_s
        self._large_bodies = asyncio.Semaphore(large_bodies)
        # Where a method's large bodies are read only for callers its head check knows (the
        # masked vector), those of methods without one hold at most a quarter of the turns:
        # nothing of their callers is known before they are read, and 32 outsiders trickling
        # chunked AwaitStage bodies held every turn (before, up to the body timeout, 266 s at
        # the aggregator's defaults), so admitted devices' vectors waited past their stage.
        self._unchecked_bodies = (asyncio.Semaphore(max(1, large_bodies // 4))
                                  if any(p.head_check for p in served) else None)
        self._large_callers: set[Hashable] = set()  # (whose large bodies are being read)
        # Calls refused for their origin since the last warning of them, and when it was
        # (_refused_origin).
        self.clock = time.monotonic
        self._origins_refused = 0
        self._origin_warned_at: float | None = None
        self.port = 0
        self._served: Served | None = None
        self.app = web.Application(client_max_size=max_request_bytes)
        self.app.router.add_route("*", "/{path:.*}", self._serve, expect_handler=self._expect)

    async def start(self, host: str, port: int, insecure: bool = False) -> int:
        """Serve on host:port (0: OS-chosen) with the TLS files, or in plaintext on loopback
        when ``insecure``; returns the bound port."""
        context = listener_context(self.tls, f"{host}:{port}", insecure, f"the {self.name}")
        self._served = await serve_app(self.app, self.name, context, host, port,
                                       self._security_headers(), self.max_connections,
                                       default_connections=MAX_CONNECTIONS,
                                       error_answer=self._refused_by_aiohttp)
        self.port = self._served.port
        return self.port

    async def close(self) -> None:
        if self._served is not None:
            await self._served.close()
            self._served = None

    # ---- one request -----------------------------------------------------------------------
    async def _serve(self, request: web.Request) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        try:
            if request.method == "OPTIONS":
                response = self._preflight(request, origin)
            else:
                response = await self._call(request, origin)
        except ConnectError as error:
            response = self._error(error.code, error.message, error.http_status, error.headers)
        except CallAbort as abort:
            response = self._error(abort.code, bounded_details(abort.details))
        except TimeoutError:
            response = self._error(grpc.StatusCode.DEADLINE_EXCEEDED,
                                   "the call's Connect-Timeout-Ms passed")
        except (HttpProcessingError, web.RequestPayloadError) as error:  # the sender's fault
            # (the framing of the body broke as it was read: the compiled parser raises the
            # first, the pure-Python one either; the second's text is the first's, "400,
            # message: <reason>")
            said = error.message if isinstance(error, HttpProcessingError) else str(error)
            reason = does_not_parse("its HTTP body is malformed: "
                                    + said.removeprefix("400, message:").strip())
            log.info("Connect call refused", extra={"path": request.path[:200],
                                                    "peer": peer_of(request), "why": reason})
            response = self._error(grpc.StatusCode.INVALID_ARGUMENT, reason)
        except Exception:  # a bug: a generic answer, the traceback in the log
            log.exception("Connect call failed", extra={"path": request.path[:200]})
            response = self._error(grpc.StatusCode.INTERNAL, "internal error")
        if not request.content.is_eof():
            response.force_close()  # the body is not read: the connection ends with this answer
        self._secure(response, origin)
        return response

    async def _call(self, request: web.Request, origin: str | None) -> web.Response:
        procedure, timeout_s, metadata = (request.get(_CHECKED)
                                          or self._checked_head(request, origin))
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        async with asyncio.timeout_at(deadline):
            body = await self._body(request, procedure.head_check)
            try:
                message = procedure.request_type.FromString(body)
            except Exception as error:  # protobuf's DecodeError, or anything a parser raises
                raise ConnectError(grpc.StatusCode.INVALID_ARGUMENT,
                                   does_not_parse(error)) from None
            del body
            context = CallContext(metadata, peer_of(request), deadline)
            answer = await procedure.handler(message, context)
        return web.Response(body=answer.SerializeToString(), content_type=CONTENT_TYPE)

    def _checked_head(self, request: web.Request, origin: str | None) -> _Checked:
        """The call's procedure, timeout and metadata once its head passed every check that
        comes before the body (a ConnectError for the first that fails)."""
        procedure = self.procedures.get(request.path)
        if procedure is None:
            raise ConnectError(grpc.StatusCode.UNIMPLEMENTED,
                               "no such method on this port", http_status=404)
        if request.method != "POST":
            raise ConnectError(grpc.StatusCode.UNIMPLEMENTED, "Connect calls are POSTs",
                               http_status=405, headers={"Allow": "POST"})
        if origin is not None and origin not in self.origins:
            self._refused_origin(origin)
            raise ConnectError(grpc.StatusCode.PERMISSION_DENIED,
                               "this origin may not call the service")
        media = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        if media != CONTENT_TYPE:
            raise ConnectError(grpc.StatusCode.UNIMPLEMENTED,
                               f"the body must be {CONTENT_TYPE} (binary protobuf)",
                               http_status=415, headers={"Accept-Post": CONTENT_TYPE})
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding != "identity":
            raise ConnectError(grpc.StatusCode.UNIMPLEMENTED,
                               "compressed requests are not accepted (identity only)")
        version = request.headers.get("Connect-Protocol-Version")
        if version is not None and version != PROTOCOL_VERSION:
            raise ConnectError(grpc.StatusCode.INVALID_ARGUMENT,
                               f"Connect-Protocol-Version must be {PROTOCOL_VERSION}")
        timeout_s = _timeout_s(request.headers.get("Connect-Timeout-Ms"))
        metadata = tuple((k.lower(), v) for k, v in request.headers.items())
        if procedure.check is not None and (
                refused := credential_refusal(procedure.check, metadata, "connect")) is not None:
            raise ConnectError(*refused)
        return procedure, timeout_s, metadata

    async def _expect(self, request: web.Request) -> web.StreamResponse | None:
        """A request's ``Expect``: ``100-continue`` is answered only once the call's head
        passed every check ``_call`` makes before the body (and its declared length the
        cap), so a refused call's body is never sent; its refusal is the answer, the
        connection closed after it. Any other expectation is 417 in the protocol's shape.
        Before, aiohttp's handler sent 100 Continue to any call, refused ones too (the body
        then came for nothing), and answered other expectations in plain text, which a
        Connect client reads from its status alone. (HTTP/1.0 has no Expect: ignored.)"""
        if request.version != HttpVersion11:
            return None
        origin = request.headers.get("Origin")
        expect = request.headers.get("Expect", "")
        try:
            if expect.strip().lower() != "100-continue":
                raise ConnectError(grpc.StatusCode.INVALID_ARGUMENT, "the one expectation this "
                                   f"port meets is 100-continue, got {expect[:100]!r}",
                                   http_status=417)
            if request.method != "OPTIONS":
                request[_CHECKED] = self._checked_head(request, origin)
                if (request.content_length or 0) > self.max_request_bytes:
                    raise _too_large(self.max_request_bytes)
        except ConnectError as error:
            response = self._error(error.code, error.message, error.http_status, error.headers)
            response.force_close()
            self._secure(response, origin)
            return response
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # (the answer's own size counts from here)
        return None

    async def _body(self, request: web.Request, head_check: HeadCheck | None) -> bytes:
        """The body, at most the receive cap: a larger one is refused unread when its length
        is declared, else once the cap is passed. A body that is, or may be, over
        ``SMALL_BODY_BYTES`` is read only while fewer than ``large_bodies`` others are, so the
        port holds at most ``max_connections`` small bodies and ``large_bodies`` large ones.
        With a ``head_check``, a large body first has its caller known from its first bytes
        (:meth:`_head`), and is read only while no other of that caller's is: a caller nobody
        admitted, or one caller on many connections, cannot hold the turns that admitted
        devices' masked vectors wait for; at such a port, large bodies of methods without a
        head check hold at most a quarter of the turns. The body must arrive within
        ``body_timeout_s``, the wait for its turn included."""
        cap = self.max_request_bytes
        length = request.content_length
        if length is not None and length > cap:
            raise _too_large(cap)
        body = bytearray()
        try:
            async with asyncio.timeout(self.body_timeout_s), contextlib.AsyncExitStack() as turn:
                if length is None or length > SMALL_BODY_BYTES:
                    if head_check is not None:
                        caller = await self._head(request, head_check, body)
                        if caller in self._large_callers:
                            # (UNAVAILABLE, as the aggregator's own check of one
                            # upload per device: the retry of a timed-out upload passes
                            # once the first ends)
                            raise ConnectError(grpc.StatusCode.UNAVAILABLE, "an earlier "
                                               "upload of this caller is still being read")
                        self._large_callers.add(caller)
                        turn.callback(self._large_callers.discard, caller)
                    elif self._unchecked_bodies is not None:
                        await turn.enter_async_context(self._unchecked_bodies)
                    await turn.enter_async_context(self._large_bodies)
                while chunk := await request.content.readany():
                    body += chunk
                    if len(body) > cap:
                        raise _too_large(cap)
        except TimeoutError:
            raise ConnectError(grpc.StatusCode.DEADLINE_EXCEEDED, "the request body did not "
                               f"arrive within {self.body_timeout_s:g} s") from None
        return bytes(body)

    async def _head(self, request: web.Request, check: HeadCheck, body: bytearray) -> Hashable:
        """The caller ``check`` finds in the body's first bytes (read into ``body``, at most
        ``MAX_HEAD_BYTES`` or so beyond what one read returns); a ConnectError with the check's
        status if it refuses, or if the bytes run out before it can tell."""
        while True:
            try:
                caller = check(bytes(body))
            except FedhhError as error:
                raise ConnectError(status_of(error), details_of(error)) from None
            if caller is not None:
                return caller
            if len(body) >= MAX_HEAD_BYTES:
                raise ConnectError(grpc.StatusCode.INVALID_ARGUMENT, f"the caller is not known "
                                   f"from the request's first {MAX_HEAD_BYTES} bytes")
            chunk = await request.content.readany()
            if not chunk:
                raise ConnectError(grpc.StatusCode.INVALID_ARGUMENT,
                                   "the request ends before its caller is known")
            body += chunk

    def _preflight(self, request: web.Request, origin: str | None) -> web.Response:
        """A CORS preflight's answer: 204 with what a page may send, or a refusal naming what
        is refused. Before, a preflight of an allowed origin for another method than POST, or
        for a path the port does not serve, was refused 403 'this origin may not call the
        service', which sent its reader to --web-origin."""
        asked = request.headers.get("Access-Control-Request-Method")
        # (no Access-Control-Allow-Origin on a refusal of its origin: _secure adds it for the
        # configured origins only)
        if origin is None:
            return web.Response(status=403, text="a CORS preflight names its Origin; this "
                                "OPTIONS request has none (Connect calls are POSTs)")
        if origin not in self.origins:
            self._refused_origin(origin)
            return web.Response(status=403, text="this origin may not call the service")
        # (the call's own refusals, as _call answers them; a browser shows neither status nor
        # text to the page, only its console does, but an operator's curl reads them)
        if request.path not in self.procedures:
            return web.Response(status=404, text="no such method on this port")
        if asked != "POST":
            return web.Response(status=405, headers={"Allow": "POST"}, text=(
                "Connect calls are POSTs, the preflight asked for "
                + ("no method" if asked is None else repr(asked[:100]))))
        return web.Response(status=204, headers={
            "Access-Control-Allow-Methods": "POST",
            "Access-Control-Allow-Headers": ALLOWED_HEADERS,
            "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE_S)})

    def _refused_origin(self, origin: str) -> None:
        """Log a call (or its preflight) refused for its origin, at most once a
        ORIGIN_WARNING_INTERVAL_S with the count since the last line. A browser hides the
        refusal from its page, which sees only "Failed to fetch"; before, the operator saw
        nothing either: a page served from an origin --web-origin left out (www. or not, a
        port) enrolled no device, and no log said why. The origin is the caller's text:
        shown as repr, cut at 200 characters."""
        self._origins_refused += 1
        now = self.clock()
        if (self._origin_warned_at is not None
                and now - self._origin_warned_at < ORIGIN_WARNING_INTERVAL_S):
            return
        log.warning("the %s refused %d browser call(s) from an origin not in --web-origin "
                    "since the last such line, the latest from %s; it allows %s. If that page "
                    "is yours, add its origin as the browser writes it (scheme://host[:port])",
                    self.name, self._origins_refused, repr(origin[:200]),
                    ", ".join(sorted(self.origins)) or "no origin")
        self._origins_refused = 0
        self._origin_warned_at = now

    def _error(self, code: grpc.StatusCode, message: str, http_status: int | None = None,
               headers: Mapping[str, str] | None = None) -> web.Response:
        name, status = CODES.get(code, CODES[grpc.StatusCode.UNKNOWN])
        body = json.dumps({"code": name, "message": message})
        return web.Response(text=body, status=http_status or status,
                            content_type="application/json", headers=headers)

    def _refused_by_aiohttp(self, status: int, exc: BaseException | None,
                            message: str | None) -> web.Response | None:
        """A request aiohttp's parser refused before any handler (a bad request line, a
        Content-Length that is no number), answered 400 invalid_argument in Connect's shape.
        aiohttp's plain-text 400 is read by a Connect client from its status alone, which the
        Connect protocol maps to internal: the server's fault, for the sender's. Its other
        answers (500, a handler that failed past ours) are kept."""
        if status != 400:
            return None
        return self._error(grpc.StatusCode.INVALID_ARGUMENT,
                           does_not_parse(message or exc or "a malformed HTTP request"))

    def _security_headers(self) -> dict[str, str]:
        """What every answer of the port carries, whatever the request (aiohttp's own 400s
        included: ``http_listener.serve_app``)."""
        headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
        if self.tls is not None:
            headers["Strict-Transport-Security"] = "max-age=31536000"
        return headers

    def _secure(self, response: web.Response, origin: str | None) -> None:
        headers = response.headers
        headers.update(self._security_headers())
        if origin is not None and origin in self.origins:
            headers["Access-Control-Allow-Origin"] = origin
        headers["Vary"] = "Origin"

