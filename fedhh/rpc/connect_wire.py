"""The Connect protocol's contract (https://connectrpc.com/docs/protocol) as both of its sides
here speak it: the port (``fedhh.rpc.connect``) and the client (``fedhh.rpc.connect_client``),
as ``fedhh.rpc.framed.frames`` is the framed port's. The client imports this, not the port, so
that a device process loads no HTTP server (``tests/unit/test_layers.py``); before, it took
these names from the port's module, and a device on Connect loaded aiohttp's server, the
port's checks and the procedures with them."""

from __future__ import annotations

import grpc

__all__ = ["CODES", "CONTENT_TYPE", "PROTOCOL_VERSION"]

CONTENT_TYPE = "application/proto"
PROTOCOL_VERSION = "1"
# Every gRPC status as Connect's code and HTTP status (the protocol's table).
CODES: dict[grpc.StatusCode, tuple[str, int]] = {
    grpc.StatusCode.CANCELLED: ("canceled", 499),
    grpc.StatusCode.UNKNOWN: ("unknown", 500),
    grpc.StatusCode.INVALID_ARGUMENT: ("invalid_argument", 400),
    grpc.StatusCode.DEADLINE_EXCEEDED: ("deadline_exceeded", 504),
    grpc.StatusCode.NOT_FOUND: ("not_found", 404),
    grpc.StatusCode.ALREADY_EXISTS: ("already_exists", 409),
    grpc.StatusCode.PERMISSION_DENIED: ("permission_denied", 403),
    grpc.StatusCode.RESOURCE_EXHAUSTED: ("resource_exhausted", 429),
    grpc.StatusCode.FAILED_PRECONDITION: ("failed_precondition", 400),
    grpc.StatusCode.ABORTED: ("aborted", 409),
    grpc.StatusCode.OUT_OF_RANGE: ("out_of_range", 400),
    grpc.StatusCode.UNIMPLEMENTED: ("unimplemented", 501),
    grpc.StatusCode.INTERNAL: ("internal", 500),
    grpc.StatusCode.UNAVAILABLE: ("unavailable", 503),
    grpc.StatusCode.DATA_LOSS: ("data_loss", 500),
    grpc.StatusCode.UNAUTHENTICATED: ("unauthenticated", 401),
}
