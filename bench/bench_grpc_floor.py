"""What gRPC itself costs a service per device: the floor under `fedhh loadtest`'s figures.

A grpc.aio server (uvloop, as the services run) in a child process answers raw byte messages
(the session's: protobuf messages, parsed and serialized as the worker's are); its handlers do
nothing else. The server's CPU (user + system, from /proc) over the clients' phase, per
client, is the figure: what any service spends per device with that call pattern, whatever its
handlers do. Two tables:

* Each client on its own channel (a real device's TLS handshake included), M exchanges of
  2,000 bytes as M unary calls or M messages on one bidirectional stream, TLS or plaintext.
* The load test's pattern: clients share connections as `fedhh device`'s fleet does (1,024 to
  one, with its channel options), each makes one unary call of a task's size (a selector's
  GetTask) or runs one session stream as the worker serves it (its challenge, then five messages
  of the stage messages' sizes at D = 4096, k ~ 90, each but the last answered by a request, the
  last by the stream's status: 10 messages), over TLS, either all at once or paced: arriving
  over 3P seconds (a task call: nothing more) and pausing up to P seconds before each message,
  as devices do that compute between stages. The paced rows are what a service pays where
  devices are few per second (`fedhh loadtest` on a small machine): with fewer events per
  wake-up of gRPC's threads, each costs more. Last, the same task call and session on fedhh's
  framed port (`fedhh.rpc.framed`: a `FramedServer` whose handlers do what the gRPC ones do,
  `FramedChannel`s as a fleet's, one per 1,024 devices): frames on the same shared TLS
  connections, read on the event loop's thread: what they cost off grpc.aio, whose every
  message crosses gRPC core's thread, its completion-queue poller's and the event loop's.

Usage:
    .venv/bin/python bench/bench_grpc_floor.py            # -> docs/benchmarks/grpc-floor.md
    .venv/bin/python bench/bench_grpc_floor.py --quick    # fewer clients, prints only
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import functools
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import Message

from fedhh.v1 import aggregator_pb2 as pb

MESSAGE_BYTES = 2_000
# The session stream's messages at D = 4096, k ~ 90 (bytes): the device's open, shares, masked
# vector, consistency signature and unmask shares; the worker's challenge, then the roster, the
# shares addressed to the device, the survivor set and the unmask request (the answer to the
# unmask shares is the stream's status). Sent as `SessionMessage`s and `SessionEvent`s of those
# sizes serialized (`_session_messages`), on both ports.
SESSION_UP = (300, 10_000, 16_500, 100, 3_000)
SESSION_DOWN = (48, 50_000, 10_000, 10_000, 10_000)
TASK_BYTES = (200, 1_500)  # a GetTask request and its answer
SERVICE = "fedhh.bench.Echo"
OUT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks" / "grpc-floor.md"


def _sized(make: Callable[[bytes], Message], size: int) -> Message:
    """``make(filler)`` with the filler that makes it ``size`` bytes serialized."""
    for length in range(size, -1, -1):
        message = make(bytes(length))
        if message.ByteSize() == size:
            return message
    raise ValueError(f"no message of {size} bytes")


@functools.cache
def _task_messages() -> tuple[Message, Message]:
    """A task call's request and answer (``TASK_BYTES``), as protobuf messages on the framed
    port (gRPC's task rows carry raw bytes: no parsing)."""
    return (_sized(lambda filler: pb.SessionMessage(vector_data=filler), TASK_BYTES[0]),
            _sized(lambda filler: pb.SessionEvent(challenge=filler), TASK_BYTES[1]))


@functools.cache
def _session_messages() -> tuple[list[Message], list[Message]]:
    """The session's messages (``SESSION_UP``) and events (``SESSION_DOWN``) at their sizes."""
    return ([_sized(lambda filler: pb.SessionMessage(vector_data=filler), size)
             for size in SESSION_UP],
            [_sized(lambda filler: pb.SessionEvent(challenge=filler), size)
             for size in SESSION_DOWN])


async def _session_handler(stream: Any) -> None:
    """The worker's side of the session pattern, on either port (``stream``: grpc.aio's
    servicer context or a framed ``ServerStream``): the challenge, then an answer to each
    message but the last, whose answer is the trailing metadata of the stream's end."""
    from fedhh.rpc.aggregator_wire import unmask_answer_metadata
    _, down = _session_messages()
    await stream.write(down[0])
    for answer in down[1:]:
        await stream.read()
        await stream.write(answer)
    await stream.read()
    stream.set_trailing_metadata(unmask_answer_metadata(True))


async def _serve(port_file: str, tls_dir: str | None) -> None:
    async def stream(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        async for message in requests:
            yield message

    async def unary(message: bytes, context: Any) -> bytes:
        return message

    async def session(_requests: Any, context: Any) -> None:
        await _session_handler(context)

    async def task(_message: bytes, _context: Any) -> bytes:
        return bytes(TASK_BYTES[1])

    from fedhh.rpc.serving import backlog_options, server_options
    server = grpc.aio.server(options=server_options(extra=backlog_options()))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {
        "Stream": grpc.stream_stream_rpc_method_handler(stream),
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Session": grpc.stream_stream_rpc_method_handler(
            session, request_deserializer=pb.SessionMessage.FromString,
            response_serializer=pb.SessionEvent.SerializeToString),
        "Task": grpc.unary_unary_rpc_method_handler(task)}),))
    if tls_dir:
        from fedhh.rpc.tls import TlsFiles
        port = server.add_secure_port("127.0.0.1:0",
                                      TlsFiles.from_dir(tls_dir).server_credentials())
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    Path(port_file + ".tmp").write_text(str(port))
    os.replace(port_file + ".tmp", port_file)
    await server.wait_for_termination()


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _clients(port: int, clients: int, exchanges: int, pattern: str,
                   tls_dir: str | None) -> None:
    credentials = None
    if tls_dir:
        from fedhh.rpc.tls import TlsFiles
        credentials = TlsFiles.from_dir(tls_dir).channel_credentials()
    at_once = asyncio.Semaphore(50)
    payload = os.urandom(MESSAGE_BYTES)

    async def device() -> None:
        async with at_once:
            channel = (grpc.aio.secure_channel(f"localhost:{port}", credentials) if credentials
                       else grpc.aio.insecure_channel(f"127.0.0.1:{port}"))
            if pattern == "stream":
                call = channel.stream_stream(f"/{SERVICE}/Stream")()
                for _ in range(exchanges):
                    await call.write(payload)
                    await call.read()
                await call.done_writing()
                await call.code()
            else:
                unary = channel.unary_unary(f"/{SERVICE}/Unary")
                for _ in range(exchanges):
                    await unary(payload)
            await channel.close()

    await asyncio.gather(*(device() for _ in range(clients)))


_Pause = Callable[[float], Awaitable[None]]


async def _paced(clients: int, pace_s: float,
                 device: Callable[[int, _Pause], Awaitable[None]]) -> None:
    """Run ``device(i, pause)`` for each client, each arriving within 3P seconds (P =
    ``pace_s``); ``pause(s)`` waits a random time up to ``s`` (the module docstring's pattern)."""
    rng = random.Random(0)

    async def pause(longest_s: float) -> None:
        if longest_s:
            await asyncio.sleep(rng.random() * longest_s)

    async def arrive(i: int) -> None:
        await pause(3 * pace_s)
        await device(i, pause)

    await asyncio.gather(*(arrive(i) for i in range(clients)))


async def _session(pause: _Pause, pace_s: float, read: Callable[[], Awaitable[Any]],
                   write: Callable[[Message], Awaitable[Any]],
                   last_answer: Callable[[], Awaitable[Any]]) -> None:
    """A device's side of the session pattern: the challenge, then each message after a pause,
    answered by the next event, the last by ``last_answer``."""
    up, _ = _session_messages()
    await read()
    for index, message in enumerate(up):
        await pause(pace_s)
        await write(message)
        await (read() if index < len(up) - 1 else last_answer())


async def _fleet(port: int, clients: int, pattern: str, pace_s: float, tls_dir: str | None
                 ) -> None:
    """The load test's pattern: ``clients`` on shared connections, one task call or one session
    each, paced as described in the module docstring (``pace_s`` = P; 0: all at once); the
    task call and the session on gRPC (``pattern`` "task", "session") or on the framed port
    ("framed-task", "framed-session")."""
    from fedhh.rpc.framed.client import FramedChannel, client_context
    from fedhh.rpc.tls import TlsFiles
    from fedhh_device.fleet import DEVICES_PER_CONNECTION
    from fedhh_device.main import OPTIONS
    if tls_dir is None:
        raise ValueError("the load test's pattern runs over TLS")
    connect: Callable[[], Any]
    if pattern.startswith("framed"):
        context = client_context(Path(tls_dir) / "ca.pem")
        connect = functools.partial(FramedChannel, f"localhost:{port}", context)
    else:
        credentials = TlsFiles.from_dir(tls_dir).channel_credentials()
        connect = functools.partial(grpc.aio.secure_channel, f"localhost:{port}", credentials,
                                    options=OPTIONS)
    channels: list[Any] = [connect() for _ in range(-(-clients // DEVICES_PER_CONNECTION))]

    async def device(i: int, pause: _Pause) -> None:
        channel = channels[i // DEVICES_PER_CONNECTION]
        if pattern == "task":
            await channel.unary_unary(f"/{SERVICE}/Task")(bytes(TASK_BYTES[0]))
            return
        if pattern == "framed-task":
            await channel.unary(f"/{SERVICE}/Task", _task_messages()[0], pb.SessionEvent)
            return
        call = channel.stream(f"/{SERVICE}/Session", pb.SessionEvent) \
            if pattern == "framed-session" else channel.stream_stream(
            f"/{SERVICE}/Session", request_serializer=pb.SessionMessage.SerializeToString,
            response_deserializer=pb.SessionEvent.FromString)()
        # (the answer to the last message is the call's end: gRPC's status, the END frame)
        await _session(pause, pace_s, call.read, call.write, call.code)
        if await call.code() != grpc.StatusCode.OK:
            raise RuntimeError(f"a session ended {await call.code()}: {await call.details()}")

    await _paced(clients, pace_s, device)
    for channel in channels:
        await channel.close()


async def _serve_framed(port_file: str, tls_dir: str) -> None:
    """The task call's and the session's server on fedhh's framed port (``fedhh.rpc.framed``)."""
    from fedhh.rpc.framed.server import FramedLimits, FramedServer, StreamMethod
    from fedhh.rpc.procedures import Procedure
    from fedhh.rpc.serving import MAX_MESSAGE_BYTES
    from fedhh.rpc.tls import TlsFiles
    from fedhh_device.fleet import DEVICES_PER_CONNECTION

    async def task(_request: Message, _context: Any) -> Message:
        return _task_messages()[1]

    server = FramedServer("the framed bench server", {
        f"/{SERVICE}/Session": StreamMethod(_session_handler, pb.SessionMessage.FromString),
        f"/{SERVICE}/Task": Procedure(f"/{SERVICE}/Task", pb.SessionMessage, task)},
        FramedLimits(MAX_MESSAGE_BYTES, DEVICES_PER_CONNECTION), TlsFiles.from_dir(tls_dir))
    port = await server.start("127.0.0.1", 0, insecure=False)
    Path(port_file + ".tmp").write_text(str(port))
    os.replace(port_file + ".tmp", port_file)
    await asyncio.Event().wait()


# -- measuring -----------------------------------------------------------------------------------

def measure(pattern: str, tls: bool, clients: int, exchanges: int, pace_s: float = 0.0
            ) -> float:
    """Server CPU ms per client (``pattern`` "task" or "session": the load test's, paced;
    "framed-task", "framed-session": the same on the framed port, ``fedhh.rpc.framed``; TLS
    only)."""
    with tempfile.TemporaryDirectory() as scratch:
        tls_dir = None
        if tls:
            from fedhh.rpc.tls import make_dev_pki
            tls_dir = f"{scratch}/tls"
            make_dev_pki(tls_dir, ["localhost", "127.0.0.1"])
        port_file = f"{scratch}/port"
        serve = "--serve-framed" if pattern.startswith("framed") else "--serve"
        server = subprocess.Popen([sys.executable, __file__, serve, port_file,
                                   *([tls_dir] if tls_dir else [])])
        try:
            while not os.path.exists(port_file):
                if server.poll() is not None:
                    raise SystemExit("the echo server did not start")
                time.sleep(0.02)
            port = int(Path(port_file).read_text())

            def load(count: int, exchanges: int, pace_s: float) -> Coroutine[Any, Any, None]:
                if pattern in ("task", "session", "framed-task", "framed-session"):
                    return _fleet(port, count, pattern, pace_s, tls_dir)
                return _clients(port, count, exchanges, pattern, tls_dir)

            asyncio.run(load(20, 2, 0.0))  # warm-up
            before = _cpu_s(server.pid)
            asyncio.run(load(clients, exchanges, pace_s))
            return 1000 * (_cpu_s(server.pid) - before) / clients
        finally:
            server.kill()
            server.wait()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--serve"]:
        import uvloop
        uvloop.install()
        asyncio.run(_serve(argv[1], argv[2] if len(argv) > 2 else None))
        return 0
    if argv[:1] == ["--serve-framed"]:
        import uvloop
        uvloop.install()
        asyncio.run(_serve_framed(argv[1], argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 clients, print only")
    parser.add_argument("--clients", type=int, default=2000)
    args = parser.parse_args(argv)
    clients = 300 if args.quick else args.clients
    rows = []
    for tls in (False, True):
        for pattern in ("unary", "stream"):
            for exchanges in (1, 6):
                ms = measure(pattern, tls, clients, exchanges)
                row = (f"| {'TLS' if tls else 'plaintext'} | {pattern} | {exchanges} | "
                       f"{ms:.2f} |")
                print(row, flush=True)
                rows.append(row)
    fleet_rows = []
    for pattern in ("task", "session", "framed-task", "framed-session"):
        for pace_s in (0.0, 2.0, 8.0):
            ms = measure(pattern, True, clients, 0, pace_s)
            what = {"task": "one GetTask-sized unary call",
                    "session": "one session stream (10 messages)",
                    "framed-task": "the same task call on the framed port",
                    "framed-session": "the same session on the framed port"}[pattern]
            row = f"| {what} | {pace_s:g} | {ms:.2f} |"
            print(row, flush=True)
            fleet_rows.append(row)
    if not args.quick:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(
            "# gRPC's own cost per device (bench/bench_grpc_floor.py)\n\n"
            f"Generated by `.venv/bin/python bench/bench_grpc_floor.py` on "
            f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores "
            f"({platform.processor() or platform.machine()}), grpcio {grpc.__version__}; "
            f"{clients} clients, each on its own channel, {MESSAGE_BYTES}-byte messages "
            "echoed by a grpc.aio server (uvloop) that does nothing else. Server CPU per "
            "client (user + system).\n\n"
            "| transport | pattern | exchanges per client | server CPU per client (ms) |\n"
            "| --- | --- | --- | --- |\n" + "\n".join(rows) + "\n\n"
            f"The load test's pattern: the same {clients} clients on shared TLS connections "
            "(1,024 per connection, as a fleet's), arriving over 3P seconds and pausing "
            "up to P seconds before each message (P = 0: all at once; a task call is one "
            "message, so its devices come over 3P seconds, a session's over about 3P + 5P/2). "
            "The session's messages are protobuf `SessionMessage`s and `SessionEvent`s of "
            "those sizes, parsed and serialized at both ends. The last rows serve the task call "
            "and the session without gRPC, on fedhh's framed port (`fedhh.rpc.framed`: a "
            "`FramedServer` whose handlers do what the gRPC ones do, a `FramedChannel` per "
            "1,024 devices): length-prefixed frames multiplexed on the same shared TLS "
            "connections, read by uvloop's TLS protocol on the event loop's thread, a "
            "coroutine per stream; the task call's request and answer are protobuf messages "
            "of its sizes there (on gRPC raw bytes, not parsed)."
            "\n\n"
            "| per client | P (s) | server CPU per client (ms) |\n"
            "| --- | --- | --- |\n" + "\n".join(fleet_rows) + "\n")
        print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
