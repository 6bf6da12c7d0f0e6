"""Service errors without a code in the shared map (``fedhh.rpc.errors``): they name theirs."""

from __future__ import annotations

import grpc

from fedhh.errors import FedhhError


class CapacityError(FedhhError):
    """Too many open rounds or too large a request (RESOURCE_EXHAUSTED)."""

    grpc_status = grpc.StatusCode.RESOURCE_EXHAUSTED


class CallToAbortedRound(FedhhError):
    """A device call to a round that was aborted (ABORTED); the reason is in the message."""

    grpc_status = grpc.StatusCode.ABORTED


class UploadTimeout(FedhhError):
    """A masked-vector upload did not finish before its stage's deadline (DEADLINE_EXCEEDED)."""

    grpc_status = grpc.StatusCode.DEADLINE_EXCEEDED


class JournalError(FedhhError):
    """The outcome journal (--state-dir) could not be written, so the request was refused
    rather than run unrecorded (UNAVAILABLE: retry once the disk is writable)."""

    grpc_status = grpc.StatusCode.UNAVAILABLE
