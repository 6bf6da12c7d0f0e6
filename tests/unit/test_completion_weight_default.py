"""The default completion weights (``RunConfig.completion_weights``: 0.2 of a main round for
the first completion round, which takes over the main rounds' whole unended list) complete
long items whose prefixes the old default (0.02 for the first three) lost in that round, and
the plan still spends exactly the (eps_agg, delta) asked for.

Statistical tolerance. The run is seeded (deterministic); the population leaves a margin that
makes a miss improbable for any seed. Each URL's 300 holders hold nothing else, so every one
of them reports it in every round (count exactly 300). The main rounds' noise has standard
deviation ~12.4 and their thresholds stay below 60 (19 sigma under 300); the first completion
round, at eps_local + ln 0.2, has ~28 and a threshold of ~135 (5.9 sigma under 300; at the old
0.02: ~93 and ~447, above 300, and three of the four were cut). A 5.9-sigma shortfall has
probability below 2e-9, so one of the four is missed with probability below 1e-8."""

from __future__ import annotations

import math

import pytest

from fedhh.config import RunConfig
from fedhh.data.dataset import from_user_counts
from fedhh.simulation.runner import simulate

USERS = 20_000
HOLDERS = 300
# 54-67 bits in the unicode codebook: past what the main rounds cover here (51-56 bits), so
# the first completion round finishes them
URLS = ("https://www.mozilla.org/", "https://www.example.org/", "https://www.apache.org/",
        "https://www.debian.org/")


def test_urls_the_main_rounds_leave_unended_come_back_whole_at_the_defaults() -> None:
    users = [{url: 1} for url in URLS for _ in range(HOLDERS)]
    users += [{"the": 1, "and": 1}] * (USERS - len(users))
    dataset = from_user_counts(users, name="urls", provenance="test")
    config = RunConfig(seed=1, dim_limit=2**16, completion_rounds=3)
    result = simulate(dataset, config)
    whole = {h.item: h.round for h in result.heavy_hitters if h.ended}
    assert set(URLS) <= set(whole), [h.item for h in result.cut_prefixes]
    assert not result.cut_prefixes
    assert max(whole[url] for url in URLS) == config.rounds + 1  # the first completion round

    privacy = result.privacy
    assert privacy["conditions_verified"]
    assert privacy["eps_agg_achieved"] <= privacy["eps_agg_target"] == 1.0
    main = privacy["round_eps_local"][0]
    assert privacy["round_eps_local"][config.rounds:] == pytest.approx(
        [main + math.log(w) for w in (0.2, 0.05, 0.05)], abs=1e-12)
