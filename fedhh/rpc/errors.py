"""The one place where domain errors become gRPC status codes.

Servicer methods are wrapped with ``@status_errors``: a ``FedhhError`` aborts the call with the
mapped code and its message; anything else is a bug, logged with its traceback and answered
INTERNAL with a generic message (no internals leak to callers).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from fedhh.errors import (
    AuthenticationError,
    ConfigError,
    ConflictError,
    DatasetError,
    FedhhError,
    NotFoundError,
    PrivacyError,
    RateLimited,
    StateError,
    StoreDamaged,
)

log = logging.getLogger(__name__)

_CODES: tuple[tuple[type[BaseException], grpc.StatusCode], ...] = (
    (AuthenticationError, grpc.StatusCode.UNAUTHENTICATED),
    (RateLimited, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (StoreDamaged, grpc.StatusCode.DATA_LOSS),
    (ConflictError, grpc.StatusCode.ALREADY_EXISTS),
    (StateError, grpc.StatusCode.FAILED_PRECONDITION),
    (PrivacyError, grpc.StatusCode.FAILED_PRECONDITION),
    (ConfigError, grpc.StatusCode.INVALID_ARGUMENT),
    (DatasetError, grpc.StatusCode.INVALID_ARGUMENT),
)

T = TypeVar("T")
# A status code by its number, as a refusal event or a framed stream's end carries it.
CODES_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}
# Status details travel as metadata, which gRPC clients cap at 16 KiB by default: a message that
# quoted a caller's megabyte would reach it as RESOURCE_EXHAUSTED instead of its real status.
# gRPC percent-encodes each byte of the details outside printable ASCII as three, so the cap
# counts UTF-8 bytes: 1,000 characters of four-byte text would be 12,000 bytes on the wire.
MAX_DETAILS = 1000


def bounded_details(text: str) -> str:
    """``text`` cut to ``MAX_DETAILS`` bytes of UTF-8, at a character's end, "..." added where
    it was cut: a status's details on every port (gRPC's through :func:`details_of`, a framed
    stream's end whatever made it)."""
    # (a lone surrogate, which no protobuf string or HTTP/2 header carries, becomes "?")
    data = text.encode("utf-8", "replace")
    if len(data) <= MAX_DETAILS:
        return data.decode("utf-8")
    # (a cut inside a character leaves its first bytes: "ignore" keeps only whole ones)
    return data[:MAX_DETAILS].decode("utf-8", "ignore") + "..."


def details_of(error: BaseException) -> str:
    """The error's message on one line, cut to ``MAX_DETAILS`` bytes (:func:`bounded_details`)."""
    return bounded_details(" ".join(str(error).split()))


def status_of(error: BaseException) -> grpc.StatusCode:
    """The status code for a domain error (subclasses may define ``grpc_status``)."""
    custom = getattr(error, "grpc_status", None)
    if isinstance(custom, grpc.StatusCode):
        return custom
    for kind, code in _CODES:
        if isinstance(error, kind):
            return code
    return grpc.StatusCode.INVALID_ARGUMENT if isinstance(error, FedhhError) else \
        grpc.StatusCode.INTERNAL


def status_errors(
    method: Callable[..., Awaitable[T]],
) -> Callable[..., Awaitable[T]]:
    """Wrap an async unary servicer method: domain errors abort with their status code."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> T:
        # The abort is raised after the except blocks, not in them: there it would chain the
        # domain error (and every frame of its traceback) to gRPC's AbortError, which gRPC's
        # call objects keep in reference cycles that only the cycle collector frees, and the
        # services run it seldom (serving.tune_gc).
        try:
            return await method(self, request, context)
        except FedhhError as error:
            code, details = status_of(error), details_of(error)
        except (grpc.aio.AbortError, grpc.aio.UsageError, grpc.aio.InternalError):
            # (InternalError: gRPC's core refused an operation of a call that ended under the
            # handler, a stream's write after its client cancelled or left, ExecuteBatchError,
            # which gRPC ignores for a closed client; taken for a bug here, every such client
            # made an ERROR with a traceback)
            raise
        except Exception:
            log.exception("unexpected error in %s", method.__qualname__)
            code, details = grpc.StatusCode.INTERNAL, "internal error"
        await context.abort(code, details)
        raise AssertionError("unreachable")  # pragma: no cover - abort always raises

    return wrapper
