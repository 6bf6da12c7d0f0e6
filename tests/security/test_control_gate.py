"""The aggregator's and the combiner's control APIs check the coordinator's token from the
call's metadata, before the request is read (outside probe, thirty-sixth stop).

Before, both services read and parsed a control call's message before the servicer looked at
the token: a caller without it had a message up to the receive cap (16 MiB at an aggregator
by default, 4 MiB at the combiner, whose every method is a control call) read and parsed,
and a malformed one was told why it did not parse ("INVALID_ARGUMENT: the request does not
parse: Error parsing message with type 'fedhh.v1.OpenShardedRoundRequest' ..."), where the
coordinator's admin API answers UNAUTHENTICATED unread. Now both answer UNAUTHENTICATED
whatever the message (a message that does not parse is the proof it was never parsed), the
token-holder's calls are served as before, and the device API of the aggregator, whose
credentials travel in its messages, is untouched."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from fedhh.rpc.serving import MAX_MESSAGE_BYTES
from fedhh_aggregator.combiner_main import CombinerSettings
from fedhh_aggregator.combiner_main import start as start_combiner
from fedhh_aggregator.main import AggregatorSettings
from fedhh_aggregator.main import start as start_aggregator
from fedhh_aggregator.workers import parse_worker

TOKEN = b"t" * 24
PUBLIC = Ed25519PrivateKey.from_private_bytes(bytes(range(32))).public_key().public_bytes(
    Encoding.Raw, PublicFormat.Raw)
NOT_PROTOBUF = b"\x0a\xff\xff\xff\x0f"  # field 1, a length that runs past the end
AGGREGATOR_CONTROL = ("OpenRound", "GetResult", "CancelRound", "GetOutcome")
COMBINER_CONTROL = ("DescribeWorkers", "OpenShardedRound", "GetResult", "CancelRound",
                    "GetOutcome")


async def _call(address: str, method: str, body: bytes, token: bytes | None
                ) -> tuple[grpc.StatusCode, str]:
    metadata = (("authorization", f"Bearer {token.decode()}"),) if token else ()
    async with grpc.aio.insecure_channel(
            address, options=[("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]) as channel:
        call = channel.unary_stream(method) if method.endswith("/GetResult") else \
            channel.unary_unary(method)
        try:
            response = call(body, timeout=10, metadata=metadata)
            if method.endswith("/GetResult"):
                async for _ in response:
                    pass
            else:
                await response
        except grpc.aio.AioRpcError as error:
            return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


def _served(start: Callable[[], Awaitable[object]], service: str, methods: tuple[str, ...]
            ) -> None:
    async def main() -> None:
        running = await start()
        address = f"127.0.0.1:{running.port}"  # type: ignore[attr-defined]
        try:
            for name in methods:
                method = f"/fedhh.v1.{service}/{name}"
                for token in (None, b"w" * 24, TOKEN[:-1]):
                    for body in (NOT_PROTOBUF, b"", b"\x0a\x01r" + b"\x00" * (1 << 20)):
                        code, details = await _call(address, method, body, token)
                        assert code == grpc.StatusCode.UNAUTHENTICATED, (method, token, code,
                                                                         details)
                        assert details == "missing or invalid control token", details
                # The token's holder is served: its malformed message is told so.
                code, details = await _call(address, method, NOT_PROTOBUF, TOKEN)
                assert code == grpc.StatusCode.INVALID_ARGUMENT, (method, code, details)
                assert "does not parse" in details, details
        finally:
            await running.stop()  # type: ignore[attr-defined]
    asyncio.run(main())


def test_the_aggregator_refuses_control_calls_without_the_token_unread() -> None:
    _served(lambda: start_aggregator(AggregatorSettings(
        coordinator_public=PUBLIC, control_token=TOKEN, insecure=True)),
        "AggregatorControl", AGGREGATOR_CONTROL)


def test_the_combiner_refuses_every_call_without_the_token_unread() -> None:
    _served(lambda: start_combiner(CombinerSettings(
        coordinator_public=PUBLIC, control_token=TOKEN, insecure=True,
        workers=[parse_worker("127.0.0.1:9")])),
        "CombinerControl", COMBINER_CONTROL)


def test_the_aggregator_device_api_still_reads_its_messages() -> None:
    """Device calls carry their credentials in the message: a malformed one is still told it
    does not parse (the gate is the control API's only)."""
    async def main() -> None:
        running = await start_aggregator(AggregatorSettings(
            coordinator_public=PUBLIC, control_token=TOKEN, insecure=True))
        try:
            code, details = await _call(f"127.0.0.1:{running.port}",
                                        "/fedhh.v1.SecureAggregation/AdvertiseKeys",
                                        NOT_PROTOBUF, None)
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
            assert "does not parse" in details, details
        finally:
            await running.stop()
    asyncio.run(main())

