"""``status_errors`` leaves gRPC's own error for an operation of a call that ended under its
handler (``ExecuteBatchError``, a ``grpc.aio.InternalError``: a stream's write after its
client cancelled or left) to gRPC, which ignores it for a closed client: nothing logged, no
status attempted. Before, it was taken for a bug: "unexpected error in ..." with its traceback
at ERROR and an INTERNAL abort, for each such client of every wrapped streaming method (the
session stream, GetResult, a selector's Attach)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
import pytest
from grpc._cython.cygrpc import ExecuteBatchError

from fedhh.rpc.errors import status_errors


class _Context:
    aborted = False

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.aborted = True
        raise grpc.aio.AbortError()


class _Servicer:
    @status_errors
    async def Stream(self, request: Any, context: Any) -> None:
        raise ExecuteBatchError('Failed "execute_batch"')  # (a write the core refused)


def test_a_refused_operation_of_an_ended_call_is_left_to_grpc_unlogged(
        caplog: pytest.LogCaptureFixture) -> None:
    context = _Context()

    async def call() -> None:
        await _Servicer().Stream(None, context)

    with caplog.at_level(logging.INFO), pytest.raises(ExecuteBatchError):
        asyncio.run(call())
    assert not context.aborted
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
