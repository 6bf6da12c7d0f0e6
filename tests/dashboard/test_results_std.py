"""The dashboard's standard deviation of a row that stands for several cut prefixes is the
sum's (its parts' noises add, ``estimate_std(..., parts)``), as `fedhh simulate` reports it;
it was one element's at the summed count, understated by up to sqrt(parts)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from fedhh.config import RunConfig
from fedhh.server.mechanisms import LocalRandomizer, estimate_std
from fedhh.server.prefixtree import HeavyHitter
from fedhh_coordinator.dashboard.results import cut_prefixes

# (a run whose eps_local the fake does not know: a cut row the rounds ran out on reads "no
# rounds left", fedhh.server.causes.ran_out_cause)
UNKNOWN_BUDGET = {"config": RunConfig(), "ledger": SimpleNamespace(eps_local=None)}


def test_a_merged_cut_row_has_its_sums_std() -> None:
    mechanism = LocalRandomizer(2.0)
    merged = HeavyHitter(item="ab…", estimate=300.0, code=0, round=4, ended=False,
                         truncated=True, max_bits=64, bits=18, parts=3,
                         note="3 cut prefixes show as this text")
    single = HeavyHitter(item="cd…", estimate=300.0, code=0, round=4, ended=False,
                         truncated=True, max_bits=64, bits=18)
    tree: Any = SimpleNamespace(mechanism_for=lambda _round: mechanism,
                                cut_prefixes=lambda _state: [merged, single])
    parts: Any = SimpleNamespace(tree=tree, state=None, **UNKNOWN_BUDGET)
    rounds: Any = [SimpleNamespace(round=4, state="released", participants=5000,
                                   contributors=5000)]
    hits = cut_prefixes(parts, rounds)
    assert hits[0].std == pytest.approx(estimate_std(mechanism, 300.0, 5000, 3), rel=1e-12)
    assert hits[1].std == pytest.approx(estimate_std(mechanism, 300.0, 5000), rel=1e-12)
    assert hits[0].std > hits[1].std
