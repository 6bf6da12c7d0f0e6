"""A request the metrics endpoint cannot parse is one WARNING naming the client, with at most a
short escaped prefix of what it sent (outside probe, thirty-sixth stop). Before, the endpoint
used aiohttp's own logger, unlike the dashboard and the Connect ports
(``fedhh.rpc.request_log``): a header line over 8 KiB sent to any service's metrics port was
logged at ERROR with a traceback quoting the sender's bytes."""

from __future__ import annotations

import asyncio
import logging

import pytest

from fedhh.rpc.observability import MetricsEndpoint

SECRET = b"sender-chosen-" * 1000  # a header line of 14,000 bytes, over aiohttp's 8,190


async def _send(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


def test_a_malformed_request_is_one_warning_without_its_bytes(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> tuple[bytes, bytes]:
        endpoint = MetricsEndpoint()
        port = await endpoint.start(0, "127.0.0.1", None)
        try:
            refused = await _send(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Long: "
                                  + SECRET + b"\r\nConnection: close\r\n\r\n")
            served = await _send(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
                                 b"Connection: close\r\n\r\n")
            return refused, served
        finally:
            await endpoint.close()

    with caplog.at_level(logging.DEBUG):
        refused, served = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert refused.startswith(b"HTTP/1.0 400") or refused.startswith(b"HTTP/1.1 400"), refused[:80]
    assert served.startswith(b"HTTP/1.1 200") and b"python_info" in served
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], \
        [(r.name, r.getMessage()[:100]) for r in caplog.records if r.levelno >= logging.ERROR]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING
                and "metrics endpoint: a malformed request refused" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    record = warnings[0]
    assert record.client == "127.0.0.1"  # type: ignore[attr-defined]
    assert record.exc_info is None
    assert len(record.error) < 120, record.error  # type: ignore[attr-defined]
    assert not any(b"sender-chosen-sender-chosen" in r.getMessage().encode()
                   or b"sender-chosen-sender-chosen" in str(r.__dict__).encode()
                   for r in caplog.records)
