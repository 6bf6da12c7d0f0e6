"""A session stream whose client cancelled or left while its handler was about to write: gRPC's
core refuses the write (``ExecuteBatchError``, a ``grpc.aio.InternalError``) before the
handler is cancelled. The stream ends quietly, as for a client gone at any other moment:
nothing is logged at ERROR, and a refusal keeps its own status. Before, the core's error
escaped the handler as a bug would: "unexpected error in DeviceServicer.Session" with its
traceback at ERROR, for each stream of anyone who cancelled as it was refused, before any open
(found fuzzing the session stream with clients that cancel mid-stream, where it happened
1 stream in ~200). The race itself cannot be timed from outside, so a context stands in for
gRPC's, its writes refused as the core refuses them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import grpc
import pytest
from aggregator_testkit import COORDINATOR_PUBLIC
from grpc._cython.cygrpc import ExecuteBatchError

from fedhh.v1 import aggregator_pb2 as pb
from fedhh_aggregator.registry import RoundRegistry
from fedhh_aggregator.servicers import DeviceServicer


class _ClientGone:
    """A servicer context whose client left after ``writes`` of the handler's writes went out:
    later writes are refused as gRPC's core refuses them."""

    def __init__(self, writes: int, messages: list[pb.SessionMessage]) -> None:
        self.writes_left = writes
        self.messages = messages
        self.aborted: tuple[grpc.StatusCode, str] | None = None

    async def write(self, event: Any) -> None:
        if self.writes_left == 0:
            raise ExecuteBatchError('Failed "execute_batch"')
        self.writes_left -= 1

    async def read(self) -> Any:
        return self.messages.pop(0) if self.messages else grpc.aio.EOF

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.aborted = (code, details)
        raise grpc.aio.AbortError()

    def set_trailing_metadata(self, metadata: Any) -> None:
        pass

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"


NOT_AN_OPEN = pb.SessionMessage(consistency_signature=bytes(64))


@pytest.mark.parametrize(("writes", "messages", "status"), [
    (0, [], None),  # gone before the challenge went out
    (1, [NOT_AN_OPEN], grpc.StatusCode.INVALID_ARGUMENT),  # gone as its refusal is written
], ids=["challenge", "refusal"])
def test_a_write_the_core_refuses_ends_the_stream_without_an_error_logged(
        writes: int, messages: list[pb.SessionMessage], status: grpc.StatusCode | None,
        caplog: pytest.LogCaptureFixture) -> None:
    context = _ClientGone(writes, list(messages))

    async def scenario() -> None:
        servicer = DeviceServicer(RoundRegistry(COORDINATOR_PUBLIC))
        # (AbortError: how gRPC's context ends a call with a status)
        with contextlib.suppress(grpc.aio.AbortError):
            await servicer.Session(None, context)

    with caplog.at_level(logging.INFO):
        asyncio.run(scenario())
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [
        r.getMessage() for r in caplog.records]
    assert (context.aborted[0] if context.aborted else None) == status, context.aborted
