"""A round attempt step by step (``timeline.attempt_view``), dropout pooled over attempts, and
the standard deviation shown beside each estimate."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.config import RunConfig
from fedhh.device import RandomizedResponse
from fedhh.server import LocalRandomizer, PrefixTree, TreeConfig
from fedhh.server.prefixtree import Found, TreeState
from fedhh_coordinator.dashboard.results import estimate_std, heavy_hitters
from fedhh_coordinator.dashboard.timeline import attempt_view, dropout_by_stage
from fedhh_coordinator.progress import Progress
from fedhh_coordinator.store import RoundRow, stored_members_field

# (a run whose eps_local the fake does not know: a cut row the rounds ran out on reads "no
# rounds left", fedhh.server.causes.ran_out_cause)
UNKNOWN_BUDGET = {"config": RunConfig(), "ledger": SimpleNamespace(eps_local=None)}

T0 = 1_800_000_000.0
COUNTS = {"ADVERTISE_KEYS": 100, "SHARE_KEYS": 90, "MASKED_INPUT": 90,
          "CONSISTENCY_CHECK": 81, "UNMASK": 40}


def row(state: str, summary: dict[str, object], participants: int = 0, reason: str = "",
        finished: float | None = T0 + 20) -> RoundRow:
    return RoundRow("r", 1, 1, state, reason, participants, summary, T0, finished)


def statuses(view: object) -> dict[str, str]:
    return {s.key: s.status for s in view.steps}  # type: ignore[attr-defined]


@pytest.mark.parametrize("members", [stored_members_field(range(100)),
                                     {"members": list(range(100))}])  # (as written before)
def test_a_released_attempt_has_every_step_done_with_its_dropout_and_duration(
        members: dict[str, object]) -> None:
    steps = [["check-in", T0], ["secure aggregation", T0 + 4], ["SHARE_KEYS", T0 + 5],
             ["MASKED_INPUT", T0 + 7], ["CONSISTENCY_CHECK", T0 + 10], ["UNMASK", T0 + 11],
             ["releasing", T0 + 15]]
    view = attempt_view(row("released", {**members, "steps": steps,
                                         "stage_devices": COUNTS, "kept": 5, "finished": 2,
                                         "threshold": 12.5, "expected_false_positives": 0.3,
                                         "impossible": 1, "denied": 2}, participants=81),
                        n_min=80, live=None, pool=0, now=T0 + 100)
    assert set(statuses(view).values()) == {"done"}
    by_key = {s.key: s for s in view.steps}
    assert by_key["check-in"].devices == 100 and by_key["check-in"].seconds == 4
    assert by_key["SHARE_KEYS"].dropout == pytest.approx(0.1)
    assert by_key["MASKED_INPUT"].dropout == 0
    assert by_key["CONSISTENCY_CHECK"].dropout == pytest.approx(0.1)
    assert by_key["UNMASK"].dropout is None  # closes once every mask can be removed
    assert by_key["end"].label == "released" and by_key["end"].devices == 81
    assert by_key["end"].seconds == 5  # releasing until the attempt finished
    assert (view.kept, view.finished, view.provable_fp) == (5, 2, 2)
    assert view.seconds == 20


def test_certain_false_positives_are_kept_deny_listed_items_never_impossible_codes() -> None:
    """Issue 28: impossible codes (removed before thresholding, never kept) were added to the
    certain false positives: "observed >= 26499" with 5 items kept. Now only kept deny-listed
    items count, never more than were kept."""
    view = attempt_view(row("released", {"members": list(range(100)), "kept": 5,
                                         "finished": 2, "expected_false_positives": 2.02,
                                         "impossible": 26_498, "denied": 1}, participants=90),
                        n_min=80, live=None, pool=0, now=T0 + 100)
    assert view.provable_fp == 1 and view.kept is not None and view.provable_fp <= view.kept


def test_an_attempt_aborted_at_check_in_fails_there() -> None:
    view = attempt_view(row("aborted", {}, reason="only 3 devices checked in"), 80, None, 0,
                        T0 + 100)
    assert statuses(view) == {"check-in": "failed", "ADVERTISE_KEYS": "skipped",
                              "SHARE_KEYS": "skipped", "MASKED_INPUT": "skipped",
                              "CONSISTENCY_CHECK": "skipped", "UNMASK": "skipped",
                              "end": "failed"}
    assert view.steps[0].seconds == 20 and view.kept is None and view.provable_fp is None


def test_an_attempt_aborted_in_a_stage_fails_at_that_stage() -> None:
    counts = {"ADVERTISE_KEYS": 100, "SHARE_KEYS": 60}
    view = attempt_view(row("aborted", {"members": list(range(100)), "stage_devices": counts,
                                        "steps": [["check-in", T0],
                                                  ["secure aggregation", T0 + 1]]}),
                        80, None, 0, T0 + 100)
    assert statuses(view)["SHARE_KEYS"] == "done"
    assert statuses(view)["MASKED_INPUT"] == "failed"
    assert statuses(view)["UNMASK"] == "skipped"


def test_a_live_attempt_shows_the_stage_in_progress() -> None:
    progress = Progress()
    progress.enter(1, 1, "check-in")
    view = attempt_view(row("open", {}, finished=None), 80, progress, pool=37,
                        now=T0 + 5)
    assert statuses(view)["check-in"] == "active" and view.steps[0].devices == 37
    progress.enter(1, 1, "secure aggregation", 100)
    progress.observe_stage("SHARE_KEYS", {"ADVERTISE_KEYS": 99})
    view = attempt_view(row("open", {"members": list(range(100))}, finished=None), 80,
                        progress, pool=100, now=T0 + 9)
    assert statuses(view)["ADVERTISE_KEYS"] == "done"
    assert statuses(view)["SHARE_KEYS"] == "active"
    assert statuses(view)["MASKED_INPUT"] == "pending"
    assert view.steps[1].dropout == pytest.approx(0.01)


def test_dropout_is_pooled_over_attempts() -> None:
    views = [attempt_view(row("released", {"members": list(range(100)),
                                           "stage_devices": COUNTS}, 81), 80, None, 0, T0),
             attempt_view(row("released", {"members": list(range(50)),
                                           "stage_devices": {"ADVERTISE_KEYS": 40}}, 40),
                          30, None, 0, T0)]
    pooled = {d.stage: d for d in dropout_by_stage(views)}
    assert (pooled["ADVERTISE_KEYS"].missing, pooled["ADVERTISE_KEYS"].of) == (10, 150)
    assert (pooled["SHARE_KEYS"].missing, pooled["SHARE_KEYS"].of) == (10, 100)
    assert "UNMASK" not in pooled


def test_the_attempt_under_way_joins_the_pooled_dropout_when_it_ends() -> None:
    """Issue 28: the fleet page read "advertise keys 0 of 2774" for 1,387 devices, the
    attempt in progress pooled beside the rest. Its counts still change: it is left out until
    it ends, so one round of the fleet counts the fleet once."""
    progress = Progress()
    progress.enter(2, 1, "secure aggregation", 1387)
    progress.observe_stage("SHARE_KEYS", {"ADVERTISE_KEYS": 1387})
    done = attempt_view(row("released", {"members": list(range(1387)),
                                         "stage_devices": {"ADVERTISE_KEYS": 1387}}, 1387),
                        1000, None, 0, T0)
    live = attempt_view(row("open", {"members": list(range(1387))}, finished=None), 1000,
                        progress, pool=1387, now=T0 + 9)
    pooled = {d.stage: d for d in dropout_by_stage([live, done])}
    advert = pooled["ADVERTISE_KEYS"]
    assert (advert.missing, advert.of, advert.attempts) == (0, 1387, 1)


def test_the_standard_deviation_is_the_randomized_response_formula() -> None:
    mechanism = LocalRandomizer(2.0)
    rr = RandomizedResponse(2.0)
    n, count = 1000, 120.0
    expected = math.sqrt((count * rr.a1 * (1 - rr.a1) + (n - count) * rr.a0 * (1 - rr.a0))
                         / (rr.a1 - rr.a0) ** 2)
    assert estimate_std(mechanism, count, n) == pytest.approx(expected, rel=1e-12)
    # Estimates outside [0, n] are clipped before they stand in for the count.
    assert estimate_std(mechanism, -5.0, n) == estimate_std(mechanism, 0.0, n)
    assert math.isnan(estimate_std(mechanism, 10.0, 0))


def test_a_hitters_standard_deviation_is_its_rounds_mechanisms() -> None:
    """A completion round runs at a smaller share of the budget: its items' standard deviation
    is its own randomizer's (before: the main rounds', several times smaller)."""
    codec = Codec("5bit", 20)
    main, completion = LocalRandomizer(4.0), LocalRandomizer(1.0)
    tree = PrefixTree(TreeConfig(rounds=2, dim_limit=2**12), codec, main, None,
                      (main, completion))
    [code] = cw.to_ints(codec.encode_many(["cat"]).codes)
    state = TreeState(discovered=(Found(code, 100.0, 2),), done=True)
    parts = SimpleNamespace(tree=tree, state=state, **UNKNOWN_BUDGET)
    rounds = [RoundRow("r", i, 1, "released", "", 1000, {}, T0, T0 + 20) for i in (1, 2)]
    [hit] = heavy_hitters(parts, rounds)  # type: ignore[arg-type]
    assert hit.std == estimate_std(completion, 100.0, 1000) > estimate_std(main, 100.0, 1000)


WAITING = "waiting for the aggregator at control.example:7100"


def test_a_wait_for_the_aggregator_is_its_own_step_check_in_not_begun() -> None:
    """An attempt that found the aggregation service silent waits before check-in (step 0 of
    docs/networked.md, "A round"). Before, the timeline showed check-in running all through the
    wait, beside an activity line that said it waited for the aggregator."""
    progress = Progress()
    progress.enter(1, 1, WAITING)
    view = attempt_view(row("open", {}, finished=None), 80, progress, pool=37, now=T0 + 5)
    assert [(s.key, s.status) for s in view.steps[:3]] == [
        ("aggregator", "active"), ("check-in", "pending"), ("ADVERTISE_KEYS", "pending")]
    assert view.steps[0].label == "waiting for the aggregator"
    assert view.steps[1].devices is None and view.steps[1].seconds is None
    # The service answers: the wait is done, check-in runs.
    progress.enter(1, 1, "check-in")
    view = attempt_view(row("open", {}, finished=None), 80, progress, pool=37, now=T0 + 5)
    assert [(s.key, s.status) for s in view.steps[:3]] == [
        ("aggregator", "done"), ("check-in", "active"), ("ADVERTISE_KEYS", "pending")]
    assert view.steps[0].label == "waited for the aggregator"
    assert view.steps[1].devices == 37


def test_a_finished_attempt_keeps_its_wait_and_one_given_up_in_it_fails_there() -> None:
    steps = [[WAITING, T0 + 1], ["check-in", T0 + 31], ["secure aggregation", T0 + 35],
             ["releasing", T0 + 45]]
    released = attempt_view(row("released", {"members": list(range(100)), "steps": steps,
                                             "stage_devices": COUNTS}, participants=81),
                            80, None, 0, T0 + 100)
    by_key = {s.key: s for s in released.steps}
    assert set(statuses(released).values()) == {"done"}
    assert by_key["aggregator"].seconds == 30 and by_key["check-in"].seconds == 4
    assert by_key["check-in"].devices == 100
    given_up = attempt_view(row("aborted", {"steps": [[WAITING, T0 + 1]]},
                                reason="the aggregation service at control.example:7100 has "
                                       "not answered for 600 s", finished=T0 + 601),
                            80, None, 0, T0 + 700)
    assert statuses(given_up) == {"aggregator": "failed", "check-in": "skipped",
                                  "ADVERTISE_KEYS": "skipped", "SHARE_KEYS": "skipped",
                                  "MASKED_INPUT": "skipped", "CONSISTENCY_CHECK": "skipped",
                                  "UNMASK": "skipped", "end": "failed"}
    assert given_up.steps[0].seconds == 600
    # (dropout pooled over attempts is unchanged by the step)
    assert {d.stage: d.of for d in dropout_by_stage([released, given_up])}["SHARE_KEYS"] == 100


def test_a_wait_mid_round_is_its_own_step_after_the_stage_it_interrupted() -> None:
    """The aggregation service lost mid-round (``NetworkLink._patient_outcome``): the wait is
    a step after the stage it interrupted, which goes on once the service answers. Before,
    the link overwrote the stage's text alone, so the timeline kept share keys running
    through the wait (and a wait read back from a summary was put before check-in)."""
    progress = Progress()
    progress.enter(1, 1, "check-in")
    progress.enter(1, 1, "secure aggregation", 100)
    progress.observe_stage("SHARE_KEYS", {"ADVERTISE_KEYS": 100})
    interrupted = progress.wait(WAITING)
    assert progress.stage == WAITING
    view = attempt_view(row("open", {}, finished=None), 80, progress, pool=0, now=T0)
    assert [(s.key, s.status) for s in view.steps] == [
        ("check-in", "done"), ("ADVERTISE_KEYS", "done"), ("SHARE_KEYS", "done"),
        ("aggregator-1", "active"), ("MASKED_INPUT", "pending"),
        ("CONSISTENCY_CHECK", "pending"), ("UNMASK", "pending"), ("end", "pending")]
    assert view.steps[3].label == "waiting for the aggregator"
    progress.resume(interrupted)
    assert progress.stage == "SHARE_KEYS"
    view = attempt_view(row("open", {}, finished=None), 80, progress, pool=0, now=T0)
    assert statuses(view)["aggregator-1"] == "done"
    assert statuses(view)["SHARE_KEYS"] == "active"
    assert view.steps[3].label == "waited for the aggregator"


def test_a_stored_wait_mid_round_counts_its_own_time_and_the_stage_both_sides() -> None:
    steps = [["check-in", T0], ["secure aggregation", T0 + 4], ["SHARE_KEYS", T0 + 5],
             [WAITING, T0 + 6], ["SHARE_KEYS", T0 + 36], ["MASKED_INPUT", T0 + 38],
             ["releasing", T0 + 45]]
    released = attempt_view(row("released", {"members": list(range(100)), "steps": steps,
                                             "stage_devices": COUNTS}, participants=81,
                                finished=T0 + 50), 80, None, 0, T0 + 100)
    assert set(statuses(released).values()) == {"done"}
    by_key = {s.key: s for s in released.steps}
    assert [s.key for s in released.steps][2:5] == ["SHARE_KEYS", "aggregator-1",
                                                   "MASKED_INPUT"]
    assert by_key["aggregator-1"].seconds == 30 and by_key["SHARE_KEYS"].seconds == 3
    assert by_key["check-in"].seconds == 4 and by_key["end"].seconds == 5
    # Given up in it: the attempt fails at the wait, the later stages skipped.
    lost = attempt_view(row("lost", {"steps": steps[:4]}, finished=T0 + 606), 80, None, 0,
                        T0 + 700)
    assert [(s.key, s.status) for s in lost.steps][2:5] == [
        ("SHARE_KEYS", "done"), ("aggregator-1", "failed"), ("MASKED_INPUT", "skipped")]
    assert lost.steps[3].seconds == 600
