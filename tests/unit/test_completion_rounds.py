"""Completion rounds (issue 27): items whose codes do not end within max_bits are completed by
further rounds over only the cut prefixes; what is still unended after them is listed apart,
shown cut; the main rounds of a short list go past max_bits; each completion round is charged
at its own local epsilon, checked against a composition by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedhh.codec import Codec
from fedhh.config import DEFAULT_COMPLETION_ROUNDS, RunConfig, with_most_completions
from fedhh.data.dataset import from_user_counts
from fedhh.errors import ConfigError, PrivacyError
from fedhh.privacy import PrivacyLedger, sum_pld
from fedhh.privacy.accountant import allocation_offsets
from fedhh.server import PrefixTree, TreeConfig
from fedhh.server.mechanisms import VoteThreshold
from fedhh.server.segment import completion_segment
from fedhh.simulation.runner import prepare, simulate

DELTA = 1e-6
LONG = "internationalization"  # 20 letters: 105 bits with the 5-bit code


def votes_for(tree: PrefixTree, query, items: dict[str, int]) -> np.ndarray:
    """Exact sums: every holder of an item reports it (no noise)."""
    codes = tree.codec.encode_many(list(items)).codes
    index = query.domain_index(codes)
    sums = np.zeros(query.domain_size, dtype=np.int64)
    np.add.at(sums, index[index >= 0], np.array(list(items.values()))[index >= 0])
    return sums


def run(tree: PrefixTree, items: dict[str, int]):
    state = tree.initial_state()
    reports = []
    while not state.done:
        query = tree.query(state)
        state, report = tree.advance(state, votes_for(tree, query, items), 100)
        reports.append(report)
    return state, reports


def tree_of(completion: int, main_bits: int = 20, dim_limit: int = 2**12,
            width: int = 120) -> PrefixTree:
    config = TreeConfig(rounds=2 + completion, dim_limit=dim_limit,
                        completion_rounds=completion, main_bits=main_bits)
    return PrefixTree(config, Codec("5bit", width), VoteThreshold(5, 1.0))


def test_a_long_item_is_completed_by_the_completion_rounds() -> None:
    items = {LONG: 30, "cat": 20, "catalog": 12}
    state, reports = run(tree_of(completion=8), items)
    found = {h.item: (h.estimate, h.ended) for h in tree_of(8).heavy_hitters(state)}
    assert found == {item: (float(n), True) for item, n in items.items()}
    # The main rounds covered 20 bits; the rest came from rounds over the cut prefixes only.
    assert reports[1].prefix_bits + reports[1].segment_bits >= 20
    assert all(r.prefixes <= 2 for r in reports[2:])


def test_without_completion_rounds_the_long_item_is_truncated_as_before() -> None:
    tree = PrefixTree(TreeConfig(rounds=2, dim_limit=2**12), Codec("5bit", 20),
                      VoteThreshold(5, 1.0))
    state, _ = run(tree, {LONG: 30})
    [hitter] = tree.heavy_hitters(state)
    assert (hitter.item, hitter.ended, hitter.truncated) == ("inte…", False, True)
    assert tree.cut_prefixes(state) == []


def test_what_the_completion_rounds_leave_unended_is_listed_apart_and_shown_cut() -> None:
    tree = tree_of(completion=1)
    state, _ = run(tree, {LONG: 30, "cat": 20})
    assert [h.item for h in tree.heavy_hitters(state)] == ["cat"]
    [cut] = tree.cut_prefixes(state)
    assert cut.truncated and not cut.ended and cut.item.startswith("interna")
    assert cut.item.endswith("…") and cut.bits < tree.codec.max_bits
    assert cut.to_dict()["bits"] == cut.bits


def fading_run(fades_at: int) -> tuple[PrefixTree, object, list]:
    """LONG held by 30 devices, then by 3 (below the vote threshold 5) from round
    ``fades_at`` on, beside a word as long that stays and a short one."""
    tree = tree_of(completion=8)
    state, reports = tree.initial_state(), []
    while not state.done:
        query = tree.query(state)
        state, report = tree.advance(state, votes_for(tree, query, {
            LONG: 3 if query.round >= fades_at else 30, OTHER: 40, "cat": 20}), 100)
        reports.append(report)
    assert [h.item for h in tree.heavy_hitters(state)] == ["cat", OTHER]
    return tree, state, reports


@pytest.mark.parametrize("completion, width", [(8, 60), (0, 20)])
def test_an_element_at_the_codes_width_equal_to_a_deny_code_is_dropped(completion: int,
                                                                       width: int) -> None:
    """A deny-listed item longer than the codes is denied by its first ``width`` bits; an
    element the noise keeps there is dropped whether the run has completion rounds (where it
    is cut at the code's width) or not (where it is a truncated item). Before, with completion
    rounds, it was listed as the cut prefix 'internationa…', the deny-listed item's text."""
    codec = Codec("5bit", width)
    config = (TreeConfig(rounds=2 + completion, dim_limit=2**12,
                         completion_rounds=completion, main_bits=20) if completion
              else TreeConfig(rounds=2, dim_limit=2**12))
    tree = PrefixTree(config, codec, VoteThreshold(5, 1.0),
                      deny_codes=codec.encode_many([LONG]).codes)
    # The votes stand for noise: devices never report a denied code.
    state, reports = run(tree, {LONG: 30, "cat": 20})
    assert [h.item for h in tree.heavy_hitters(state)] == ["cat"]
    assert tree.cut_prefixes(state) == []
    assert sum(r.denied for r in reports) == 1
    # A shorter cut prefix stands for every item starting so, and is still listed.
    tree = PrefixTree(TreeConfig(rounds=3, dim_limit=2**12, completion_rounds=1,
                                 main_bits=20), Codec("5bit", 120), VoteThreshold(5, 1.0),
                      deny_codes=Codec("5bit", 120).encode_many([LONG]).codes)
    state, _ = run(tree, {LONG: 30})
    [cut] = tree.cut_prefixes(state)
    assert cut.bits < 120 and cut.item.startswith("interna")


OTHER = "uncharacteristically"


def test_a_prefix_a_completion_round_loses_is_listed_cut_at_the_round_that_kept_it() -> None:
    # A cheaper completion round's threshold can be above a long item's count: the prefix the
    # round before kept is output cut with that round's estimate, not dropped without a trace.
    tree, state, reports = fading_run(fades_at=5)  # the 3rd of 8 completion rounds
    [lost] = tree.cut_prefixes(state)
    kept_by = reports[3]  # the 2nd completion round kept LONG's prefix the last time
    assert (lost.round, lost.estimate, lost.bits) == (4, 30.0, kept_by.prefix_bits
                                                      + kept_by.segment_bits)
    text = lost.item.rstrip("…").split("⟨+")[0]  # (less the bits of the next codeword)
    assert LONG.startswith(text) and not OTHER.startswith(text)
    assert [r.cut for r in reports] == [0, 0, 0, 0, 1] + [0] * (len(reports) - 5)


def test_a_prefix_the_first_completion_round_loses_is_not_listed_under_vote_thresholds(
        ) -> None:
    # The last main round's kept list holds noise prefixes (``PrefixTree._lost``). Under
    # vote thresholds (these votes) what the first completion round does not extend is not
    # reported; under noisy sums the losses that clear a bar are (``PrefixTree._lost_first``,
    # tests/unit/test_first_completion_listing.py).
    tree, state, reports = fading_run(fades_at=3)
    assert tree.cut_prefixes(state) == [] and not any(r.cut for r in reports)


def test_a_family_the_second_completion_round_loses_whole_is_listed_by_its_heaviest() -> None:
    # Before, nothing the second completion round lost was listed: at 2,000 devices items of a
    # few Cyrillic, CJK or Devanagari characters held by 30% of them vanished there.
    tree, state, reports = fading_run(fades_at=4)
    [lost] = tree.cut_prefixes(state)
    kept_by = reports[2]  # the first completion round
    assert (lost.round, lost.estimate, lost.bits) == (3, 30.0, kept_by.prefix_bits
                                                      + kept_by.segment_bits)
    assert LONG.startswith(lost.item.rstrip("…").split("⟨+")[0])


def test_a_sibling_the_second_completion_round_drops_beside_one_it_extends_is_not_listed(
        ) -> None:
    # The first completion round's noise extensions of a real prefix die in the second while
    # the real one goes on (25 such on the default dataset): TWIN shares LONG's prefix of the
    # main rounds, is kept by the first completion round and fades in the second.
    twin = "intergalacticplanetary"
    tree = tree_of(completion=8)
    state, reports = tree.initial_state(), []
    while not state.done:
        query = tree.query(state)
        state, report = tree.advance(state, votes_for(tree, query, {
            LONG: 30, twin: 30 if query.round <= 3 else 3, "cat": 20}), 100)
        reports.append(report)
    assert reports[2].kept == 2 and reports[3].prefixes == 2  # both kept by the first
    assert [h.item for h in tree.heavy_hitters(state)] == ["cat", LONG]
    assert tree.cut_prefixes(state) == [] and not any(r.cut for r in reports)


def test_a_short_list_takes_the_adaptive_segment_past_max_bits() -> None:
    # One heavy item: after round 1 the list has one prefix, so round 2 may add
    # floor(log2 P) = 12 bits although 20 bits of max_bits need only 8 more.
    _, reports = run(tree_of(completion=4), {LONG: 30})
    assert reports[0].segment_bits == 12 and reports[1].segment_bits == 12


def test_max_bits_past_the_main_rounds_says_to_lower_it() -> None:
    # 2 main rounds of 12 bits reach 24: longer items are the completion rounds' to finish, so
    # the main width must come down (more completion rounds would not help)
    with pytest.raises(ConfigError, match=r"run at least 3 main rounds \(--rounds\), or lower "
                                          r"max_bits to at most 24;"):
        tree_of(completion=3, main_bits=30)
    with pytest.raises(ConfigError, match="cannot cover 30-bit items"):
        PrefixTree(TreeConfig(rounds=2, dim_limit=2**12), Codec("5bit", 30),
                   VoteThreshold(5, 1.0))


def test_the_completion_segment_fits_the_dimension_limit() -> None:
    assert completion_segment(1, 100, 2**16).bits == 16
    assert completion_segment(5, 100, 2**16).bits == 13  # 5 * 2^13 <= 2^16 < 5 * 2^14
    assert completion_segment(5, 7, 2**16).bits == 7     # no more bits than are left
    plan = completion_segment(2**17, 100, 2**16)         # more prefixes than P
    assert (plan.bits, plan.keep_prefixes) == (1, 2**15)


def test_the_config_budgets_each_completion_round_at_its_weight() -> None:
    config = RunConfig(rounds=4, completion_rounds=3, completion_weight=0.05)
    assert config.total_rounds == config.charged_rounds == 7
    assert config.round_weights() == (1.0,) * 4 + (0.05, 0.0125, 0.0125)
    assert config.code_bits() == 23 * 7  # each round can add floor(log2 10^7) = 23 bits
    for off in (RunConfig(completion_rounds=0), RunConfig(algorithm="triehh"),
                RunConfig(privacy_method="clones"), RunConfig(round_items="2")):
        assert off.completion() == 0 and off.code_bits() == off.max_bits


def test_later_completion_rounds_weigh_less() -> None:
    config = RunConfig(rounds=4, completion_rounds=6, completion_weight=0.4)
    assert config.round_weights() == pytest.approx(
        (1.0,) * 4 + (0.4, 0.1, 0.1, 0.025, 0.025, 0.025))
    assert RunConfig(completion_rounds=17).completion_weights()[6:] == (
        (0.0125,) + (0.00625,) * 8 + (0.003125,) * 2)


def test_the_most_completion_rounds_that_can_be_budgeted_are_kept() -> None:
    tried: list[int] = []

    def plan(config: RunConfig) -> int:
        tried.append(config.completion())
        if config.completion() > 5:
            raise PrivacyError("the smallest weights cannot be budgeted")
        return config.completion()

    def roomy(_: int) -> float:
        return 100.0  # eps_local without completion rounds: bounds no count

    run, planned = with_most_completions(RunConfig(completion_rounds=16), plan, roomy)
    assert (run.completion(), planned) == (5, 5)
    run, planned = with_most_completions(RunConfig(completion_rounds=4), plan, roomy)
    assert (run.completion(), planned) == (4, 4)

    # eps_local 4.0 without them: a round of weight w needs 4.0 + ln(w) > 0, w > 0.0183, so
    # only the first three (0.2, 0.05, 0.05) can be; the rest (0.0125) are not even tried
    tried.clear()
    run, planned = with_most_completions(RunConfig(completion_rounds=16), plan, lambda _: 4.0)
    assert (run.completion(), planned) == (3, 3)
    assert max(tried[1:]) <= 3, tried

    def never(config: RunConfig) -> int:
        raise PrivacyError(f"not with {config.completion()}")

    with pytest.raises(PrivacyError, match="not with 0"):
        with_most_completions(RunConfig(completion_rounds=16), never, roomy)


def test_a_small_population_runs_the_completion_rounds_it_can_budget() -> None:
    # 3,000 devices at eps_agg 1: eps_local ~4.3, so a round of weight w runs while
    # 4.3 + ln(w) > 0, i.e. w > ~0.014: the first three of the default thirty-two.
    prepared = prepare(RunConfig(eps_agg=1.0), 3000)
    kept = prepared.config.completion()
    assert 0 < kept < DEFAULT_COMPLETION_ROUNDS
    assert prepared.privacy["completion_rounds"].startswith(
        f"{kept} of {DEFAULT_COMPLETION_ROUNDS}: ")
    smallest = min(RunConfig().completion_weights()[:kept])
    assert prepared.privacy["eps_local"] + math.log(smallest) > 0


def test_completion_rounds_are_charged_as_a_composition_by_hand() -> None:
    """The ledger of a run with the default completion rounds: round i at eps_local +
    ln(w_i), and its epsilon the composition of each round's privacy loss distribution, made
    here directly."""
    n = 200_000
    config = RunConfig(rounds=4)
    weights = config.round_weights()
    assert weights is not None and len(weights) == 4 + 32
    ledger = PrivacyLedger.open_allocated(1.0, DELTA, allocation_offsets(weights), n)
    epsilons = [ledger.round_epsilon(i) for i in range(36)]
    # 0.2, a quarter of it for the 2nd and 3rd, a sixteenth for the 4th to 7th, then halved
    # each time the round's index doubles (independently written)
    decayed = [0.2] + [0.05] * 2 + [0.0125] * 4 + [0.00625] * 8 + [0.003125] * 16 + [0.0015625]
    assert epsilons[4:] == pytest.approx([epsilons[0] + math.log(w) for w in decayed])
    total = None
    for eps in reversed(epsilons):
        pld = sum_pld.round_pld(eps, n)
        total = pld if total is None else total.compose(pld, sum_pld.COMPOSE_TRUNCATION)
    assert total is not None
    by_hand = float(total.get_epsilon_for_delta(DELTA))
    for i in range(36):
        ledger = ledger.record(i, n)
    assert ledger.spent_epsilon() == pytest.approx(by_hand, rel=1e-6)
    assert by_hand <= 1.0 + 1e-9
    # Thirty-two completion rounds (their weights sum to 0.4516 of a main round) cost the main
    # rounds ~0.1 of local epsilon (8.527 against 8.632 without them), 0.063 more than the
    # weights before 2026-12-05 (0.02 for the first three, halved after: 0.18125, 8.590).
    before = PrivacyLedger.open_allocated(1.0, DELTA, allocation_offsets(
        (1.0,) * 4 + (0.02,) * 3 + (0.01,) * 4 + (0.005,) * 8 + (0.0025,) * 16 + (0.00125,)), n)
    assert 0.05 < before.eps_local - ledger.eps_local < 0.08
    plain = PrivacyLedger.open(1.0, DELTA, 4, n)
    assert 0.09 < plain.eps_local - ledger.eps_local < 0.12


def test_a_simulation_completes_long_items_end_to_end() -> None:
    users = [{LONG: 1, "a": 1} for _ in range(3000)] + [{"b": 1} for _ in range(1000)]
    dataset = from_user_counts(users, name="long", provenance="test")
    config = RunConfig(eps_agg=4.0, codec="5bit", dim_limit=2**16, seed=1)
    result = simulate(dataset, config)
    assert LONG in {h.item for h in result.heavy_hitters if h.ended}
    assert len(result.rounds) > config.rounds  # completion rounds ran
    assert result.privacy["round_eps_local"][-1] < result.privacy["round_eps_local"][0]


@pytest.mark.parametrize("setting, named", [
    ({"two_runs": True}, "--two-runs"),
    ({"segment_bits": 15}, "--segment-bits 15"),
    ({"algorithm": "triehh", "theta": 10}, "--algorithm triehh"),
    ({"leftover_rounds": "passes"}, "--leftover-rounds passes"),
])
def test_completion_rounds_asked_for_where_they_cannot_run_are_refused(
        setting: dict, named: str) -> None:
    """The default's completion rounds drop quietly with a setting that rules them out (the
    run says so by its rounds); a number asked for is refused, naming the setting."""
    assert RunConfig(**setting).validate().completion() == 0
    with pytest.raises(ConfigError, match=f"completion_rounds 20 cannot run with {named}"):
        RunConfig(**setting, completion_rounds=20).validate()
    assert RunConfig(**setting, completion_rounds=0).validate().completion() == 0
