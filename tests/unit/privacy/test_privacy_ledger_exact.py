"""The ledger compares its projection with the target exactly, and a sampled run's population
is at least n_min."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

from fedhh.errors import PrivacyError
from fedhh.privacy.ledger import PrivacyLedger

ARGS = (1e-6, 2, 1000)  # delta, rounds, n_min (with FAST: composed in milliseconds)
FAST = "closed-form"


def shown_above(message: str, before: str, target: float) -> bool:
    """Whether the figure after ``before`` in ``message`` is above ``target``."""
    found = re.search(re.escape(before) + r"([0-9.e+-]+) > ", message)
    return found is not None and float(found.group(1)) > target


def test_a_projection_above_the_target_by_less_than_a_billionth_is_refused() -> None:
    # (before, anything up to eps_agg * (1 + 1e-9) was accepted: the plan, a charge, overspent)
    planned = PrivacyLedger.open(100.0, *ARGS, eps_local=0.5, method=FAST).projected_epsilon()
    at = PrivacyLedger.open(planned, *ARGS, eps_local=0.5, method=FAST)  # at the target: fits
    assert at.projected_epsilon() == planned
    below = planned * (1 - 5e-10)
    with pytest.raises(PrivacyError, match=rf"gives eps_agg=(\S+) > {below!r} ") as refused:
        PrivacyLedger.open(below, *ARGS, eps_local=0.5, method=FAST)
    assert shown_above(str(refused.value), "gives eps_agg=", below)

    tight = replace(at, eps_agg=math.nextafter(planned, 0.0))
    check = tight.check(0, 1000)
    assert not check.accepted and check.projected_epsilon == planned
    # (the figure reads as above the budget: all its digits where 6 would not)
    assert shown_above(check.reason, "the projected eps_agg to ", tight.eps_agg)
    assert at.check(0, 1000).accepted

    spent = at.record(0, 1000).record(1, 1000)
    assert not spent.overspent
    assert replace(spent, eps_agg=math.nextafter(planned, 0.0)).overspent


def test_a_population_below_n_min_is_refused_declared_or_stored() -> None:
    # (before, 50 devices under an n_min of 100 were planned at round(0.5 * 50) participants)
    with pytest.raises(PrivacyError, match=r"population 50 is below n_min \(100\): no round "
                                           r"sampled from 50 devices can reach 100 contributors"):
        PrivacyLedger.open(1e3, 1e-6, 4, 100, sampling_rate=0.5, eps_local=3.0, population=50)
    stored = PrivacyLedger.open(1e3, 1e-6, 4, 100, sampling_rate=0.5, eps_local=3.0,
                                population=400, method="clones")  # (quicker than "sum")
    data = stored.to_dict()
    assert PrivacyLedger.from_dict(data) == stored
    with pytest.raises(PrivacyError, match=r"malformed ledger: population 40 is below n_min"):
        PrivacyLedger.from_dict({**data, "population": 40})
