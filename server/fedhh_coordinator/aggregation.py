"""The aggregation service as the coordinator's link sees it: one protocol for each round mode.

A single aggregator runs unsharded rounds and releases one sum with its evidence
(``ReleaseEvidence``); a combiner runs sharded rounds over its serving workers and releases one
total with every shard's evidence (``list[ShardRelease]``). Both settle a round the same way
(:class:`RoundService`: the result behind a release hook, the service's word on the round, a
cancel); they differ only in how a round is opened. gRPC implementation:
``fedhh_coordinator.control``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import numpy as np

from fedhh.errors import FedhhError
from fedhh.secagg import ReleaseEvidence
from fedhh.secagg.config import SignedConfig
from fedhh.secagg.shards import ShardRelease

ReleaseT = TypeVar("ReleaseT", covariant=True)


@dataclass(frozen=True)
class AggregatorOutcome:
    """What the aggregation service says about a round: ``state`` "never" (a journaling service
    has no record of it: it never opened), "unknown" (no record, no journal: nobody can say),
    "running", "aborted" or "released"; ``reached_unmask`` whether any unmasking request went
    out; ``sum_available`` whether a released sum is still held for the coordinator."""

    state: str
    reached_unmask: bool = False
    sum_available: bool = False
    contributors: int | None = None
    reason: str = ""
    stage: str = ""  # the protocol stage of a running round
    stage_devices: dict[str, int] = field(default_factory=dict)  # accepted per closed stage
    declined: int | None = None  # members that gave up their seats; None: the service not said
    watched: bool = False  # answered as a long-poll (``RoundService.watch``)


@dataclass(frozen=True)
class DeviceAddresses:
    """Where devices reach an aggregator: its gRPC address, its Connect URL for devices that
    cannot speak gRPC (browsers; empty: it serves none), and its framed session port (HOST:PORT;
    empty: none). All go into each task."""

    grpc: str
    web_url: str = ""
    session: str = ""


class AggregatorUnavailable(FedhhError):
    """The aggregation service did not answer (down, restarting, unreachable)."""


class AggregatorRefused(FedhhError):
    """The aggregation service answered and refused the coordinator (its control token, its
    permissions): no wait makes it answer otherwise."""


class ControlTokenRefused(AggregatorRefused):
    """The aggregation service refused the coordinator's control token: it holds another.
    No attempt is settled on it (``NetworkLink``): the service still knows what became of
    the round, and the token the operator fixes lets it say, where a settlement now would
    charge at n_min a round that may have cost less or nothing. The coordinator stops."""


class RoundService(Protocol[ReleaseT]):
    """Settling a round at the service that runs it."""

    async def result(self, round_id: bytes, dimension: int, timeout_s: float,
                     on_release: Callable[[ReleaseT], Awaitable[None]]
                     ) -> tuple[np.ndarray, int]:
        """Wait for the round's sum, of ``dimension`` elements (its config's); another's, or
        another round's answer, is refused. ``on_release(release)`` runs before it is read.
        Raises RoundAborted (nothing released; ``reached_unmask`` says if unmasking began;
        the hook's own RoundAborted as it raised it), TimeoutError, AggregatorUnavailable
        (a failure a later read may not meet) or AggregatorRefused (any other)."""
        ...

    async def outcome(self, round_id: bytes) -> AggregatorOutcome: ...

    async def watch(self, round_id: bytes, seen: AggregatorOutcome | None, wait_s: float
                    ) -> AggregatorOutcome:
        """``outcome``, once the running round no longer shows ``seen``'s stage and counts,
        or after ``wait_s``; ``watched`` unset: the service answered at once (a version
        before the long-poll)."""
        ...

    async def cancel(self, round_id: bytes) -> None: ...

    async def delivered(self, round_id: bytes) -> None:
        """The sum ``result`` read is stored with its round's release: the service, which
        held it until then, drops it as delivered. Returns at once and raises nothing: the
        service is told in the background, again while it cannot be reached; unconfirmed,
        it drops the sum at its --result-ttl."""
        ...

    async def drop(self, round_id: bytes) -> None:
        """The sum ``result`` held is not to be read (its release refused, its charge
        failed): the service drops it. Returns at once and raises nothing, told as
        ``delivered`` is."""
        ...


class SingleAggregator(RoundService[ReleaseEvidence], Protocol):
    """An aggregator running unsharded rounds."""

    async def open_round(self, signed: SignedConfig) -> None: ...


class ShardCombiner(RoundService[list[ShardRelease]], Protocol):
    """A combiner running sharded rounds on its workers."""

    async def open_round(self, round_id: bytes, shards: list[tuple[SignedConfig, int]]
                         ) -> None:
        """Open a round of ``shards``: (signed shard config, worker index) each."""
        ...


class AggregatorApi(Protocol):
    """The service at the coordinator's ``--aggregator`` address: either kind answers there."""

    @property
    def single(self) -> SingleAggregator: ...

    @property
    def combiner(self) -> ShardCombiner: ...

    async def workers(self) -> list[tuple[int, DeviceAddresses]] | None:
        """A combiner's serving workers (index, where devices reach it); None: a single
        aggregator."""
        ...
