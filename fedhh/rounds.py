"""The round driver: query -> collect a sum through an ``AggregatorLink`` -> charge -> advance.

One driver runs the rounds of a discovery for the simulator (``fedhh.simulation``, with an
in-memory link that draws the sum exactly) and for the coordinator (with its gRPC link to the
secure-aggregation service); the rules below are written once, here.

A round is tried in *attempts*. Each attempt is persisted (``RunStore``) before anything is
sent, and ends in one of these states:

- ``released``: the sum reached us; the privacy spend was recorded *before* the sum was read
  (the link calls the driver's charge hook in between), then the tree advanced, in one commit.
- ``aborted``: nothing was unmasked (too few devices, an abort before unmasking, a lost
  aggregator that provably had not started unmasking). It costs nothing; the round is retried.
- ``lost``: unmasking began, or may have begun, and no sum reached us (an abort after unmasking
  began, the aggregator or the coordinator stopped in between, an outcome nobody can vouch for).
  Whoever holds the sum, it may exist: the attempt is charged like a release, and the round is
  retried. Its reason ends "(unmasking may have begun: charged)": the driver is told only that a
  sum may exist (``RoundAborted.reached_unmask``), not whether unmasking did begin.

Charge on unmask: any attempt that reached unmasking is charged, whatever happens afterwards, at
the number of contributors the link could verify (``n_min``, the floor every honest device
enforces, when nothing can be verified). Before an attempt opens, the driver checks that the
remaining budget can pay for it at ``n_min``; an attempt is never opened on credit. Attempts of a
round are bounded (``max_attempts``, counted in the store, so restarts do not reset it); an
attempt a store outage interrupted before it left the process is tried again as it stands, not
counted (``RoundDriver.retry_unsent``).

After a restart ``resume`` settles every attempt a previous process left open by asking the link
what became of it (``AggregatorLink.recover``), before the next attempt opens.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Protocol

import numpy as np

from fedhh.errors import FedhhError, PrivacyError, RoundAborted, StateError
from fedhh.privacy import PrivacyLedger
from fedhh.server import PrefixTree, RoundQuery, RoundReport, TreeState

log = logging.getLogger(__name__)

# ``charge(contributors, over)``: ``over`` names the reports the sum is over, as the link
# reads them from the release (a collision-resistant digest: equal only for the same reports).
# It is stored with the charge, so that a process resuming the attempt reads a held sum under
# that charge only where it is over the same reports (``RoundDriver._charge_hook``).
ChargeHook = Callable[[int, str], Awaitable[None]]


class AttemptState(StrEnum):
    OPEN = "open"
    RELEASING = "releasing"
    RELEASED = "released"
    ABORTED = "aborted"
    LOST = "lost"


@dataclass(frozen=True)
class Released:
    """A round's sum as the link read it, after the charge hook accepted it."""

    sums: np.ndarray
    contributors: int
    true_counts: np.ndarray | None = None  # simulation only: actual false positives
    # Awaited once the release is stored (``RoundDriver._advance``): the aggregation service
    # holds the sum until then, so that a store failing in between loses nothing (the attempt
    # is resumed from the held sum, not run again). It returns at once (the coordinator's
    # tells the service in the background, again while it is away); unconfirmed, the service
    # drops the sum at its --result-ttl; a restart before it finds the release stored, and
    # never reads the held sum again.
    stored: Callable[[], Awaitable[None]] | None = field(default=None, compare=False,
                                                         repr=False)


@dataclass(frozen=True)
class AttemptId:
    run_id: str
    round: int
    attempt: int

    @property
    def label(self) -> str:
        """The one way consoles and logs name an attempt."""
        return f"round {self.round} attempt {self.attempt}"


class Recovery(StrEnum):
    """What a link can say about an attempt a previous process left unsettled."""

    NOTHING = "nothing"  # provably nothing was unmasked: free
    RESUME = "resume"  # still running, or its sum is still held for us: collect it again
    LOST = "lost"  # unmasking began (or nobody can say it did not): charge


@dataclass(frozen=True)
class Recovered:
    verdict: Recovery
    reason: str
    contributors: int | None = None
    # The attempt never left this process (NOTHING): no aggregator heard of it, no device was
    # given its task or charged for it (``RoundDriver.retry_unsent``).
    unsent: bool = False
    # An unsent attempt that ``round`` tries again as it stands, not counted, whatever
    # ``retry_unsent`` says: what stopped it was no crash a restart meets again but one the
    # operator fixed before it (the aggregation service refusing the coordinator's control
    # token, ``NetworkLink``).
    retry: bool = False


class AggregatorLink(Protocol):
    """How the driver obtains a round's sum (the simulator's and the coordinator's links)."""

    async def collect(self, attempt: AttemptId, query: RoundQuery,
                      charge: ChargeHook) -> Released:
        """Run the attempt. Once a sum exists and before it is read, await ``charge(n, over)``
        with the verified number of contributors n and whose reports the sum is over
        (``ChargeHook``; it may raise to refuse the sum: drop it unread).
        Raises RoundAborted if the attempt released nothing usable."""
        ...

    async def recover(self, attempt: AttemptId) -> Recovered:
        """What became of an attempt that a previous process left open."""
        ...

    async def resume(self, attempt: AttemptId, query: RoundQuery,
                     charge: ChargeHook) -> Released:
        """Collect an attempt that ``recover`` said may still be collected (as ``collect``)."""
        ...


@dataclass(frozen=True)
class AttemptRecord:
    round: int
    attempt: int
    state: AttemptState
    reason: str = ""
    contributors: int = 0
    summary: dict[str, Any] = field(default_factory=dict)
    # Whose reports the charge was over (``ChargeHook``'s ``over``); None where the attempt
    # was not charged at a read, or by a version that did not store it.
    over: str | None = None


class RunStore(Protocol):
    """Persistence of one run's attempts, ledger and tree state; every method is one
    transaction (a crash leaves the old state or the new one)."""

    def attempts(self) -> list[AttemptRecord]: ...

    def open_attempt(self, round_: int) -> int:
        """A new attempt of the round (numbered after every earlier one); returns its number."""
        ...

    def abort_attempt(self, round_: int, attempt: int, reason: str) -> None: ...

    def charge_attempt(self, round_: int, attempt: int, state: AttemptState,
                       contributors: int | None, ledger: dict[str, Any], reason: str = "",
                       over: str | None = None) -> None:
        """Record the charge and the new ledger together; ``state`` is RELEASING (the sum is
        about to be read) or LOST; ``contributors`` None keeps the recorded count; ``over``
        (``AttemptRecord.over``) None keeps the recorded one."""
        ...

    def release_attempt(self, round_: int, attempt: int, tree: dict[str, Any],
                        summary: dict[str, Any], done: bool) -> None:
        """Commit a released attempt's outcome: the new tree state and its summary."""
        ...


class MemoryRunStore:
    """A RunStore in memory: the simulator's, and the fake of the driver's unit tests."""

    def __init__(self) -> None:
        self.records: list[AttemptRecord] = []
        self.ledger: dict[str, Any] | None = None
        self.tree: dict[str, Any] | None = None
        self.done = False

    def attempts(self) -> list[AttemptRecord]:
        return list(self.records)

    def _find(self, round_: int, attempt: int) -> int:
        for i, r in enumerate(self.records):
            if (r.round, r.attempt) == (round_, attempt):
                return i
        raise StateError(f"no attempt {round_}.{attempt}")

    def open_attempt(self, round_: int) -> int:
        number = 1 + sum(r.round == round_ for r in self.records)
        self.records.append(AttemptRecord(round_, number, AttemptState.OPEN))
        return number

    def abort_attempt(self, round_: int, attempt: int, reason: str) -> None:
        i = self._find(round_, attempt)
        self.records[i] = replace(self.records[i], state=AttemptState.ABORTED, reason=reason)

    def charge_attempt(self, round_: int, attempt: int, state: AttemptState,
                       contributors: int | None, ledger: dict[str, Any], reason: str = "",
                       over: str | None = None) -> None:
        i = self._find(round_, attempt)
        record = self.records[i]
        self.records[i] = replace(record, state=state, reason=reason, contributors=(
            record.contributors if contributors is None else contributors),
            over=record.over if over is None else over)
        self.ledger = ledger

    def release_attempt(self, round_: int, attempt: int, tree: dict[str, Any],
                        summary: dict[str, Any], done: bool) -> None:
        i = self._find(round_, attempt)
        self.records[i] = replace(self.records[i], state=AttemptState.RELEASED, summary=summary)
        self.tree = tree
        self.done = done


RoundCallback = Callable[[AttemptId, RoundReport], None]
AbortCallback = Callable[[AttemptId, str], None]


@dataclass
class RoundDriver:
    """Drives one discovery's rounds (module docstring).

    ``ledger`` is None for mechanisms without a local privacy budget (the simulator's
    baselines); ``round_offset`` shifts ledger indices (the second run of the two-run mode);
    ``min_contributors`` is n_min, the count charged when none can be verified.
    """

    run_id: str
    tree: PrefixTree
    store: RunStore
    link: AggregatorLink
    ledger: PrivacyLedger | None
    min_contributors: int
    max_attempts: int = 5
    round_offset: int = 0
    retry_delay_s: float = 0.0
    on_round: RoundCallback | None = None
    on_abort: AbortCallback | None = None
    cancelled: Callable[[], bool] = field(default=lambda: False)
    # Awaited by the pause after an aborted attempt beside its timer: it returns once a cancel
    # may have been asked, and ``cancelled`` is asked again. None: the pause runs its length.
    cancel_asked: Callable[[], Awaitable[object]] | None = None
    # What left the attempts ``resume`` settles open, as their abort reasons begin.
    interrupted_by: str = "the coordinator stopped"
    # How the charge that lets a sum be read is written (``_charge_hook``): given the write,
    # it runs it; None, at once. The coordinator's runner retries it while its store is
    # briefly unavailable, the sum waiting unread meanwhile (``Runner.write_charge``).
    write_charge: Callable[[Callable[[], None]], Awaitable[None]] | None = None
    # Whether ``resume`` leaves an open attempt of the next round that never left this process
    # (``Recovered.unsent``) open, for ``round`` to try again as the same attempt, not counted
    # as another against ``max_attempts``. The coordinator's runner sets it after a store
    # outage it waited out: before, each attempt a flapping database interrupted in its
    # check-in was settled aborted and counted, and an outage through one round failed the
    # run ("released nothing in 5 attempts") though it had cost nothing. Not after a restart:
    # a coordinator that stops in every check-in (killed for its memory) would retry for ever.
    retry_unsent: bool = False
    # resume's attempt left open for ``round``: its round, number and the reason it is
    # settled with if it is not tried again (the run cancelled, the budget refusing it).
    _unsent: tuple[int, int, str] | None = field(default=None, init=False, repr=False)

    async def run(self, state: TreeState) -> TreeState:
        """Settle what a previous process left open, then run rounds until the tree is done."""
        state = await self.resume(state)
        while not state.done:
            state = await self.round(state)
        return state

    async def round(self, state: TreeState) -> TreeState:
        """Attempts of the state's next round until one releases; the new state."""
        query = self.tree.query(state)
        while True:
            again, self._unsent = self._unsent, None
            try:
                number = self._next_attempt(query.round, again)
            except (RunCancelled, StateError, PrivacyError):
                self._settle_unsent(again)
                raise
            if again is None:
                number = self.store.open_attempt(query.round)
            attempt = AttemptId(self.run_id, query.round, number)
            try:
                released = await self.link.collect(attempt, query, self._charge_hook(attempt))
            except RoundAborted as aborted:
                # Charged already if the abort came after the charge hook (a link that lost
                # its aggregator while reading the sum): the store says so.
                self._settle_abort(attempt, aborted, self._stored_state(attempt))
                if self.cancelled():
                    raise RunCancelled("cancelled by the operator") from None
                await self._pause()
                continue
            return await self._advance(attempt, query, state, released)

    def _next_attempt(self, round_: int, again: tuple[int, int, str] | None) -> int:
        """The number of the round's next attempt (``again``'s, if resume left one open), once
        the run may go on: not cancelled, under ``max_attempts``, the budget paying for it."""
        # (a cancel asked during the pause after an abort: before, the loop opened one more
        # attempt only to abort it in its check-in, and where the aborted attempt was the
        # round's last allowed one, the run ended failed, "released nothing in N attempts",
        # instead of cancelled)
        if self.cancelled():
            raise RunCancelled("cancelled by the operator")
        tried = [r for r in self.store.attempts()
                 if r.round == round_ and (again is None or r.attempt != again[1])]
        if len(tried) >= self.max_attempts:
            last = f" (the last: {tried[-1].reason})" if tried[-1].reason else ""
            raise StateError(f"round {round_} released nothing in {len(tried)} "
                             f"attempt{'' if len(tried) == 1 else 's'}{last}; giving up")
        number = again[1] if again is not None else \
            1 + max((r.attempt for r in tried), default=0)
        self._check_budget(round_, number)
        return number

    async def _pause(self) -> None:
        """Wait ``retry_delay_s`` before the next attempt, or until a cancel is asked
        (``cancel_asked``; the loop then ends the run). Before, a cancel waited the pause out,
        up to ``retry_delay_s`` (the coordinator's: 1 s)."""
        if self.cancel_asked is None:
            await asyncio.sleep(self.retry_delay_s)
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + self.retry_delay_s
        while not self.cancelled() and (left := until - loop.time()) > 0:
            # (asyncio.wait, not wait_for: Python 3.11's wait_for can lose a cancel of this
            # task that comes as the cancel is asked, gh-86296)
            asked = asyncio.ensure_future(self.cancel_asked())
            try:
                await asyncio.wait({asked}, timeout=left)
            finally:
                asked.cancel()

    async def resume(self, state: TreeState) -> TreeState:
        """Settle every attempt left open or releasing by a previous process; the state after
        it (advanced if one of them could still be collected)."""
        for record in self.store.attempts():
            if record.state not in (AttemptState.OPEN, AttemptState.RELEASING):
                continue
            attempt = AttemptId(self.run_id, record.round, record.attempt)
            recovered = await self.link.recover(attempt)
            log.info("settling %s of run %s: %s (%s)", attempt.label, self.run_id,
                     recovered.verdict.value, recovered.reason)
            reason = f"{self.interrupted_by}; {recovered.reason}"
            if (recovered.verdict is Recovery.RESUME and not state.done
                    and record.round == state.next_round):
                query = self.tree.query(state)
                try:
                    released = await self.link.resume(
                        attempt, query, self._charge_hook(attempt, record))
                except RoundAborted as aborted:
                    self._settle_abort(attempt, aborted, self._stored_state(attempt))
                    continue
                state = await self._advance(attempt, query, state, released)
            elif recovered.verdict is Recovery.NOTHING and record.state is AttemptState.OPEN:
                if recovered.unsent and (self.retry_unsent or recovered.retry):
                    self._settle_unsent(self._unsent)  # (only the latest is tried again)
                    self._unsent = (record.round, record.attempt, reason)
                    continue
                self._settle_abort(attempt, RoundAborted(reason))
            else:
                self._settle_abort(attempt, RoundAborted(
                    reason, reached_unmask=True, contributors=recovered.contributors),
                    record.state)
        if self._unsent is not None and (state.done or self._unsent[0] != state.next_round):
            self._settle_unsent(self._unsent)
            self._unsent = None
        if self._unsent is not None:
            log.info("round %d attempt %d of run %s is tried again as it stands, not counted "
                     "as another attempt: %s", *self._unsent[:2], self.run_id, self._unsent[2])
        return state

    def _settle_unsent(self, unsent: tuple[int, int, str] | None) -> None:
        """Settle an attempt resume left open that is not tried again, as resume would have
        (aborted, free)."""
        if unsent is not None:
            self._settle_abort(AttemptId(self.run_id, unsent[0], unsent[1]),
                               RoundAborted(unsent[2]))

    # ---- the rules ----------------------------------------------------------------------------
    def _index(self, round_: int) -> int:
        return self.round_offset + round_ - 1

    def _check_budget(self, round_: int, attempt: int) -> None:
        """Refuse to open an attempt that the budget could not pay for at n_min."""
        if self.ledger is None:
            return
        check = self.ledger.check(self._index(round_), self.min_contributors, attempt=attempt,
                                  shown_round=round_)
        if not check.accepted:
            raise PrivacyError(f"privacy budget refused round {round_} before it opened: "
                               f"{check.reason}")

    def _record(self, attempt: AttemptId, contributors: int, force: bool = False
                ) -> dict[str, Any]:
        if self.ledger is None:
            return {}
        self.ledger = self.ledger.record(self._index(attempt.round), contributors,
                                         attempt=attempt.attempt, force=force,
                                         shown_round=attempt.round)
        return self.ledger.to_dict()

    def _charge_hook(self, attempt: AttemptId, prior: AttemptRecord | None = None
                     ) -> ChargeHook:
        """``prior`` RELEASING: charged by the process that opened the attempt, before it
        stopped; the sum the link reads now is that one only if it is over the same reports
        (the ``over`` stored with the charge; its count the same). Another sum (a service
        that rebuilt it from other shards, or from other survivors, after a restart) had its
        spend never recorded: refused unread, the attempt settled lost at its charge.
        Before, the count alone was compared: a sum over other reports of the same count
        (a shard lost outside the total, charged n_min whichever shards it holds) was read.
        A charge stored by a version that kept no ``over`` cannot vouch for any sum: its
        sum is refused as well (the round runs again, charged again, rather than a sum
        read that may never have been charged)."""
        async def charge(contributors: int, over: str) -> None:
            if prior is not None and prior.state is AttemptState.RELEASING:
                refusal = self._other_sum(prior, contributors, over)
                if refusal:
                    raise RoundAborted(f"the sum held for {attempt.label} {refusal}: refused "
                                       "unread", reached_unmask=True)
                return
            try:
                ledger = self._record(attempt, contributors)
            except PrivacyError as refused:
                # The sum exists (unmasking is done): it is charged all the same, and never
                # read; the run stops over its budget.
                ledger = self._record(attempt, contributors, force=True)
                self.store.charge_attempt(attempt.round, attempt.attempt, AttemptState.LOST,
                                          contributors, ledger, f"charged beyond the budget, "
                                          f"its sum never read: {refused}")
                raise
            def write() -> None:
                self.store.charge_attempt(attempt.round, attempt.attempt,
                                          AttemptState.RELEASING, contributors, ledger,
                                          over=over)

            if self.write_charge is None:
                write()
            else:
                await self.write_charge(write)

        return charge

    @staticmethod
    def _other_sum(prior: AttemptRecord, contributors: int, over: str) -> str:
        """Why a sum read after a restart is not the one ``prior`` was charged for; "" if
        it is."""
        if contributors != prior.contributors:
            return (f"has {contributors} contributors, not the {prior.contributors} charged "
                    "for it before the restart")
        if prior.over is None:
            return ("was charged before the restart by a version that did not store whose "
                    "reports the charge was over")
        if over != prior.over:
            return (f"is over other reports than the one charged before the restart (at the "
                    f"same {contributors} contributors)")
        return ""

    def _stored_state(self, attempt: AttemptId) -> AttemptState:
        return next(r.state for r in self.store.attempts()
                    if (r.round, r.attempt) == (attempt.round, attempt.attempt))

    def _settle_abort(self, attempt: AttemptId, aborted: RoundAborted,
                      prior: AttemptState = AttemptState.OPEN) -> None:
        """An attempt that released nothing usable: free unless unmasking may have begun, else
        charged (once: an attempt already charged before a restart is not charged again)."""
        if prior is AttemptState.RELEASING:
            self.store.charge_attempt(attempt.round, attempt.attempt, AttemptState.LOST, None,
                                      self._ledger_dict(), f"{aborted.reason} (charged)")
        elif aborted.reached_unmask:
            contributors = aborted.contributors or self.min_contributors
            ledger = self._record(attempt, contributors, force=True)
            self.store.charge_attempt(attempt.round, attempt.attempt, AttemptState.LOST,
                                      contributors, ledger,
                                      f"{aborted.reason} (unmasking may have begun: charged)")
        else:
            self.store.abort_attempt(attempt.round, attempt.attempt, aborted.reason)
        log.warning("%s of run %s released nothing: %s", attempt.label, self.run_id,
                    aborted.reason)
        if self.on_abort is not None:
            self.on_abort(attempt, aborted.reason)

    def _ledger_dict(self) -> dict[str, Any]:
        return {} if self.ledger is None else self.ledger.to_dict()

    async def _advance(self, attempt: AttemptId, query: RoundQuery, state: TreeState,
                       released: Released) -> TreeState:
        new_state, report = self.tree.advance(state, released.sums, released.contributors,
                                              released.true_counts)
        self.store.release_attempt(attempt.round, attempt.attempt, new_state.to_dict(),
                                   report.to_dict(), new_state.done)
        if released.stored is not None:
            await released.stored()
        if self.on_round is not None:
            self.on_round(attempt, report)
        return new_state


class RunCancelled(FedhhError):
    """The operator cancelled the run."""
