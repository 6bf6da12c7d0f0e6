"""The coordinator's control client (``GrpcAggregator``) talking to a fake aggregation service
over real gRPC on an OS-assigned port: the one setup the control-client tests share."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fedhh.rpc import serving
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_coordinator.control import GrpcAggregator

TOKEN = b"t" * 32


@contextlib.asynccontextmanager
async def listening(fake: Any, *, single: bool = False) -> AsyncIterator[str]:
    """The address of ``fake`` served as a combiner's control calls, and a single aggregator's
    too where ``single``; the server stopped after, whatever the test raised."""
    server = serving.new_server()
    if single:
        pb_grpc.add_AggregatorControlServicer_to_server(fake, server)
    pb_grpc.add_CombinerControlServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


@contextlib.asynccontextmanager
async def served(fake: Any, *, single: bool = False,
                 token: bytes = TOKEN) -> AsyncIterator[GrpcAggregator]:
    """A ``GrpcAggregator`` holding ``token`` whose service is ``fake`` (``listening``), closed
    before its server stops."""
    async with listening(fake, single=single) as address:
        aggregator = GrpcAggregator(address, None, token)
        try:
            yield aggregator
        finally:
            await aggregator.close()
