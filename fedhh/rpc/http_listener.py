"""The listening socket of an aiohttp server that runs inside a gRPC service's process (the
coordinator's dashboard, the Connect port of the coordinator and the aggregator:
``fedhh.rpc.connect``), accepted here rather than by aiohttp's site, so that it can never take
the service's open files (issue 28). The aggregator's framed session port
(``fedhh.rpc.framed.server``) is accepted here too: its preface stands for the request head.

Every connection such a server holds is a file the gRPC server cannot open. With aiohttp's own
site, a connection that never finished its request head was kept for the keep-alive timeout
(75 s), and however many came: with the open-file limit at 1,024 (a common container default),
998 half-sent heads filled the dashboard's table and new gRPC connections timed out for 28 s
and more. Here

- at most ``max_connections`` are held (TLS handshakes under way included); one over is closed
  as soon as it is accepted, before a byte of it is read, so its file is back at once;
- a TLS handshake must end within ``head_timeout_s``, and then the first request head must
  arrive within as long again (a connection that has not sent one is aborted); later heads are
  bounded by the keep-alive timeout the application runner gets (the same figure);
- with ``fair`` (the aiohttp servers: the Connect ports, the dashboard; and the framed ports,
  whose connection is idle while it has no stream open), a connection that arrives when all
  are held takes the place of an idle one of the address that holds the most, when that
  address holds more than the newcomer's: one client that opened every connection
  (520 keep-alive connections from one address, a request on each every 7 s) kept every web
  device out of the coordinator's Connect port for as long as it liked. Only a connection
  between requests is closed (as at the end of its keep-alive: its client opens another), so
  no request is cut and the cap holds;
- ``max_connections`` is at most a quarter of the process's open-file limit (``FILE_SHARE``):
  a coordinator serves three such listeners (dashboard, Connect, framed) beside gRPC, its
  store and its logs. With the framed port's default of 16,384 under a limit of 1,024, 1,100
  connections that sent only the preface took every file, and the aggregator's own gRPC port
  could no longer accept. A port's default is held to the share without a word (it is what
  the port holds under that limit); a figure the operator asked for above it holds the share
  and is warned about once (``connection_cap``).

Such a server logs with ``fedhh.rpc.request_log.RequestLog``. This module does not import
aiohttp: the framed port's services (a worker, a selector) start without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import resource
import select
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from fedhh.errors import ConfigError

log = logging.getLogger(__name__)

#: A port's own answer to a request aiohttp refused (status, exception, message), or None.
ErrorAnswer = Callable[[int, BaseException | None, str | None], Any]

# The dashboard's figure: an operator's browser holds a few connections per tab (pages, assets,
# one live stream). The Connect port passes its own.
MAX_CONNECTIONS = 64
# Enough for a TLS handshake or a request head on a slow link; far below what lets a script
# hold a connection for free.
HEAD_TIMEOUT_S = 10.0
# Once, when the head deadline finds bytes not read yet: the loop reads them well within it.
HEAD_GRACE_S = 1.0
BACKLOG = 128
# A request head, as its runner parses it (``web.AppRunner(..., **HEAD_LIMITS)``; more lines
# or a longer one is answered 400): aiohttp's default of 128 header lines of 8 KiB each let a
# head hold 1 MiB, parsed and kept while its body was awaited (10 s), so that 500 connections
# with 120 such lines to the coordinator's Connect port took it from 148 to 1,140 MiB at the
# peak (with 28 lines, 534). A browser sends about 20 lines (a proxy adds a few), a device's
# Connect call fewer; a line stays at 8 KiB (a Cookie).
class HeadLimits(TypedDict):
    max_headers: int
    max_field_size: int
    max_line_size: int


HEAD_LIMITS: HeadLimits = {"max_headers": 48, "max_field_size": 8190, "max_line_size": 8190}
# Every answer's Server header: aiohttp's default, "Python/3.11 aiohttp/3.14.5", told anyone
# who asked which versions to look up advisories for.
SERVER = "fedhh"


def _runner(app: Any, name: str, shutdown_timeout_s: float) -> tuple[Any, dict[str, Any]]:
    """The ``web.AppRunner`` of each aiohttp server here (the Connect ports, the dashboard, the
    metrics endpoint), one set of settings for all (before, each listener wrote its own, and
    the dashboard's lacked the last two):

    - no access log; errors of a client's request logged by ``RequestLog`` (warnings without
      the client's bytes) under ``name``;
    - the keep-alive (the wait for a next request head) ``HEAD_TIMEOUT_S``, heads within
      ``HEAD_LIMITS``;
    - ``handler_cancellation``: a request whose client went away ends, as a gRPC call does (a
      device's GetTask long-poll would otherwise refuse its next one until it timed out; a
      dashboard's live stream to a closed tab ran on until its next write);
    - ``lingering_time`` 0: a body left unread (a refused request) is never read afterwards;
      the connection is closed instead (aiohttp would read, and inflate, up to 10 s of it,
      holding one of the listener's few connections). No handler here leaves a body unread
      that it needs: each reads what it takes before it answers;
    - ``auto_decompress`` off: a body is read as sent, never inflated. No port here takes a
      compressed body (a Connect port refuses any Content-Encoding but identity, 501
      unimplemented; browsers send forms plain), and aiohttp's parser, which inflated before
      any handler looked, refused an encoding it had no library for (br, zstd) itself: a
      Connect caller got 400 invalid_argument telling it to install the server's Brotli.

    Returns the runner and those settings: ``_Protocols`` makes each connection's protocol with
    them."""
    from aiohttp import web  # (this module does not import aiohttp: module docstring)

    from fedhh.rpc.request_log import RequestLog

    settings: dict[str, Any] = {"access_log": None, "keepalive_timeout": HEAD_TIMEOUT_S,
                                "lingering_time": 0, "logger": RequestLog(name),
                                "auto_decompress": False, **HEAD_LIMITS}
    runner = web.AppRunner(app, shutdown_timeout=shutdown_timeout_s,
                           handler_cancellation=True, **settings)
    return runner, settings


class _Protocols:
    """Makes a connection's protocol for the aiohttp ``server``: aiohttp's, whose own answers
    (a request that does not parse: a bad chunk size, Content-Length beside Transfer-Encoding,
    a repeated Content-Length; a handler's uncaught error) carry ``headers`` as the port's
    other answers do. Before, such a 400 was sent before any handler or middleware ran, and
    aiohttp runs no ``on_response_prepare`` for it (aio-libs/aiohttp#3287, #6463, open), so it
    had neither nosniff nor no-store. aiohttp's one hook for those answers is
    ``RequestHandler.handle_error``, overridden here.

    A body whose framing breaks while its handler reads it (a bad chunk size after a good
    chunk) is ended with the parser's error, which the handler's read then raises. aiohttp's
    compiled parser queued the error as a next request and left the body waiting: the handler
    read on until its body timeout (10 s on a Connect port, then 504 deadline_exceeded); its
    pure-Python parser (AIOHTTP_NO_EXTENSIONS) sets the error on the body itself.

    ``error_answer`` (status, aiohttp's exception, its message) may put the port's own answer
    in place of aiohttp's (None keeps aiohttp's): a Connect port answers in Connect's error
    shape, which its clients read; aiohttp's plain text is read by its status alone."""

    def __init__(self, server: Any, settings: Mapping[str, Any],
                 headers: Mapping[str, str], error_answer: ErrorAnswer | None = None) -> None:
        from aiohttp import web
        from aiohttp.http_exceptions import HttpProcessingError

        class Answering(web.RequestHandler):
            _fedhh_last_body: Any = None  # (data_received)

            def handle_error(self, request: Any, status: int = 500,
                             exc: BaseException | None = None,
                             message: str | None = None) -> Any:
                response = super().handle_error(request, status, exc, message)
                if error_answer is not None and (
                        own := error_answer(status, exc, message)) is not None:
                    own.force_close()  # (aiohttp's answer closes: the stream is not in step)
                    response = own
                response.headers.update(headers)
                return response

            def data_received(self, data: bytes) -> None:
                queued = len(self._messages)
                super().data_received(data)
                # The body broken bytes land on is the last request's the parser queued, which
                # may have left the queue for a handler not yet running (Python 3.11 schedules
                # it a loop iteration later): neither the queue nor _current_request names it.
                for message, body in itertools.islice(self._messages, queued, None):
                    error = getattr(message, "exc", None)
                    if not isinstance(error, HttpProcessingError):
                        self._fedhh_last_body = body
                        continue
                    last = self._fedhh_last_body
                    if last is not None and not last.is_eof() and last.exception() is None:
                        last.set_exception(error)
                    return

            def connection_lost(self, exc: BaseException | None) -> None:
                # (the body refers back to this protocol: kept, the two and the body's unread
                # bytes outlived the connection until the cyclic collector ran)
                self._fedhh_last_body = None
                super().connection_lost(exc)

        self.server = server
        self._make = Answering
        self._settings = dict(settings)

    @property
    def connections(self) -> list[Any]:
        return self.server.connections

    def __call__(self) -> Any:
        return self._make(self.server, loop=asyncio.get_running_loop(), **self._settings)


# A listener's connections are at most 1 / FILE_SHARE of the process's open-file limit.
FILE_SHARE = 4
# What a plaintext HTTP request on a TLS port begins with (a TLS ClientHello begins 0x16).
_HTTP_METHODS = (b"GET ", b"HEAD ", b"POST ", b"PUT ", b"DELETE ", b"OPTIONS ", b"PATCH ",
                 b"CONNECT ", b"TRACE ")
_PLAIN_PEEK = 8


def open_file_limit() -> int:
    """The process's (soft) open-file limit; a very large number when it has none."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 30 if soft == resource.RLIM_INFINITY else int(soft)


def raise_open_file_limit() -> None:
    """Raise the process's soft open-file limit to its hard limit, as a service starts (a
    device-facing port holds a file per connection; the soft limit is often 1,024 where the
    hard one is far above). Nothing changes where it cannot."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def connection_cap(asked: int | None, default: int, name: str) -> int:
    """The connections the listener ``name`` holds: ``asked``, the operator's figure (None:
    none was given, the port's ``default``), at most ``1 / FILE_SHARE`` of the open-file limit.
    Only a figure asked for above that share is warned about: a warning is for what the
    operator asked or must do (before, every aggregator start warned that its framed port held
    "not the 16384 asked for", its default, which nobody had asked for)."""
    files = open_file_limit()
    share = max(1, files // FILE_SHARE)
    if asked is None:
        return min(default, share)
    if asked > share:
        log.warning(f"the {name} holds at most {share} connections, a quarter of the "
                    f"process's open-file limit ({files}), not the {asked} asked for: raise "
                    f"the limit (ulimit -n, or the container's nofile) to hold more",
                    extra={"asked": asked, "held": share})
        return share
    return asked


def split_listen(address: str) -> tuple[str, int]:
    """(host, port) of ``HOST:PORT`` (``[::1]:PORT`` for IPv6)."""
    host, sep, port = address.rpartition(":")
    if not (sep and host and port.isascii() and port.isdigit() and int(port) <= 65535):
        raise ConfigError(f"a listen address is HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


def _peer(transport: asyncio.BaseTransport | None) -> tuple[str, int] | None:
    name = transport.get_extra_info("peername") if transport is not None else None
    return (str(name[0]), int(name[1])) if name else None


def _host(transport: asyncio.BaseTransport | None) -> str:
    peer = _peer(transport)
    return peer[0] if peer else ""


def peer_name(transport: asyncio.BaseTransport | None) -> str:
    """A connection's client as gRPC names a peer (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``)."""
    peer = _peer(transport)
    if peer is None:
        return ""
    host, port = peer
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


class Listener:
    """Accepts connections for aiohttp's ``server`` (a protocol factory) under the limits above.
    ``saw_request(request.protocol)`` marks a connection whose first head arrived
    (``serve_app``'s middleware; the framed port's own protocol). ``max_connections`` is
    the operator's figure, None where none was given (``connection_cap``). ``headers`` go on
    its own answer to plain HTTP on a TLS port (``_plain_http``)."""

    def __init__(self, server: Any, context: ssl.SSLContext | None,
                 max_connections: int | None = None,
                 head_timeout_s: float = HEAD_TIMEOUT_S, name: str = "dashboard",
                 backlog: int = BACKLOG, fair: bool = False,
                 default_connections: int = MAX_CONNECTIONS,
                 headers: Mapping[str, str] | None = None) -> None:
        self.server = server
        self.headers = dict(headers or {})
        self.fair = fair
        self.backlog = backlog
        self.name = name
        self.context = context
        self.max_connections = connection_cap(max_connections, default_connections, name)
        self.head_timeout_s = head_timeout_s
        self.refused = 0  # connections closed on arrival, over the limit
        self.evicted = 0  # idle connections closed for a newcomer (``fair``)
        self._closing: set[Any] = set()  # evicted, until their connection is gone
        self._sock: socket.socket | None = None
        self._handshaking = 0
        # Protocols made for connections still counted in ``_handshaking``: one joins the
        # server's connections (its connection_made) before its ``_serve`` resumes to count it
        # out, and is counted once (``held``).
        self._made: set[Any] = set()
        self._answered: set[Any] = set()  # of those, the ones whose first head came
        self._pending_heads: set[Any] = set()  # connections waiting for their head deadline
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def held(self) -> int:
        """Connections held now: in their TLS handshake, or handed to aiohttp. (Before, one
        that had joined the server's connections was counted twice until its ``_serve`` went on,
        so that a connection arriving then was refused with a place free: two at once of a cap
        of three.)"""
        connections = self.server.connections
        joined = len(self._made.intersection(connections)) if self._made else 0
        return self._handshaking + len(connections) - joined

    def bind(self, host: str, port: int) -> int:
        """Listen on host:port (0: OS-chosen); the bound port."""
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
            sock = socket.socket(family, kind, proto)
        except OSError as error:
            raise ConfigError(f"the {self.name} cannot listen on {host}:{port}: "
                              f"{error.strerror}") from None
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(self.backlog)
            sock.setblocking(False)
        except OSError as error:
            sock.close()
            raise ConfigError(f"the {self.name} cannot listen on {host}:{port}: "
                              f"{error.strerror}") from None
        self._sock = sock
        return int(sock.getsockname()[1])

    def start(self) -> None:
        if self._sock is None:
            raise ConfigError(f"bind the {self.name}'s socket before starting it")
        self._spawn(self._accept(self._sock))

    def saw_request(self, protocol: Any) -> None:
        if protocol in self._pending_heads:
            self._answered.add(protocol)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as error:  # EMFILE and the like: the table is full, wait a little
                log.warning(f"the {self.name} could not accept a connection",
                            extra={"error": error.strerror})
                await asyncio.sleep(0.1)
                continue
            if self.held >= self.max_connections and not (self.fair and self._room_for(conn)):
                conn.close()
                self.refused += 1
                continue
            self._handshaking += 1
            self._spawn(self._serve(conn))

    def _room_for(self, conn: socket.socket) -> bool:
        try:
            return self._make_room(conn)
        except Exception:  # a bug here must not end the accept loop: refuse the newcomer
            log.exception(f"the {self.name} could not make room for a connection")
            return False

    def _make_room(self, conn: socket.socket) -> bool:
        """Close an idle connection of the address that holds the most, if it holds more than
        ``conn``'s (module docstring); whether one was closed."""
        try:
            newcomer = str(conn.getpeername()[0])
        except OSError:  # gone already
            return False
        present = set(self.server.connections)
        self._closing &= present
        by_host: dict[str, list[Any]] = {}
        for handler in present - self._closing:
            by_host.setdefault(_host(handler.transport), []).append(handler)
        if not by_host:
            return False
        top = max(by_host, key=lambda host: len(by_host[host]))
        if len(by_host[top]) <= len(by_host.get(newcomer, ())) + 1:
            return False
        # (aiohttp keeps no public word of whether a request is in progress)
        idle = next((h for h in by_host[top] if not getattr(h, "_request_in_progress", True)),
                    None)
        if idle is None:
            return False
        self._closing.add(idle)
        idle.force_close()  # (no request in progress: nothing of one is cut)
        self.evicted += 1
        return True

    async def _serve(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        made: list[Any] = []

        def protocol_factory() -> Any:
            protocol = self.server()
            made.append(protocol)
            self._made.add(protocol)
            self._pending_heads.add(protocol)  # before any byte of a request can be read
            return protocol

        handshake_s = self.head_timeout_s
        if self.context is not None:
            started = loop.time()
            try:
                plain = await self._plain_http(conn)
            except Exception:  # a bug or a reset here must not leak the socket
                plain = True
            if plain:
                conn.close()
                self._handshaking -= 1
                return
            handshake_s = max(0.1, self.head_timeout_s - (loop.time() - started))
        try:
            transport, protocol = await loop.connect_accepted_socket(
                protocol_factory, conn, ssl=self.context,
                ssl_handshake_timeout=handshake_s if self.context else None)
        except OSError:  # SSLError and TimeoutError are OSErrors
            # The transport closed the socket (a failed or slow handshake).
            for protocol in made:
                self._pending_heads.discard(protocol)
                self._answered.discard(protocol)
            return
        finally:
            self._handshaking -= 1
            self._made.difference_update(made)
        # (the protocol the factory made: with TLS, uvloop returns its SSL wrapper instead, so
        # a connection that had sent its head was cut at the deadline all the same)
        loop.call_later(self.head_timeout_s, self._head_deadline, transport,
                        made[0] if made else protocol)

    async def _plain_http(self, conn: socket.socket) -> bool:
        """On a TLS port, whether ``conn`` began with a plaintext HTTP request (answered here
        with a 400 that names the https:// URL) or sent nothing within ``head_timeout_s``;
        a TLS client (first byte 0x16) and anything else go on to the handshake. Peeks at
        most ``len(_PLAIN_PEEK)`` bytes and sends one short reply: nothing is kept."""
        loop = asyncio.get_running_loop()
        readable = loop.create_future()
        def ready() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(conn.fileno(), ready)
        try:
            await asyncio.wait_for(readable, self.head_timeout_s)
        except TimeoutError:
            return True
        finally:
            loop.remove_reader(conn.fileno())
        try:
            first = conn.recv(_PLAIN_PEEK, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return False  # let the handshake read it
        if not first.startswith(_HTTP_METHODS):
            return False
        host, port = conn.getsockname()[:2]  # (ours, not the client's Host header)
        body = plain_http_answer(str(host), port).encode()
        extra = "".join(f"{key}: {value}\r\n" for key, value in self.headers.items())
        reply = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
                 + extra.encode() + b"Connection: close\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
        with contextlib.suppress(OSError):  # one send into an empty buffer; never waits
            conn.send(reply)
            conn.shutdown(socket.SHUT_WR)
        return True

    def _head_deadline(self, transport: asyncio.BaseTransport, protocol: Any,
                       extended: bool = False) -> None:
        """Abort the connection unless its first head came. A head already parsed whose
        request has not reached the middleware yet counts (aiohttp's queue, or its request
        under way), and so do bytes the loop has not read yet, once, for ``HEAD_GRACE_S``:
        on a loaded machine the deadline fell due in the same loop iteration as the head's
        bytes, and the request was cut after its client had sent it in time (Chromium keeps a
        preconnected socket unused for up to 10 s, the deadline's length: most likely why a
        CI run's dashboard download failed with 'Failed to fetch')."""
        if protocol in self._answered or _head_parsed(protocol):
            self._answered.discard(protocol)
            self._pending_heads.discard(protocol)
            return
        if transport.is_closing():
            self._pending_heads.discard(protocol)
            return
        if not extended and _unread(transport):
            asyncio.get_running_loop().call_later(HEAD_GRACE_S, self._head_deadline, transport,
                                                  protocol, True)
            return
        self._pending_heads.discard(protocol)
        with contextlib.suppress(Exception):
            transport.abort()  # type: ignore[attr-defined]


def _head_parsed(protocol: Any) -> bool:
    """Whether aiohttp has parsed a request head on ``protocol`` (aiohttp keeps no public word
    of it: its queue of parsed requests, and its flag for one under way)."""
    return bool(getattr(protocol, "_messages", None)) or \
        bool(getattr(protocol, "_request_in_progress", False))


def _unread(transport: asyncio.BaseTransport) -> bool:
    """Whether the connection's socket holds bytes the loop has not read yet (uvloop runs the
    due timers of an iteration before it reads the sockets that became readable). Asked of
    poll, not select: select refuses a descriptor from 1,024 up (ValueError), and a service
    holds more files than that (``raise_open_file_limit``), so the grace was lost there."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    fd = sock.fileno()
    if fd < 0:  # closed meanwhile
        return False
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return any(events & select.POLLIN for _, events in poller.poll(0))


def plain_http_answer(host: str, port: int) -> str:
    """The 400's text for a plaintext request that reached ``host:port``, the listener's own
    side of the connection (never the client's Host header). Only a loopback address is the
    one the client opened: elsewhere a container's (compose publishes 127.0.0.1:7443 to
    172.18.0.3:7443, a name no certificate holds), a NAT's or a proxy's may stand between, and
    the URL named was one the browser could not use, so it says to change the scheme alone."""
    import ipaddress

    try:
        loopback = ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        return (f"this port ({port}) speaks HTTPS, not plain HTTP: open the same address with "
                "https:// instead of http://\n")
    where = f"[{host}]" if ":" in host else host
    return f"this port ({port}) speaks HTTPS, not plain HTTP: use https://{where}:{port}/\n"


@dataclass(frozen=True)
class Served:
    """An aiohttp runner served behind its listener, on ``port``."""

    listener: Listener
    runner: Any
    port: int

    async def close(self) -> None:
        """Stop accepting, then close the connections and the application."""
        await self.listener.close()
        await self.runner.cleanup()


async def serve_app(app: Any, name: str, context: ssl.SSLContext | None, host: str,
                    port: int, headers: Mapping[str, str], max_connections: int | None = None,
                    default_connections: int = MAX_CONNECTIONS,
                    shutdown_timeout_s: float = 2.0,
                    error_answer: ErrorAnswer | None = None) -> Served:
    """Serve the aiohttp application ``app`` on host:port (0: OS-chosen) behind a fair
    :class:`Listener`, which the application tells of each request head (its first
    middleware), with the runner's settings (``_runner``). ``headers``: those every answer of
    the port carries whatever it answers (where its handler set none of its own), set also on
    aiohttp's own answers (``_Protocols``) and on the listener's to plain HTTP on a TLS port;
    with them ``Server: fedhh`` (``SERVER``), never aiohttp's version banner.
    ``error_answer``: the port's own answer in place of aiohttp's to a request it refused
    itself (``_Protocols``). A port that cannot be bound leaves nothing set up."""
    from aiohttp import web  # (the aiohttp servers alone come here)

    headers = {**headers, "Server": SERVER}

    @web.middleware
    async def head_seen(request: Any, handler: Any) -> Any:
        listener.saw_request(request.protocol)
        return await handler(request)

    async def carry_headers(request: Any, response: Any) -> None:
        # A handler's own value of a header wins, but aiohttp has set Server by now.
        for key, value in headers.items():
            response.headers.setdefault(key, value)
        response.headers["Server"] = SERVER

    app.middlewares.insert(0, head_seen)
    app.on_response_prepare.append(carry_headers)
    runner, settings = _runner(app, name, shutdown_timeout_s)
    await runner.setup()
    listener = Listener(_Protocols(runner.server, settings, headers, error_answer), context,
                        max_connections, name=name, fair=True,
                        default_connections=default_connections, headers=headers)
    try:
        bound = listener.bind(host, port)
    except ConfigError:
        await runner.cleanup()
        raise
    listener.start()
    return Served(listener, runner, bound)
