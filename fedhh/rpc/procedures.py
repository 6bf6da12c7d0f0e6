"""A service's unary methods served outside gRPC: the Connect port (``fedhh.rpc.connect``) and
the framed port (``fedhh.rpc.framed.server``) hand each call to the servicer method gRPC
calls, with a :class:`CallContext` in place of gRPC's context, after the credential check
gRPC's ``CredentialGate`` runs (``fedhh.rpc.serving.credential_check_for``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from fedhh.errors import ConfigError
from fedhh.rpc.serving import CredentialCheck, credential_check_for

__all__ = ["CallAbort", "CallContext", "Handler", "HeadCheck", "Procedure", "procedures"]

Handler = Callable[[Message, "CallContext"], Awaitable[Message]]
# A large request's first bytes -> None while more are needed, else who sends it; raises a
# FedhhError to refuse the call (``Procedure.head_check``).
HeadCheck = Callable[[bytes], Hashable | None]


class CallAbort(grpc.aio.AbortError):
    """Raised by :meth:`CallContext.abort`: the call ends with ``code`` and ``details``.
    An ``AbortError``, so that ``status_errors`` lets it through as it does gRPC's."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class CallContext:
    """What the servicers ask of ``grpc.aio.ServicerContext``, for a call outside gRPC:
    its metadata, its peer as gRPC writes it (so per-address limits count every port
    together), its deadline on the event loop's clock (None: none), and an ``abort`` that
    ends the call with a status."""

    __slots__ = ("_deadline", "_metadata", "_peer")

    def __init__(self, metadata: tuple[tuple[str, str], ...], peer: str,
                 deadline: float | None) -> None:
        self._metadata = metadata
        self._peer = peer
        self._deadline = deadline

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - asyncio.get_running_loop().time())

    async def abort(self, code: grpc.StatusCode, details: str = "",
                    trailing_metadata: object = ()) -> None:
        raise CallAbort(code, details)


@dataclass(frozen=True)
class Procedure:
    """One unary method: its path, its request type, the servicer's method, and the credential
    check that runs before its request is read (None: the method checks its own).

    ``head_check``: for a method whose credentials are in its request and whose request may be
    large (a masked vector), the check of the caller a port runs on the request's first bytes
    before it gives a large body one of its few turns to be read (``fedhh.rpc.connect``)."""

    path: str
    request_type: type[Message]
    handler: Handler
    check: CredentialCheck | None = None
    head_check: HeadCheck | None = None


def procedures(service: ServiceDescriptor, servicer: object,
               checks: Mapping[str, CredentialCheck] | None = None,
               only: Iterable[str] | None = None,
               head_checks: Mapping[str, HeadCheck] | None = None) -> list[Procedure]:
    """The unary methods of ``service`` (those named in ``only``, if given) served by
    ``servicer``'s methods of the same names, with the credential checks gRPC's server has
    (``checks`` as :class:`fedhh.rpc.serving.CredentialGate` takes them) and the
    ``head_checks`` of methods by name."""
    wanted = None if only is None else set(only)
    out = []
    for method in service.methods:
        if wanted is not None and method.name not in wanted:
            continue
        if method.client_streaming or method.server_streaming:
            if wanted is not None:
                raise ConfigError(f"{service.full_name}.{method.name} streams: only unary "
                                  "methods are served as procedures")
            continue
        path = f"/{service.full_name}/{method.name}"
        out.append(Procedure(path, GetMessageClass(method.input_type),
                             getattr(servicer, method.name),
                             credential_check_for(checks or {}, path),
                             (head_checks or {}).get(method.name)))
    unknown = set(head_checks or {}) - {p.path.rsplit("/", 1)[1] for p in out}
    if unknown:
        raise ConfigError(f"head checks of methods not served: {sorted(unknown)}")
    if wanted is not None and len(out) != len(wanted):
        raise ConfigError(f"{service.full_name} has no unary methods "
                          f"{sorted(wanted - {p.path.rsplit('/', 1)[1] for p in out})}")
    return out
