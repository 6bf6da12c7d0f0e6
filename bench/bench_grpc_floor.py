"""What gRPC itself costs a service per device: the floor under `fedhh loadtest`'s figures.

A grpc.aio server (uvloop, as the services run) in a child process echoes raw byte messages of
the size of a SecAgg+ stage message; N clients, each on its own channel as devices are, make M
exchanges each, either as M unary calls (what a device makes now: a call per stage) or as M
messages on one bidirectional stream; over TLS with the dev PKI's P-256 certificate (what the
services serve) or plaintext. The server's CPU (user + system, from /proc) over the clients'
phase, per client, is the figure: it bounds from below what any service spends per device
with that call pattern, whatever the handlers do (they do nothing here).

Usage:
    .venv/bin/python bench/bench_grpc_floor.py            # -> docs/benchmarks/grpc-floor.md
    .venv/bin/python bench/bench_grpc_floor.py --quick    # fewer clients, prints only
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

MESSAGE_BYTES = 2_000
SERVICE = "fedhh.bench.Echo"
OUT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks" / "grpc-floor.md"


async def _serve(port_file: str, tls_dir: str | None) -> None:
    async def stream(requests, context):  # type: ignore[no-untyped-def]
        async for message in requests:
            yield message

    async def unary(message, context):  # type: ignore[no-untyped-def]
        return message

    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {
        "Stream": grpc.stream_stream_rpc_method_handler(stream),
        "Unary": grpc.unary_unary_rpc_method_handler(unary)}),))
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


def measure(pattern: str, tls: bool, clients: int, exchanges: int) -> float:
    """Server CPU ms per client."""
    with tempfile.TemporaryDirectory() as scratch:
        tls_dir = None
        if tls:
            from fedhh.rpc.tls import make_dev_pki
            tls_dir = f"{scratch}/tls"
            make_dev_pki(tls_dir, ["localhost", "127.0.0.1"])
        port_file = f"{scratch}/port"
        server = subprocess.Popen([sys.executable, __file__, "--serve", port_file,
                                   *([tls_dir] if tls_dir else [])])
        try:
            while not os.path.exists(port_file):
                if server.poll() is not None:
                    raise SystemExit("the echo server did not start")
                time.sleep(0.02)
            port = int(Path(port_file).read_text())
            asyncio.run(_clients(port, 20, 2, pattern, tls_dir))  # warm-up
            before = _cpu_s(server.pid)
            asyncio.run(_clients(port, clients, exchanges, pattern, tls_dir))
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
            "| --- | --- | --- | --- |\n" + "\n".join(rows) + "\n")
        print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
