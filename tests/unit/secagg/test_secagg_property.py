"""Property: for any parameters and dropout pattern, a round releases the exact plaintext sum
over its contributors, or aborts and releases nothing; no device's two secrets are both revealed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fedhh.secagg.messages import Stage
from fedhh.secagg.simulate import DropoutPlan, make_cohort, run_round

STAGES = [Stage.ADVERTISE_KEYS, Stage.SHARE_KEYS, Stage.MASKED_INPUT, Stage.CONSISTENCY_CHECK,
          Stage.UNMASK]


@st.composite
def rounds(draw: st.DrawFn) -> tuple[dict[str, Any], dict[int, np.ndarray], DropoutPlan]:
    n = draw(st.integers(2, 16))
    even = [k for k in range(2, n - 1, 2)]
    k = draw(st.sampled_from([*even, n - 1]))
    t = draw(st.integers(1, k))
    dimension = draw(st.integers(1, 40))
    auth = draw(st.booleans())
    n_min = draw(st.integers(1, n)) if draw(st.booleans()) else 1
    params: dict[str, Any] = dict(n=n, dimension=dimension, k=k, t=t, n_min=n_min,
                  modulus_bits=draw(st.sampled_from([16, 32])), device_auth=auth,
                  consistency_check=auth and draw(st.booleans()),
                  seed=draw(st.integers(0, 2**16)))
    reports: dict[int, np.ndarray] = {}
    for u in range(1, n + 1):
        ones = draw(st.sets(st.integers(0, dimension - 1), max_size=dimension))
        reports[u] = np.array(sorted(ones), dtype=np.int64)
    # Each device drops before one stage (probability 1/3, stage uniform), or never (None).
    when = draw(st.lists(st.sampled_from([*([None] * 10), *STAGES]), min_size=n, max_size=n))
    plan = DropoutPlan({s: frozenset(u for u, w in enumerate(when, 1) if w == s)
                        for s in STAGES})
    return params, reports, plan


@settings(max_examples=250, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(rounds())
def test_released_sum_is_exact_or_nothing_is_released(
        case: tuple[dict[str, Any], dict[int, np.ndarray], DropoutPlan]) -> None:
    params, reports, plan = case
    cohort = make_cohort(**params)
    outcome = run_round(cohort, reports, plan)
    # No device ever has both of its secrets' shares released.
    assert all(len(kinds) == 1 for kinds in outcome.revealed.values())
    assert not outcome.device_aborts, outcome.device_aborts  # an honest server never trips one
    assert not outcome.rejected
    if outcome.result is None:
        assert outcome.abort is not None
        event(f"aborted: {outcome.abort.reason.value}")
        return
    event("released")
    assert outcome.abort is None
    result = outcome.result
    assert np.array_equal(result.total.astype(np.int64), outcome.expected_total)
    assert result.num_contributors == len(outcome.contributors) >= params["n_min"]
    survivors = [u for u in reports if u in outcome.contributors]
    plain = np.zeros(params["dimension"], dtype=np.int64)
    for u in survivors:
        plain[reports[u]] += 1
    assert np.array_equal(result.total.astype(np.int64), plain)


@settings(max_examples=25, derandomize=True, database=None, deadline=None)
@given(st.integers(3, 12), st.integers(1, 30), st.data())
def test_without_dropouts_every_valid_round_completes(n: int, dimension: int,
                                                      data: st.DataObject) -> None:
    k = data.draw(st.sampled_from([*range(2, n - 1, 2), n - 1]))
    t = data.draw(st.integers(1, k))
    cohort = make_cohort(n, dimension, k, t, n_min=n, seed=n * 100 + dimension)
    reports = {u: np.array([u % dimension]) for u in range(1, n + 1)}
    outcome = run_round(cohort, reports)
    assert outcome.result is not None and outcome.result.num_contributors == n
    assert np.array_equal(outcome.result.total.astype(np.int64), outcome.expected_total)
