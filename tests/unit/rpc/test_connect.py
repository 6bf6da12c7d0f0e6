"""The Connect adapter (fedhh/rpc/connect.py) in process, over a servicer of the coordinator's
DeviceService whose methods say what they were given: the context adapter (metadata, peer,
deadline), the error map shared with gRPC, the caps, and the configuration checks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
import uvloop

from fedhh.errors import AuthenticationError, ConfigError, NotFoundError
from fedhh.rpc.connect import CODES, MAX_HEAD_BYTES, ConnectServer, check_origins
from fedhh.rpc.connect_client import ConnectChannel, ConnectStub
from fedhh.rpc.errors import status_errors
from fedhh.rpc.http_listener import split_listen
from fedhh.rpc.procedures import procedures
from fedhh.rpc.tls import make_dev_pki
from fedhh.v1 import aggregator_pb2 as agg_pb
from fedhh.v1 import coordinator_pb2 as pb

DEVICES = pb.DESCRIPTOR.services_by_name["DeviceService"]
PROTO = {"Content-Type": "application/proto"}


class Echo:
    """Enroll answers with what its context held; GetTask raises what its label asks for."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @status_errors
    async def Enroll(self, request: pb.EnrollRequest, context: Any) -> pb.EnrollResponse:
        remaining = context.time_remaining()
        label = json.dumps({"peer": context.peer(),
                            "metadata": dict(context.invocation_metadata()),
                            "remaining": remaining})
        self.seen.append(request.label)
        return pb.EnrollResponse(device_id=7, credential=label.encode())

    @status_errors
    async def GetTask(self, request: pb.GetTaskRequest, context: Any) -> pb.GetTaskResponse:
        if request.device_id == 1:
            raise NotFoundError("no such thing")
        if request.device_id == 2:
            raise RuntimeError("a bug with secrets in it")
        await asyncio.Event().wait()  # a long-poll nothing answers: only the deadline ends it
        return pb.GetTaskResponse(retry_after_ms=5)


def _gate(metadata: tuple[tuple[str, str | bytes], ...]) -> None:
    if ("authorization", "Bearer ok") not in metadata:
        raise AuthenticationError("no")


async def _server(servicer: Echo, cap: int = 4096) -> ConnectServer:
    server = ConnectServer("test port", procedures(
        DEVICES, servicer, {"/fedhh.v1.DeviceService/GetTask": _gate}), cap, None,
        ["https://ok.example"])
    await server.start("127.0.0.1", 0, insecure=True)
    return server


def test_every_grpc_status_has_one_connect_code() -> None:
    assert set(CODES) == set(grpc.StatusCode) - {grpc.StatusCode.OK}
    assert len({name for name, _ in CODES.values()}) == len(CODES)
    assert CODES[grpc.StatusCode.UNAUTHENTICATED] == ("unauthenticated", 401)
    assert CODES[grpc.StatusCode.RESOURCE_EXHAUSTED] == ("resource_exhausted", 429)


def test_configuration_is_checked() -> None:
    assert check_origins(["https://a.example", "http://127.0.0.1:8080", "https://[::1]:3"])
    for bad in ["*", "https://a.example/", "a.example", "https://a.example/path", "null"]:
        with pytest.raises(ConfigError):
            check_origins([bad])
    assert split_listen("0.0.0.0:8443") == ("0.0.0.0", 8443)
    assert split_listen("[::1]:0") == ("::1", 0)
    for bad in ["8443", "host:", ":80", "host:99999"]:
        with pytest.raises(ConfigError):
            split_listen(bad)
    service = agg_pb.DESCRIPTOR.services_by_name["SecureAggregation"]
    with pytest.raises(ConfigError, match="unary"):
        procedures(service, Echo(), only=["SubmitMaskedInput"])

    async def plaintext_elsewhere() -> None:
        server = ConnectServer("test port", procedures(DEVICES, Echo()), 4096, None)
        with pytest.raises(ConfigError, match="TLS"):
            await server.start("0.0.0.0", 0, insecure=True)
    asyncio.run(plaintext_elsewhere())


def test_origins_are_written_as_a_browser_sends_them() -> None:
    # A browser's Origin has the scheme and host in lower case and no default port; origins
    # are compared exactly, so before, these were accepted and every call of the page was 403.
    assert check_origins(["HTTPS://App.Example", "https://app.example:443",
                          "http://127.0.0.1:80", "http://a.example:0080", "https://[::1]:0443",
                          "https://[::1]:8443", "http://a.example:443"]) == (
        "https://app.example", "https://app.example", "http://127.0.0.1", "http://a.example",
        "https://[::1]", "https://[::1]:8443", "http://a.example:443")
    with pytest.raises(ConfigError, match="1 to 65535"):
        check_origins(["https://a.example:99999"])


def test_an_origin_no_browser_sends_is_told_in_the_form_one_does() -> None:
    # (before, an internationalised host was told the origin's shape, "with no path", and
    # port 0, which no page is served from, was accepted)
    with pytest.raises(ConfigError) as caught:
        check_origins(["https://пример.рф:8443"])
    assert str(caught.value).endswith(
        "(a browser sends an internationalised host in its ASCII form: "
        "'https://xn--e1afmkfd.xn--p1ai:8443')")
    with pytest.raises(ConfigError) as caught:
        check_origins(["https://a.example:0"])
    assert "port is 1 to 65535, got 'https://a.example:0'" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        check_origins(["https://a.example/path"])
    assert "ASCII form" not in str(caught.value)



def test_streaming_methods_are_not_served() -> None:
    class Aggregation:
        def __getattr__(self, name: str) -> Any:
            return name

    service = agg_pb.DESCRIPTOR.services_by_name["SecureAggregation"]
    paths = {p.path for p in procedures(service, Aggregation())}
    assert "/fedhh.v1.SecureAggregation/SubmitMaskedInput" not in paths
    assert "/fedhh.v1.SecureAggregation/SubmitMaskedVector" in paths


def test_calls_reach_the_servicer_with_a_grpc_shaped_context() -> None:
    async def scenario() -> None:
        echo = Echo()
        server = await _server(echo)
        base = f"http://127.0.0.1:{server.port}"
        channel = ConnectChannel(f"127.0.0.1:{server.port}", insecure=True)
        stub = ConnectStub(channel, DEVICES)
        try:
            answer = await stub.Enroll(pb.EnrollRequest(label="x"),
                                       metadata=(("X-Fedhh-Probe", "1"),), timeout=5.0)
            seen = json.loads(answer.credential)
            assert seen["peer"].startswith("ipv4:127.0.0.1:")
            assert seen["metadata"]["x-fedhh-probe"] == "1"
            assert 0 < seen["remaining"] <= 5.0
            # Domain errors map as gRPC maps them; a bug is INTERNAL with nothing of it shown.
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.GetTask(pb.GetTaskRequest(device_id=1),
                                   metadata=(("authorization", "Bearer ok"),))
            assert (refused.value.code(), refused.value.details()) == (
                grpc.StatusCode.NOT_FOUND, "no such thing")
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.GetTask(pb.GetTaskRequest(device_id=2),
                                   metadata=(("authorization", "Bearer ok"),))
            assert (refused.value.code(), refused.value.details()) == (
                grpc.StatusCode.INTERNAL, "internal error")
            # The credential gate runs before the servicer; the deadline ends a slow call.
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.GetTask(pb.GetTaskRequest(device_id=3))
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            async with aiohttp.ClientSession() as session:
                async with session.post(
                        base + "/fedhh.v1.DeviceService/GetTask",
                        data=pb.GetTaskRequest(device_id=3, wait_ms=5000).SerializeToString(),
                        headers={**PROTO, "Authorization": "Bearer ok",
                                 "Connect-Timeout-Ms": "50"}) as answer:
                    assert answer.status == 504
                    assert (await answer.json())["code"] == "deadline_exceeded"

                # A body past the cap without a declared length is cut off, then refused.
                async def chunks() -> AsyncIterator[bytes]:
                    for _ in range(8):
                        yield b"\x0a" * 1024

                async with session.post(base + "/fedhh.v1.DeviceService/Enroll",
                                        data=chunks(), headers=PROTO) as answer:
                    assert answer.status == 429
                    assert (await answer.json())["code"] == "resource_exhausted"
            assert echo.seen == ["x"]
        finally:
            await channel.close()
            await server.close()

    asyncio.run(scenario())


def test_a_zero_timeout_is_refused_before_the_call_runs() -> None:
    """Connect-Timeout-Ms is a positive integer in the protocol's grammar: 0 (however many
    zeros) is invalid_argument and the servicer is not called. Before, 0 was a deadline already
    passed, so Enroll (which waits for nothing) was answered and a long-poll was
    deadline_exceeded."""
    async def scenario() -> None:
        echo = Echo()
        server = await _server(echo)
        try:
            async with aiohttp.ClientSession() as session:
                for zero in ("0", "000"):
                    async with session.post(
                            f"http://127.0.0.1:{server.port}/fedhh.v1.DeviceService/Enroll",
                            data=pb.EnrollRequest(label="x").SerializeToString(),
                            headers={**PROTO, "Connect-Timeout-Ms": zero}) as answer:
                        assert answer.status == 400
                        body = await answer.json()
                        assert body["code"] == "invalid_argument"
                        assert "Connect-Timeout-Ms" in body["message"]
            assert echo.seen == []
        finally:
            await server.close()

    asyncio.run(scenario())


def test_large_bodies_are_read_a_few_at_a_time() -> None:
    """With room for one large body, a second waits for its turn (here past its deadline)
    while small calls go on."""
    async def scenario() -> None:
        echo = Echo()
        server = ConnectServer("test port", procedures(DEVICES, echo), 1 << 20, None,
                               body_timeout_s=3.0, large_bodies=1)
        await server.start("127.0.0.1", 0, insecure=True)
        base = f"http://127.0.0.1:{server.port}/fedhh.v1.DeviceService/Enroll"
        _, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:  # a large body that trickles: it holds the one turn until its 3 s are up
            writer.write(b"POST /fedhh.v1.DeviceService/Enroll HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Type: application/proto\r\nContent-Length: 100000\r\n\r\n"
                         b"\x0a\x05")
            await writer.drain()
            while not server._large_bodies.locked():  # the trickling call has the turn
                await asyncio.sleep(0.01)
            large = pb.EnrollRequest(label="L", attestation=b"a" * 70_000).SerializeToString()
            async with aiohttp.ClientSession() as session:
                async with session.post(base, data=pb.EnrollRequest(label="s")
                                        .SerializeToString(), headers=PROTO) as answer:
                    assert answer.status == 200
                async with session.post(base, data=large, headers={
                        **PROTO, "Connect-Timeout-Ms": "500"}) as answer:
                    assert answer.status == 504
                    assert (await answer.json())["code"] == "deadline_exceeded"
            assert echo.seen == ["s"]
        finally:
            writer.close()
            await server.close()

    asyncio.run(scenario())


def _token_head(prefix: bytes) -> bytes | None:
    """A head check on an EnrollRequest: its first field must be a 14-byte enrollment token
    starting "ok" (who sends it), else UNAUTHENTICATED; None while fewer bytes came."""
    if prefix[:4] and not b"\x0a\x0eok".startswith(prefix[:4]):
        raise AuthenticationError("not admitted")
    return prefix[2:16] if len(prefix) >= 16 else None


def _enroll(token: bytes, size: int) -> bytes:
    return pb.EnrollRequest(enrollment_token=token, label="L",
                            attestation=b"a" * size).SerializeToString()


def test_a_large_body_takes_a_turn_only_once_its_head_shows_its_caller() -> None:
    """With a head check (the aggregator's masked vector: its signed header comes first), a
    large body is given a turn only once its first bytes show who sends it, and only while no
    other body of that caller's is being read: trickling bodies of nobody, one of which held
    each turn before, wait without one, so an admitted caller's body is read meanwhile; a
    head the check refuses is answered with its status at once, unread; a second body of a
    caller whose first is still being read is refused UNAVAILABLE, and taken again
    once the first ended; a body that ends, or passes MAX_HEAD_BYTES, before its caller is
    known is INVALID_ARGUMENT. Small bodies are not checked."""
    async def scenario() -> None:
        echo = Echo()
        server = ConnectServer("test port", procedures(
            DEVICES, echo, head_checks={"Enroll": _token_head}), 1 << 20, None,
            body_timeout_s=5.0, large_bodies=1)
        await server.start("127.0.0.1", 0, insecure=True)
        base = f"http://127.0.0.1:{server.port}/fedhh.v1.DeviceService/Enroll"
        writers: list[asyncio.StreamWriter] = []

        async def trickle(first: bytes) -> asyncio.StreamReader:
            """A large body of which only ``first`` is sent."""
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writers.append(writer)
            writer.write(b"POST /fedhh.v1.DeviceService/Enroll HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Type: application/proto\r\nContent-Length: 100000\r\n\r\n"
                         + first)
            await writer.drain()
            return reader

        try:
            for first in (b"\x0a", b"\x0a\x0eok", b"\x0a\x0eoktoken"):  # (nobody known yet)
                await trickle(first)
            async with aiohttp.ClientSession() as session:
                async with session.post(base, data=_enroll(b"okcaller-one..", 70_000),
                                        headers=PROTO) as answer:
                    assert answer.status == 200
                assert echo.seen == ["L"]
                async with session.post(base, data=_enroll(b"forged-token..", 70_000),
                                        headers=PROTO) as answer:
                    assert (answer.status, await answer.json()) == (
                        401, {"code": "unauthenticated", "message": "not admitted"})
                # The caller's first body holds the turn: its second is refused at once.
                held = await trickle(_enroll(b"okcaller-two..", 70_000)[:100])
                await _until(server._large_bodies.locked, "the first body's turn")
                async with session.post(base, data=_enroll(b"okcaller-two..", 70_000),
                                        headers=PROTO) as answer:
                    assert (answer.status, (await answer.json())["message"]) == (
                        503, "an earlier upload of this caller is still being read")
                writers[-1].transport.abort()
                await held.read()
                await _until(lambda: not server._large_bodies.locked(), "the turn back")
                async with session.post(base, data=_enroll(b"okcaller-two..", 70_000),
                                        headers=PROTO) as answer:
                    assert answer.status == 200
                async def short() -> AsyncIterator[bytes]:  # (chunked: a length not declared)
                    yield b"\x0a\x0eok"
                async with session.post(base, data=short(), headers=PROTO) as answer:
                    assert (answer.status, await answer.json()) == (400, {
                        "code": "invalid_argument",
                        "message": "the request ends before its caller is known"})
            assert echo.seen == ["L", "L"]
            assert not server._large_callers
        finally:
            for writer in writers:
                writer.transport.abort()
            await server.close()

    asyncio.run(scenario())


def test_a_head_check_that_never_knows_its_caller_stops_at_max_head_bytes() -> None:
    async def scenario() -> None:
        server = ConnectServer("test port", procedures(
            DEVICES, Echo(), head_checks={"Enroll": lambda prefix: None}), 1 << 20, None)
        await server.start("127.0.0.1", 0, insecure=True)
        base = f"http://127.0.0.1:{server.port}/fedhh.v1.DeviceService/Enroll"
        try:
            async with aiohttp.ClientSession() as session, session.post(
                    base, data=_enroll(b"x", 70_000), headers=PROTO) as answer:
                assert (answer.status, await answer.json()) == (400, {
                    "code": "invalid_argument", "message": "the caller is not known from "
                    f"the request's first {MAX_HEAD_BYTES} bytes"})
        finally:
            await server.close()
        with pytest.raises(ConfigError, match="head checks of methods not served"):
            procedures(DEVICES, Echo(), head_checks={"Nope": lambda prefix: None})

    asyncio.run(scenario())


async def _until(predicate: Callable[[], bool], what: str, bound: float = 10.0) -> None:
    """Wait for ``predicate`` to hold (polled; failing after ``bound`` s)."""
    deadline = time.monotonic() + bound
    while not predicate():
        assert time.monotonic() < deadline, f"not within {bound} s: {what}"
        await asyncio.sleep(0.01)


def test_a_tls_connection_that_sent_its_head_outlives_the_head_deadline(tmp_path: Path
                                                                        ) -> None:
    """Regression (b19ef71): with TLS under uvloop (the services' loop), the listener's head
    deadline was set on uvloop's SSL wrapper, not on aiohttp's protocol that marks the first
    head, so every TLS connection to the Connect port was cut at the deadline, heads sent or
    not. Once the deadline has passed, a keep-alive connection that sent a request is still
    held and serves the next one; a TLS connection that never sends a head is closed at it."""
    head_timeout_s = 2.0  # a TLS handshake and a request head on a busy machine, many times over
    pki = make_dev_pki(tmp_path, ["localhost", "127.0.0.1"])
    client = ssl.create_default_context(cafile=str(pki.ca))

    async def scenario() -> None:
        echo = Echo()
        server = ConnectServer("test port", procedures(DEVICES, echo), 4096, pki)
        await server.start("127.0.0.1", 0)
        assert server._served is not None
        listener, runner = server._served.listener, server._served.runner
        assert runner.server is not None
        listener.head_timeout_s = head_timeout_s  # read per connection; none has come yet
        aiohttp_server = runner.server
        url = f"https://127.0.0.1:{server.port}/fedhh.v1.DeviceService/Enroll"

        async def enroll(session: aiohttp.ClientSession, label: str) -> str:
            async with session.post(url, data=pb.EnrollRequest(label=label).SerializeToString(),
                                    headers=PROTO) as answer:
                assert answer.status == 200, await answer.text()
                reply = pb.EnrollResponse.FromString(await answer.read())
            return str(json.loads(reply.credential)["peer"])

        try:
            async with aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(ssl=client, limit=1)) as session:
                first = await enroll(session, "1")
                held = aiohttp_server.connections
                assert len(held) == 1
                # The head deadline has run (the listener forgets the connection then), or the
                # connection was cut.
                await _until(lambda: not (listener._pending_heads
                                          and aiohttp_server.connections), "the head deadline")
                assert aiohttp_server.connections == held, \
                    "the TLS connection was cut at the head deadline"
                # The same connection (the same client port) answers the next request.
                assert await enroll(session, "2") == first
                assert aiohttp_server.connections == held

                # A TLS connection that never sends a head is closed at the deadline.
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", server.port, ssl=client, server_hostname="127.0.0.1")
                handshaken = time.monotonic()
                try:
                    # (an aborted TLS connection may end without close_notify)
                    with contextlib.suppress(ConnectionError, ssl.SSLError):
                        assert await asyncio.wait_for(reader.read(), 10.0) == b""
                    waited = time.monotonic() - handshaken
                finally:
                    writer.close()
                assert head_timeout_s - 0.05 <= waited < head_timeout_s + 5.0, waited
            assert echo.seen == ["1", "2"]
        finally:
            await server.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as loop:
        loop.run(asyncio.wait_for(scenario(), 30.0))


def test_calls_refused_for_their_origin_are_logged_at_most_once_a_minute(
        caplog: pytest.LogCaptureFixture) -> None:
    """A browser hides a refused preflight from its page ("Failed to fetch"): before, the
    operator saw nothing either, and a page on an origin --web-origin left out enrolled no
    device with no line in any log saying why."""
    async def scenario() -> None:
        server = await _server(Echo())
        now = [1000.0]
        server.clock = lambda: now[0]
        url = f"http://127.0.0.1:{server.port}/fedhh.v1.DeviceService/Enroll"
        preflight = {"Access-Control-Request-Method": "POST"}
        try:
            async with aiohttp.ClientSession() as session:
                async def call(method: str, origin: str) -> int:
                    async with session.request(method, url, data=b"", headers={
                            **PROTO, **preflight, "Origin": origin}) as answer:
                        return answer.status

                assert await call("OPTIONS", "https://www.ok.example") == 403
                assert await call("POST", "https://www.ok.example") == 403
                assert await call("OPTIONS", "https://ok.example") == 204  # allowed: not counted
                now[0] += 59.0
                assert await call("OPTIONS", "https://other.example") == 403
                now[0] += 1.0
                assert await call("OPTIONS", "https://" + "a" * 300 + ".example") == 403
        finally:
            await server.close()

    with caplog.at_level(logging.WARNING, logger="fedhh.rpc.connect"):
        asyncio.run(scenario())
    lines = [r.getMessage() for r in caplog.records if r.name == "fedhh.rpc.connect"]
    assert lines == [
        "the test port refused 1 browser call(s) from an origin not in --web-origin since the "
        "last such line, the latest from 'https://www.ok.example'; it allows "
        "https://ok.example. If that page is yours, add its origin as the browser writes it "
        "(scheme://host[:port])",
        "the test port refused 3 browser call(s) from an origin not in --web-origin since the "
        f"last such line, the latest from 'https://{'a' * 192}'; it allows "
        "https://ok.example. If that page is yours, add its origin as the browser writes it "
        "(scheme://host[:port])"]


def test_a_refused_preflight_names_what_it_refuses() -> None:
    """Before, a preflight from an allowed origin for PUT, or for a method the port does not
    serve, was refused 'this origin may not call the service', which sends its reader to
    --web-origin for an origin that is in it."""
    async def scenario() -> list[tuple[int, str, str | None]]:
        server = await _server(Echo())
        base = f"http://127.0.0.1:{server.port}"
        cases = [("/fedhh.v1.DeviceService/Enroll", "https://ok.example", "PUT"),
                 ("/fedhh.v1.DeviceService/Enroll", "https://ok.example", None),
                 ("/fedhh.v1.DeviceService/Nothing", "https://ok.example", "POST"),
                 ("/fedhh.v1.DeviceService/Enroll", None, "POST"),
                 ("/fedhh.v1.DeviceService/Enroll", "https://other.example", "POST"),
                 ("/fedhh.v1.DeviceService/Enroll", "https://ok.example", "POST")]
        got = []
        try:
            async with aiohttp.ClientSession() as session:
                for path, origin, method in cases:
                    headers = {}
                    if origin is not None:
                        headers["Origin"] = origin
                    if method is not None:
                        headers["Access-Control-Request-Method"] = method
                    async with session.options(base + path, headers=headers) as answer:
                        got.append((answer.status, await answer.text(),
                                    answer.headers.get("Access-Control-Allow-Origin")))
        finally:
            await server.close()
        return got

    assert asyncio.run(scenario()) == [
        (405, "Connect calls are POSTs, the preflight asked for 'PUT'", "https://ok.example"),
        (405, "Connect calls are POSTs, the preflight asked for no method",
         "https://ok.example"),
        (404, "no such method on this port", "https://ok.example"),
        (403, "a CORS preflight names its Origin; this OPTIONS request has none (Connect calls "
              "are POSTs)", None),
        (403, "this origin may not call the service", None),
        (204, "", "https://ok.example")]


def test_a_call_is_told_to_send_its_body_only_once_its_head_passed() -> None:
    """``Expect: 100-continue``: before, aiohttp answered 100 Continue to every call, refused
    ones too (their body then came for nothing), and any other expectation 417 in plain
    text, which a Connect client reads from its status alone."""
    enroll = "/fedhh.v1.DeviceService/Enroll"
    cases = [  # (path, extra header lines, declared length): the answer's status line
        (enroll, "Expect: 100-continue\r\n", 2),
        (enroll, "Expect: 100-continue\r\nOrigin: https://evil.example\r\n", 2),
        ("/fedhh.v1.DeviceService/GetTask", "Expect: 100-continue\r\n", 2),
        (enroll, "Expect: 100-continue\r\n", 5000),
        (enroll, "Expect: 200-ok\r\n", 2)]

    async def scenario() -> list[tuple[bytes, bytes]]:
        server = await _server(Echo())
        answers = []
        try:
            for path, lines, length in cases:
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                             "Content-Type: "
                             f"application/proto\r\nContent-Length: {length}\r\n{lines}"
                             "\r\n".encode())
                first = await asyncio.wait_for(reader.readuntil(b"\r\n"), 10)
                if first.startswith(b"HTTP/1.1 100 "):
                    await reader.readuntil(b"\r\n")
                    writer.write(b"\x1a\x00")  # (the label, empty)
                answer = await asyncio.wait_for(reader.read(), 10)  # (to the close)
                answers.append((first.strip(), answer.rsplit(b"\r\n\r\n", 1)[1]))
                writer.close()
        finally:
            await server.close()
        return answers

    answers = asyncio.run(scenario())
    assert answers[0][0] == b"HTTP/1.1 100 Continue"
    refused = [(first, json.loads(body)) for first, body in answers[1:]]
    assert refused == [
        (b"HTTP/1.1 403 Forbidden", {"code": "permission_denied",
                                     "message": "this origin may not call the service"}),
        (b"HTTP/1.1 401 Unauthorized", {"code": "unauthenticated", "message": "no"}),
        (b"HTTP/1.1 429 Too Many Requests", {
            "code": "resource_exhausted",
            "message": "a request above the 4096-byte receive cap"}),
        (b"HTTP/1.1 417 Expectation Failed", {
            "code": "invalid_argument",
            "message": "the one expectation this port meets is 100-continue, got '200-ok'"})]
