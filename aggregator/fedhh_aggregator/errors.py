"""Service errors without a code in the shared map (``fedhh.rpc.errors``): they name theirs."""

from __future__ import annotations

import grpc

from fedhh.errors import FedhhError


class CapacityError(FedhhError):
    """Too many open rounds or too large a request (RESOURCE_EXHAUSTED)."""

    grpc_status = grpc.StatusCode.RESOURCE_EXHAUSTED


class EarlierCallOpen(FedhhError):
    """The device's earlier call is still being served: its upload still read, its long-polls
    held (UNAVAILABLE). A device whose call timed out at its end asks again at once, while the
    aggregator may still read the first; the retry passes once that ends, so the devices retry
    it with their backoff as a shed call. (It was RESOURCE_EXHAUSTED, which the Python device
    took as final: it gave up a round it could still complete. That code now means only what
    asking again cannot change, such as a message over the receive cap.)"""

    grpc_status = grpc.StatusCode.UNAVAILABLE


class CallToAbortedRound(FedhhError):
    """A device call to a round that was aborted (ABORTED); the reason is in the message."""

    grpc_status = grpc.StatusCode.ABORTED


class UploadTimeout(FedhhError):
    """A masked-vector upload did not finish before its stage's deadline (DEADLINE_EXCEEDED)."""

    grpc_status = grpc.StatusCode.DEADLINE_EXCEEDED


class OpenTimeout(FedhhError):
    """A session stream's open did not come within ``upload_idle_s`` of its challenge
    (UNAVAILABLE): the stream ends, and the device may open another, whose fresh challenge it
    signs. A device whose event loop was busy (thousands of simulated devices in one process
    starting a round at once) is slow, not wrong; it stays subject to its stage's deadline."""

    grpc_status = grpc.StatusCode.UNAVAILABLE


class SessionsBusy(FedhhError):
    """The worker holds ``max_unopened_sessions`` streams whose devices have not opened yet
    (UNAVAILABLE): devices open another after a backoff."""

    grpc_status = grpc.StatusCode.UNAVAILABLE


class JournalError(FedhhError):
    """The outcome journal (--state-dir) could not be written, so the request was refused
    rather than run unrecorded (UNAVAILABLE: retry once the disk is writable)."""

    grpc_status = grpc.StatusCode.UNAVAILABLE
