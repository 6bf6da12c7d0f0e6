"""A plaintext HTTP request on a TLS port (``fedhh.rpc.http_listener``: the dashboard, the
metrics, the Connect ports) is answered with a 400 that says the port speaks HTTPS and names the
https:// URL, built from the listener's own address, never the client's Host header. Before:
the TLS handshake failed on the request's bytes and the client got an empty reply, no clue."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

from fedhh.rpc.observability import start_metrics
from fedhh.rpc.tls import make_dev_pki


async def raw(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    reply = await asyncio.wait_for(reader.read(), 20)
    writer.close()
    return reply


def test_plain_http_on_a_tls_port_gets_a_400_naming_the_https_url(tmp_path: Path) -> None:
    pki = make_dev_pki(tmp_path, ["127.0.0.1"])
    client = ssl.create_default_context(cafile=str(pki.ca))

    async def scenario() -> None:
        endpoint = await start_metrics(0, "127.0.0.1", pki)
        port = endpoint.port
        assert port is not None
        try:
            for request in (b"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n",
                            b"HEAD /metrics HTTP/1.0\r\n\r\n"):
                reply = await raw(port, request)
                head, _, body = reply.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 400 Bad Request"), reply
                assert f"https://127.0.0.1:{port}/".encode() in body, reply
                assert b"evil.example" not in reply
                assert int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0]) == len(body)
            # Bytes that are neither TLS nor HTTP: the handshake refuses them, no reply.
            assert await raw(port, b"\x00\x01garbage-not-http\r\n\r\n") == b""
            # A TLS client is served as before.
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 20)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
            writer.close()
        finally:
            await endpoint.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_listener_behind_a_container_or_nat_names_no_address_the_client_cannot_use() -> None:
    """Before: compose's dashboard, opened as http://127.0.0.1:7443/, answered "use
    https://172.18.0.3:7443/", the container's own address (no certificate names it, and it is
    not reachable through an ssh tunnel)."""
    from fedhh.rpc.http_listener import plain_http_answer

    for host in ("172.18.0.3", "10.0.0.7", "fe80::1%eth0", "0.0.0.0"):
        said = plain_http_answer(host, 7443)
        assert said == ("this port (7443) speaks HTTPS, not plain HTTP: open the same address "
                        "with https:// instead of http://\n"), said
    assert plain_http_answer("127.0.0.1", 7443).endswith("use https://127.0.0.1:7443/\n")
    assert plain_http_answer("::1", 9100).endswith("use https://[::1]:9100/\n")
