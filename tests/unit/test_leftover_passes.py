"""Rounds a tree finished without (issue 15, ``leftover_rounds="passes"``): new trees over the
rounds left, everything found so far deny-listed, charged as the rounds they replace, while the
rounds left can still cover an item. Population: every device holds the same 20 common words
and one of 24 rare ones, so one tree finds the common words and only a later pass, with them
deny-listed, hears about the rare ones."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fedhh.config import RunConfig
from fedhh.data.dataset import FederatedDataset, from_user_counts
from fedhh.errors import ConfigError
from fedhh.simulation.runner import simulate

COMMON = ("the", "and", "you", "that", "was", "for", "with", "have", "this", "not", "but", "are",
          "they", "what", "all", "there", "your", "out", "about", "just")
RARE = tuple("".join(p) for p in itertools.product("kqz", "aeiou", "xy"))[:24]
# Passes run without completion rounds (RunConfig.completion); said explicitly here.
CONFIG = RunConfig(codec="5bit", rounds=12, eps_agg=1.0, dim_limit=2**16, seed=1,
                   completion_rounds=0)


@pytest.fixture(scope="module")
def population() -> FederatedDataset:
    rng = np.random.default_rng(0)
    users = [{**dict.fromkeys(COMMON, 1), RARE[int(rng.integers(len(RARE)))]: 1}
             for _ in range(20_000)]
    return from_user_counts(users, name="common-and-rare")


def test_passes_spend_the_rounds_a_tree_left_unspent(population: FederatedDataset) -> None:
    idle = simulate(population, CONFIG)
    passes = simulate(population, RunConfig(**{**CONFIG.overrides(), "leftover_rounds": "passes"}))
    # One tree needs 3 to 5 of the 12 rounds paid for; the rest stay unspent without passes.
    assert 3 <= len(idle.rounds) <= 5
    assert idle.ledger is not None and len(idle.ledger.spends) == len(idle.rounds)
    found_idle = {h.item for h in idle.heavy_hitters}
    found = {h.item for h in passes.heavy_hitters}
    # The first tree hears the common words and, by chance, a few rare ones (0-3 over seeds 1-6:
    # each rare word is held by ~4% of the devices, near the threshold); the passes hear them.
    assert set(COMMON) <= found_idle and len(found_idle & set(RARE)) <= 4
    assert set(COMMON) <= found and len(found & set(RARE)) >= 20
    # Each pass deny-lists what the earlier ones found: nothing is found twice.
    codes = [h.code for h in passes.heavy_hitters]
    assert len(codes) == len(set(codes))
    # Passes run while the rounds left can cover 60 bits at 16 bits a round (4 rounds).
    assert len(idle.rounds) < len(passes.rounds) <= 12
    assert 12 - len(passes.rounds) < 4
    later = [r for r in passes.rounds if r["extra"].get("pass")]
    assert later and all(r["extra"]["pass"] >= 2 for r in later)
    # The run numbers its rounds on from pass to pass, and each item carries the run's round
    # that found it, so the list, by round, never mixes the passes.
    assert [r["round"] for r in passes.rounds] == list(range(1, len(passes.rounds) + 1))
    first_pass = len(passes.rounds) - len(later)
    hitter_rounds = [h.round for h in passes.heavy_hitters]
    assert hitter_rounds == sorted(hitter_rounds)
    assert {h.item for h in passes.heavy_hitters if h.round > first_pass} >= set(RARE) - found_idle
    found_in = {r["round"] for r in passes.rounds if r["finished"]}
    assert set(hitter_rounds) <= found_in
    # Same local epsilon, every round charged once and in order, within the target.
    assert passes.privacy["eps_local"] == idle.privacy["eps_local"]
    assert passes.ledger is not None
    assert [s.round_index for s in passes.ledger.spends] == list(range(len(passes.rounds)))
    assert passes.ledger.projected_epsilon() <= CONFIG.eps_agg * (1 + 1e-9)


def test_unknown_leftover_rule_is_refused() -> None:
    with pytest.raises(ConfigError, match="leftover_rounds"):
        RunConfig(leftover_rounds="again").validate()
