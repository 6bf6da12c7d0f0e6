"""What became of a round: the outcome GetOutcome answers, and the tombstones that keep it once
the round itself is dropped. One cache serves the aggregator's registry and the combiner's.

A tombstone refuses a reopening of its round id and tells late calls that the round is gone.
Tombstones are bounded in number (the oldest go first) and in age; with a journal, a tombstone
pruned here leaves the journal too (the journal keeps the live rounds and the tombstones).
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, Protocol, TypeVar

from fedhh.errors import ConflictError, FedhhError, NotFoundError, StateError
from fedhh.secagg import RoundConfig, Stage
from fedhh_aggregator.journal import Journal
from fedhh_aggregator.rounds import RoundState, check_last_deadline, round_label

__all__ = ["OutcomeState", "RecordedOutcome", "RoundBook", "ShardOutcome", "Tombstone",
           "Tombstones"]

log = logging.getLogger(__name__)


class OutcomeState(StrEnum):
    UNKNOWN = "unknown"
    RUNNING = "running"
    ABORTED = "aborted"
    RELEASED = "released"


@dataclass(frozen=True)
class ShardOutcome:
    """One shard of a sharded round, as the combiner's GetOutcome reports it."""

    round_id: bytes
    worker: int
    state: OutcomeState
    stage: Stage | None = None  # RUNNING: the open stage
    reached_unmask: bool = False
    abort_reason: str = ""
    num_contributors: int = 0
    declined: int | None = None  # members that gave up their seats; None: not known


@dataclass(frozen=True)
class RecordedOutcome:
    """What GetOutcome answers about a round."""

    state: OutcomeState
    session_id: bytes = b""
    stage: Stage | None = None  # RUNNING: the open stage
    reached_unmask: bool = False
    abort_reason: str = ""
    delivered: bool = False
    sum_available: bool = False
    num_contributors: int = 0
    stage_devices: tuple[tuple[Stage, int], ...] = ()  # accepted per closed stage
    shards: tuple[ShardOutcome, ...] = ()  # a sharded round's (the combiner's answer)
    # Members that gave up their seats (Decline); None: not known (a record restored after a
    # restart, kept in memory as stage_devices is; a sharded round none of whose workers said).
    declined: int | None = None


@dataclass(frozen=True)
class Tombstone:
    """A dropped round's outcome (RELEASED or ABORTED), why it was dropped (for "gone" errors)
    and when (Unix time)."""

    outcome: RecordedOutcome
    why: str
    at: float

    @property
    def final_state(self) -> RoundState:
        return RoundState.RELEASED if self.outcome.state == OutcomeState.RELEASED else \
            RoundState.ABORTED


T = TypeVar("T", bound=Tombstone)


class Tombstones(Generic[T]):
    """The tombstones by round id, oldest first: at most ``max_count``, none older than
    ``ttl_s``. ``live`` is the owner's map of the rounds it still holds (the journal keeps
    those too); ``on_drop`` is told of each tombstone pruned."""

    def __init__(self, max_count: int, ttl_s: float, journal: Journal | None,
                 live: Mapping[bytes, object],
                 on_drop: Callable[[T], object] | None = None) -> None:
        self.max_count = max_count
        self.ttl_s = ttl_s
        self._journal = journal
        self._live = live
        self._on_drop = on_drop
        self._items: OrderedDict[bytes, T] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, round_id: object) -> bool:
        return round_id in self._items

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._items)

    def get(self, round_id: bytes) -> T | None:
        return self._items.get(round_id)

    def bury(self, round_id: bytes, tombstone: T, *, prune: bool = True) -> None:
        """Keep ``tombstone`` as the newest; ``prune=False`` while a journal is replayed (a
        prune then would drop the records not yet replayed)."""
        self._items.pop(round_id, None)
        self._items[round_id] = tombstone
        if prune:
            self.prune()

    def prune(self, now: float | None = None) -> None:
        """Drop tombstones beyond the count and age bounds (oldest first), and from the journal
        every record of a round neither live nor buried."""
        oldest = (time.time() if now is None else now) - self.ttl_s
        dropped = False
        while self._items:
            round_id, tombstone = next(iter(self._items.items()))
            if len(self._items) <= self.max_count and tombstone.at >= oldest:
                break
            del self._items[round_id]
            dropped = True
            if self._on_drop is not None:
                self._on_drop(tombstone)
        journal = self._journal
        if journal is not None and (dropped or journal.records.keys() - self._live.keys()
                                    - self._items.keys()):
            journal.keep_only([*self._live, *self._items])

    def missing(self, round_id: bytes) -> FedhhError:
        """The error for a round id that is not live: gone (StateError), or never known."""
        tombstone = self._items.get(round_id)
        if tombstone is not None:
            return StateError(f"round {round_label(round_id)!r} "
                              f"({tombstone.outcome.state.value}) is gone: {tombstone.why}")
        return NotFoundError(f"no round {round_label(round_id)!r}")

    def final_state(self, round_id: bytes) -> RoundState:
        """A buried round's state (CancelRound of a finished round); NotFoundError if none."""
        tombstone = self._items.get(round_id)
        if tombstone is None:
            raise NotFoundError(f"no round {round_label(round_id)!r}")
        return tombstone.final_state


class _Cancellable(Protocol):
    # Its released sum was sent whole to a GetResult that asked it held (``hold``).
    sent_held: bool

    async def cancel(self) -> RoundState: ...


R = TypeVar("R", bound=_Cancellable)


class RoundBook(ABC, Generic[R, T]):
    """What the aggregator's and the combiner's registries share: the rounds they hold by round
    id, the tombstones of the dropped ones, lookups and cancelling."""

    sum_name = "sum"  # what a released round holds, for messages
    # who reads and settles its sums, for messages: an aggregator cannot tell whether it
    # serves the coordinator or is a combiner's worker (before, a worker blamed the
    # coordinator for what its combiner did not say)
    fetcher = "the coordinator (or, on a worker, its combiner)"

    def __init__(self, journal: Journal | None, max_tombstones: int, tombstone_ttl_s: float,
                 on_drop: Callable[[T], object] | None = None) -> None:
        self.journal = journal
        self._rounds: dict[bytes, R] = {}
        self._tombstones: Tombstones[T] = Tombstones(max_tombstones, tombstone_ttl_s, journal,
                                                     self._rounds, on_drop)

    def __len__(self) -> int:
        return len(self._rounds)

    @property
    def durable(self) -> bool:
        """True iff outcomes survive a restart (a journal is kept)."""
        return self.journal is not None

    def retried_open(self, round_id: bytes, same: Callable[[R], bool], what: str,
                     deadlines: Iterable[tuple[RoundConfig, str]], max_round_s: float
                     ) -> R | None:
        """The round an open of ``round_id`` retries (``same``: it brings the round's own
        ``what``, config or plan), or None where a new round may open. One order for the
        aggregator and the combiner: a retry and a finished round are answered before the
        ``deadlines`` (each config's, named) are checked, so a retried open after the last
        deadline gets its round or 'has already finished', not 'the last deadline has passed'
        (before, the combiner checked the deadlines first, the aggregator after)."""
        existing = self._rounds.get(round_id)
        if existing is not None:
            if same(existing):
                return existing
            raise ConflictError(f"round {round_label(round_id)!r} is already open with "
                                f"another {what}")
        self._tombstones.prune()
        if round_id in self._tombstones:
            raise ConflictError(f"round {round_label(round_id)!r} has already finished")
        for config, name in deadlines:
            check_last_deadline(config, max_round_s, name)
        return None

    def by_round(self, round_id: bytes) -> R:
        round_ = self._rounds.get(round_id)
        if round_ is None:
            raise self._tombstones.missing(round_id)
        return round_

    @abstractmethod
    def forget(self, round_: R, why: str, *, delivered: bool = False) -> None:
        """Drop a round and everything it holds; keep its outcome as a tombstone."""

    def _expired(self, round_: R) -> None:
        # (a held sum sent whole was read, or at least received: before, it was said never
        # fetched, which the coordinator that read it and lost its 'delivered' was told)
        self.forget(round_, f"its {self.sum_name} was sent and never said stored by "
                    f"{self.fetcher} within --result-ttl" if round_.sent_held
                    else "expired before its outcome was fetched")

    async def cancel(self, round_id: bytes) -> RoundState:
        """Abort a running round, or drop a finished one's sum; idempotent."""
        round_ = self._rounds.get(round_id)
        if round_ is None:
            return self._tombstones.final_state(round_id)
        state = await round_.cancel()
        if state == RoundState.RELEASED:
            self.forget(round_, f"cancelled by {self.fetcher}; the {self.sum_name} was dropped")
        log.info("round cancelled", extra={"round_id": round_label(round_id),
                                           "state": state.value})
        return state
