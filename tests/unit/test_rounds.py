"""The round driver's rules, against a fake link and the in-memory store (no processes): the
charge is recorded before the sum is read, an abort before unmasking costs nothing, an attempt
that reached unmasking is charged whatever happens next, attempts are bounded across restarts,
a restart settles what a previous process left open, and no attempt opens on credit."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np
import pytest

from fedhh.codec import Codec
from fedhh.errors import PrivacyError, StateError
from fedhh.privacy import PrivacyLedger
from fedhh.rounds import (
    AttemptId,
    AttemptState,
    ChargeHook,
    MemoryRunStore,
    Recovered,
    Recovery,
    Released,
    RoundAborted,
    RoundDriver,
    RunCancelled,
)
from fedhh.server import LocalRandomizer, PrefixTree, RoundQuery, TailKind, TreeConfig, TreeState

N_MIN = 500
EPS_LOCAL = 2.0
OVER = "sha256:the fake's reports"


def tree() -> PrefixTree:
    return PrefixTree(TreeConfig(rounds=2, dim_limit=1 << 12), Codec("5bit", 10),
                      LocalRandomizer(EPS_LOCAL, TailKind.BINOMIAL))


def ledger(eps_agg: float = 20.0) -> PrivacyLedger:
    return PrivacyLedger.open(eps_agg, 1e-6, 2, N_MIN, eps_local=EPS_LOCAL)




@dataclass
class FakeLink:
    """Plays a scripted outcome per attempt: "release", "abort", "abort-after-unmask",
    "refused" (the hook refuses; the link must not read the sum), "lost-after-charge" (charged,
    then the sum never arrives)."""

    script: list[str]
    store: MemoryRunStore
    recovered: Recovered = field(default_factory=lambda: Recovered(Recovery.NOTHING, ""))
    log: list[str] = field(default_factory=list)
    over: str = OVER  # whose reports each sum it reads is over

    async def collect(self, attempt: AttemptId, query: RoundQuery,
                      charge: ChargeHook) -> Released:
        return await self._play(self.script.pop(0), attempt, query, charge)

    async def _play(self, step: str, attempt: AttemptId, query: RoundQuery,
                    charge: ChargeHook) -> Released:
        self.log.append(f"{step} {attempt.label}")
        if step == "abort":
            raise RoundAborted("too few devices")
        if step == "abort-after-unmask":
            raise RoundAborted("output out of range", reached_unmask=True, contributors=N_MIN)
        await charge(3 if step == "release-few" else N_MIN + 10, self.over)
        if step == "lost-after-charge":
            # The link lost its aggregator while reading the sum it was charged for.
            raise RoundAborted("lost the aggregator while reading the sum", reached_unmask=True)
        # Reading the sum: the charge must already be in the store.
        record = self.store.attempts()[-1]
        assert record.state is AttemptState.RELEASING and self.store.ledger
        self.log.append(f"read {attempt.label}")
        return Released(np.zeros(query.domain_size, dtype=np.int64), N_MIN + 10)

    async def recover(self, attempt: AttemptId) -> Recovered:
        self.log.append(f"recover {attempt.label}")
        return self.recovered

    async def resume(self, attempt: AttemptId, query: RoundQuery,
                     charge: ChargeHook) -> Released:
        return await self._play("release", attempt, query, charge)


def driver(link: FakeLink, store: MemoryRunStore, book: PrivacyLedger | None = None,
           max_attempts: int = 5) -> RoundDriver:
    return RoundDriver(run_id="r", tree=tree(), store=store, link=link,
                       ledger=ledger() if book is None else book, min_contributors=N_MIN,
                       max_attempts=max_attempts)


def run(d: RoundDriver, state: TreeState | None = None) -> TreeState:
    return asyncio.run(d.run(state or d.tree.initial_state()))


def spends(d: RoundDriver) -> list[tuple[int, int]]:
    assert d.ledger is not None
    return [(s.round_index, s.contributors) for s in d.ledger.spends]


def test_a_release_is_charged_before_its_sum_is_read() -> None:
    store = MemoryRunStore()
    link = FakeLink(["release"], store)
    d = driver(link, store)
    final = run(d)
    assert final.done
    assert link.log == ["release round 1 attempt 1", "read round 1 attempt 1"]
    assert [r.state for r in store.attempts()] == [AttemptState.RELEASED]
    assert spends(d) == [(0, N_MIN + 10)]


def test_an_abort_before_unmasking_costs_nothing_and_is_retried() -> None:
    store = MemoryRunStore()
    d = driver(FakeLink(["abort", "abort", "release"], store), store)
    run(d)
    assert [(r.attempt, r.state) for r in store.attempts()] == [
        (1, AttemptState.ABORTED), (2, AttemptState.ABORTED), (3, AttemptState.RELEASED)]
    assert spends(d) == [(0, N_MIN + 10)]


def test_an_attempt_lost_after_its_charge_is_not_charged_again() -> None:
    store = MemoryRunStore()
    d = driver(FakeLink(["lost-after-charge", "release"], store), store)
    run(d)
    assert [(r.attempt, r.state) for r in store.attempts()] == [
        (1, AttemptState.LOST), (2, AttemptState.RELEASED)]
    assert d.ledger is not None
    assert [(s.round_index, s.attempt) for s in d.ledger.spends] == [(0, 1), (0, 2)]


def test_an_attempt_that_reached_unmasking_is_charged_and_the_retry_again() -> None:
    store = MemoryRunStore()
    d = driver(FakeLink(["abort-after-unmask", "release"], store), store)
    run(d)
    assert [r.state for r in store.attempts()] == [AttemptState.LOST, AttemptState.RELEASED]
    assert spends(d) == [(0, N_MIN), (0, N_MIN + 10)]
    assert d.ledger is not None and d.ledger.rounds_recorded == 1


def test_a_charge_the_budget_refuses_stops_the_run_before_the_sum_is_read() -> None:
    """Three contributors where the plan assumed n_min: the spend is larger than the budget
    allows, so the sum is never read; it exists, so it is charged all the same."""
    store = MemoryRunStore()
    link = FakeLink(["release-few"], store)
    d = driver(link, store, PrivacyLedger.open(1.0, 1e-6, 2, N_MIN))  # solved: fits at n_min
    with pytest.raises(PrivacyError):
        run(d)
    assert "read round 1 attempt 1" not in link.log
    assert [r.state for r in store.attempts()] == [AttemptState.LOST]
    assert spends(d) == [(0, 3)] and d.ledger is not None and d.ledger.overspent


def test_attempts_are_bounded_across_restarts() -> None:
    store = MemoryRunStore()
    with pytest.raises(StateError, match="3 attempts"):
        run(driver(FakeLink(["abort"] * 3, store), store, max_attempts=3))
    link = FakeLink(["release"], store)
    with pytest.raises(StateError, match="3 attempts"):
        run(driver(link, store, max_attempts=3))  # a new process: the count is stored
    assert not [entry for entry in link.log if entry.startswith("release")]


def test_no_attempt_opens_on_credit() -> None:
    """A budget solved for exactly two rounds at n_min: once an attempt is lost (charged),
    the retry would need a third charge, so it never opens."""
    store = MemoryRunStore()
    budget = PrivacyLedger.open(1.0, 1e-6, 2, N_MIN)
    link = FakeLink(["abort-after-unmask", "release"], store)
    d = driver(link, store, budget)
    with pytest.raises(PrivacyError, match="before it opened"):
        run(d)
    assert [r.state for r in store.attempts()] == [AttemptState.LOST]
    assert spends(d) == [(0, N_MIN)]
    assert d.ledger is not None and d.ledger.spent_epsilon() <= 1.0 * (1 + 1e-9)


def test_a_budget_refusal_names_the_round_as_the_run_counts_it() -> None:
    """The ledger counts rounds from 0, the run from 1: the refusal said "refused round 1
    before it opened: round 0 (attempt 2, ...)" (seen on a coordinator whose disk was full)."""
    store = MemoryRunStore()
    d = driver(FakeLink(["abort-after-unmask", "release"], store), store,
               PrivacyLedger.open(1.0, 1e-6, 2, N_MIN))
    with pytest.raises(PrivacyError) as refused:
        run(d)
    assert str(refused.value).startswith("privacy budget refused round 1 before it opened: "
                                         "round 1 (attempt 2, a retry: ")
    assert PrivacyLedger.open(1.0, 1e-6, 2, N_MIN).check(0, 1).reason.startswith("round 0 has")


@pytest.mark.parametrize("verdict,expected_state,charges", [
    (Recovery.NOTHING, AttemptState.ABORTED, 1),  # free; the retry is charged
    (Recovery.LOST, AttemptState.LOST, 2),  # charged; the retry too
    (Recovery.RESUME, AttemptState.RELEASED, 1),  # collected after all
])
def test_a_restart_settles_an_open_attempt(verdict: Recovery, expected_state: AttemptState,
                                           charges: int) -> None:
    store = MemoryRunStore()
    store.open_attempt(1)  # left open by a process that stopped
    link = FakeLink(["release"], store, Recovered(verdict, "test"))
    d = driver(link, store)
    final = run(d)
    assert final.done
    assert link.log[0] == "recover round 1 attempt 1"
    assert store.attempts()[0].state is expected_state
    assert len(spends(d)) == charges


def charged_before_restart(contributors: int, over: str | None
                           ) -> tuple[MemoryRunStore, PrivacyLedger]:
    """The store and ledger a process left when it stopped after charging round 1's first
    attempt at ``contributors`` over ``over``, before its sum was read."""
    store = MemoryRunStore()
    number = store.open_attempt(1)
    book = ledger().record(0, contributors, attempt=number)
    store.charge_attempt(1, number, AttemptState.RELEASING, contributors, book.to_dict(),
                         over=over)
    return store, book


def test_a_restart_never_charges_an_attempt_twice() -> None:
    """An attempt charged (releasing) before the process stopped is not charged again, whether
    its sum can still be collected or is lost."""
    for verdict, expected in ((Recovery.RESUME, AttemptState.RELEASED),
                              (Recovery.LOST, AttemptState.LOST)):
        # (at the count of the sum FakeLink reads, over its reports: the one the service
        # held for it)
        store, book = charged_before_restart(N_MIN + 10, OVER)
        link = FakeLink(["release"], store, Recovered(verdict, "test"))
        d = driver(link, store, book)
        run(d)
        assert store.attempts()[0].state is expected
        expected_spends = 1 if verdict is Recovery.RESUME else 2
        assert len(spends(d)) == expected_spends


def test_a_held_sum_of_another_count_than_the_one_charged_is_refused_unread() -> None:
    """An attempt charged at N_MIN before the process stopped, whose sum the link reads after
    the restart with another count (a service that rebuilt it from fewer or other parts): that
    sum's spend was never recorded, so it is refused before it is read, the attempt settled
    lost at its first charge (not charged again), and the round retried. Before, it was
    read and released under the first charge."""
    store, book = charged_before_restart(N_MIN, OVER)
    link = FakeLink(["release"], store, Recovered(Recovery.RESUME, "test"))
    d = driver(link, store, book)
    assert run(d).done
    first, retry = store.attempts()
    assert first.state is AttemptState.LOST and first.contributors == N_MIN
    assert f"has {N_MIN + 10} contributors, not the {N_MIN} charged" in first.reason
    assert "read round 1 attempt 1" not in link.log
    assert retry.state is AttemptState.RELEASED
    assert spends(d) == [(0, N_MIN), (0, N_MIN + 10)]  # the first charge, then the retry's


@pytest.mark.parametrize(("stored", "why"), [
    ("sha256:other reports", "is over other reports than the one charged"),
    (None, "by a version that did not store whose reports"),
])
def test_a_held_sum_of_the_charged_count_over_other_reports_is_refused_unread(
        stored: str | None, why: str) -> None:
    """As above, the held sum of the very count charged, but over other reports than the
    charge was (another shard in a total charged n_min, other survivors), or the charge
    stored by a version that kept no record of whose reports it was over: refused unread,
    the attempt lost at its one charge, the round retried. Before, the count alone was
    compared and the sum read under the first charge."""
    store, book = charged_before_restart(N_MIN + 10, stored)
    link = FakeLink(["release"], store, Recovered(Recovery.RESUME, "test"))
    d = driver(link, store, book)
    assert run(d).done
    first, retry = store.attempts()
    assert first.state is AttemptState.LOST and first.contributors == N_MIN + 10
    assert why in first.reason, first.reason
    assert "read round 1 attempt 1" not in link.log
    assert (retry.state, retry.over) == (AttemptState.RELEASED, OVER)
    assert spends(d) == [(0, N_MIN + 10), (0, N_MIN + 10)]


def test_an_attempt_left_open_says_what_interrupted_it() -> None:
    """A restarted coordinator settles an open attempt as "the coordinator stopped"; one that
    went on through a store outage (runner.py) as "the store was unavailable" (it was labelled
    as stopped, though it never stopped)."""
    for interrupted_by in (RoundDriver.interrupted_by, "the store was unavailable"):
        store = MemoryRunStore()
        store.open_attempt(1)
        link = FakeLink(["release"], store, Recovered(Recovery.NOTHING, "nothing to collect"))
        d = driver(link, store)
        d.interrupted_by = interrupted_by
        run(d)
        assert store.attempts()[0].reason == f"{interrupted_by}; nothing to collect"
    assert RoundDriver.interrupted_by == "the coordinator stopped"


def test_an_attempt_that_never_left_the_process_is_tried_again_uncounted() -> None:
    """After a store outage (``retry_unsent``), an open attempt the link says never left the
    process is collected as the same attempt, not counted against ``max_attempts``: the last
    allowed attempt after two aborts still runs. After a restart it is settled as before."""
    unsent = Recovered(Recovery.NOTHING, "never reached the aggregator", unsent=True)
    for retry, expected in ((True, [(1, AttemptState.ABORTED), (2, AttemptState.ABORTED),
                                    (3, AttemptState.RELEASED)]),
                            (False, None)):
        store = MemoryRunStore()
        for _ in (1, 2):
            store.abort_attempt(1, store.open_attempt(1), "too few devices")
        store.open_attempt(1)  # interrupted in its check-in
        link = FakeLink(["release"], store, unsent)
        d = driver(link, store, max_attempts=3)
        d.retry_unsent = retry
        if expected is None:
            with pytest.raises(StateError, match="released nothing in 3 attempts"):
                run(d)
            assert store.attempts()[-1].reason == ("the coordinator stopped; never reached "
                                                   "the aggregator")
            continue
        assert run(d).done
        assert [(r.attempt, r.state) for r in store.attempts()] == expected
        assert link.log[-2:] == ["release round 1 attempt 3", "read round 1 attempt 3"]
        assert spends(d) == [(0, N_MIN + 10)]


def test_an_attempt_left_to_be_tried_again_is_settled_if_the_run_stops_first() -> None:
    """Cancelled, or refused by the budget, before it is tried again: the attempt is settled
    aborted, free, as resume would have settled it, not left open."""
    unsent = Recovered(Recovery.NOTHING, "never reached the aggregator", unsent=True)
    for stop in ("cancel", "budget"):
        store = MemoryRunStore()
        # (a budget for two charges at n_min, one spent on a lost attempt: a third refused)
        book = PrivacyLedger.open(1.0, 1e-6, 2, N_MIN)
        if stop == "budget":
            book = book.record(0, N_MIN, attempt=store.open_attempt(1))
            store.charge_attempt(1, 1, AttemptState.LOST, N_MIN, book.to_dict(), "lost")
        store.open_attempt(1)
        d = driver(FakeLink([], store, unsent), store, book)
        d.retry_unsent = True
        d.cancelled = lambda: stop == "cancel"  # noqa: B023 (read within the iteration)
        with pytest.raises(RunCancelled if stop == "cancel" else PrivacyError):
            run(d)
        assert [(r.state, r.reason) for r in store.attempts()][-1] == (
            AttemptState.ABORTED, "the coordinator stopped; never reached the aggregator")


@pytest.mark.parametrize("lost", ["abort-after-unmask", "restart-unknown"])
def test_a_lost_attempts_reason_says_unmasking_may_have_begun(lost: str) -> None:
    """The driver is told only that a sum may exist (``reached_unmask``), also when nobody can
    say whether unmasking began (an aggregator silent past its patience, a restart that finds
    the outcome unknown). Before, the reason ended "(unmasking began: charged)" in every such
    case; the charge itself is unchanged (n_min)."""
    store = MemoryRunStore()
    recovered = Recovered(Recovery.NOTHING, "")
    if lost == "restart-unknown":
        store.open_attempt(1)  # left open by a process that stopped
        recovered = Recovered(Recovery.LOST, "nobody can say whether unmasking began (-)")
        script = ["release"]
    else:
        script = [lost, "release"]
    d = driver(FakeLink(script, store, recovered), store)
    run(d)
    first = store.attempts()[0]
    assert first.state is AttemptState.LOST
    assert first.reason.endswith(" (unmasking may have begun: charged)"), first.reason
    assert "unmasking began: charged" not in first.reason
    assert spends(d)[0] == (0, N_MIN)


@pytest.mark.parametrize("max_attempts", [1, 3])
def test_a_cancel_during_the_pause_after_an_abort_opens_no_attempt_more(
        max_attempts: int) -> None:
    """The cancel is asked while the driver waits to retry an aborted attempt. Before, the
    next attempt was opened only to abort in its check-in, and where the aborted one was the
    round's last allowed attempt the run failed ("released nothing in 1 attempts") instead of
    ending cancelled."""
    store = MemoryRunStore()
    link = FakeLink(["abort", "release"], store)
    asked = iter([False, False])  # the run's first check, and the one right after the abort
    d = driver(link, store, max_attempts=max_attempts)
    d.cancelled = lambda: next(asked, True)  # (then asked during the pause)
    with pytest.raises(RunCancelled, match="cancelled by the operator"):
        run(d)
    assert link.log == ["abort round 1 attempt 1"]
    assert [(r.attempt, r.state) for r in store.attempts()] == [(1, AttemptState.ABORTED)]
    assert spends(d) == []
