"""Malicious-server defaults (issue 10): devices compute the lying-server bound themselves and
refuse configs that fail it or lack device authentication or the consistency check; a
survivor set that splits the neighbour graph is refused by the server and by every device."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from secagg_testkit import drive_to, reports_for

from fedhh.secagg import (
    AbortReason,
    ConsistencyRequest,
    DevicePolicy,
    SecAggAbort,
    SecAggConfigError,
    Stage,
    Threat,
    choose_parameters,
    failure_bounds,
)
from fedhh.secagg.graph import NeighbourGraph, ring_order, survivors_connected
from fedhh.secagg.simulate import DropoutPlan, make_cohort, run_round

STRICT = DevicePolicy(require_device_auth=True, require_consistency_check=True,
                      max_corrupt_fraction=0.05)


def _abort(cohort_kwargs: dict[str, object], policy: DevicePolicy) -> SecAggAbort:
    cohort = make_cohort(**cohort_kwargs)  # type: ignore[arg-type]
    with pytest.raises(SecAggAbort) as info:
        cohort.device(1, policy=policy)
    assert info.value.reason is AbortReason.BAD_CONFIG
    return info.value


@pytest.mark.parametrize("n", [60, 200, 1000])
def test_the_coordinators_lying_server_choice_passes_the_device_bound(n: int) -> None:
    p = choose_parameters(n, 0.1, 0.05, Threat.LYING)
    cohort = make_cohort(n, 8, p.k, p.t, n_min=n // 2, device_auth=True,
                         consistency_check=True)
    cohort.device(1, policy=STRICT)  # does not raise


@pytest.mark.parametrize("n", [200, 1000])
def test_curious_server_parameters_are_refused(n: int) -> None:
    """The parameters the coordinator used to choose (t <= k/2) fail the lying-server bound:
    a server telling half the neighbours "alive" and half "dropped" would get both secrets."""
    p = choose_parameters(n, 0.1, 0.05, Threat.CURIOUS)
    assert 2 * p.t <= p.k + 1
    abort = _abort(dict(n=n, dimension=8, k=p.k, t=p.t, n_min=n // 2, device_auth=True,
                        consistency_check=True), STRICT)
    assert "fails the lying-server bound" in str(abort)


def test_the_bound_uses_the_devices_own_corrupt_fraction() -> None:
    p = choose_parameters(1000, 0.1, 0.05, Threat.LYING)
    kwargs = dict(n=1000, dimension=8, k=p.k, t=p.t, n_min=500, device_auth=True,
                  consistency_check=True)
    # A device that assumes more colluders than the coordinator sized for refuses.
    assert failure_bounds(1000, p.k, p.t, 0.3, 0.2, Threat.LYING).privacy > 2.0 ** -40
    _abort(kwargs, dataclasses.replace(STRICT, max_corrupt_fraction=0.2))
    # ... and so does one that wants more security bits than the round offers.
    _abort(kwargs, dataclasses.replace(STRICT, security_bits=128))


def test_configs_without_the_check_or_device_auth_are_refused() -> None:
    base = dict(n=8, dimension=8, k=7, t=7, n_min=4)
    abort = _abort({**base, "device_auth": True}, STRICT)
    assert "consistency_check off" in str(abort)
    abort = _abort(base, STRICT)
    assert "device_auth off" in str(abort) and "consistency_check off" in str(abort)


@pytest.mark.parametrize("bad", [dict(max_corrupt_fraction=1.0), dict(assumed_dropout=-0.1),
                                 dict(security_bits=0)])
def test_policy_values_are_checked(bad: dict[str, float]) -> None:
    with pytest.raises(SecAggConfigError):
        DevicePolicy(**bad)  # type: ignore[arg-type]


# -- survivors that split the neighbour graph -----------------------------------------------------

def _connected_by_search(graph: NeighbourGraph, members: set[int]) -> bool:
    if not members:
        return True
    start = min(members)
    seen, frontier = {start}, [start]
    while frontier:
        u = frontier.pop()
        for v in graph.neighbours(u):
            if v in members and v not in seen:
                seen.add(v)
                frontier.append(v)
    return seen == members


@pytest.mark.parametrize(("n", "k"), [(7, 2), (8, 4), (9, 4), (10, 6), (9, 8)])
def test_the_ring_gap_rule_agrees_with_graph_search_on_every_subset(n: int, k: int) -> None:
    seed = bytes(range(32))
    graph = NeighbourGraph(seed, n, k)
    for size in range(n + 1):
        for members in itertools.combinations(range(1, n + 1), size):
            expected = _connected_by_search(graph, set(members))
            assert graph.connected(members) == expected, members
            assert survivors_connected(seed, n, k, members) == expected, members


def _two_gaps(n: int, k: int, seed: bytes) -> set[int]:
    """Devices whose absence cuts the ring twice: two runs of k/2 + 1 consecutive positions."""
    order = ring_order(seed, n)
    run = k // 2 + 1
    return {int(order[i]) for i in range(run)} | {int(order[n // 2 + i]) for i in range(run)}


def test_the_server_refuses_a_survivor_set_that_splits_the_graph() -> None:
    n, k = 40, 6
    cohort = make_cohort(n, 16, k, 3, n_min=10, seed=9)
    gone = _two_gaps(n, k, cohort.config.graph_seed)
    outcome = run_round(cohort, reports_for(n, 16), DropoutPlan.at(Stage.MASKED_INPUT, gone))
    assert outcome.result is None and outcome.abort is not None
    assert outcome.abort.reason is AbortReason.SURVIVORS_DISCONNECTED
    assert outcome.revealed == {}  # no unmask request went out


def test_devices_refuse_to_sign_a_survivor_set_that_splits_the_graph() -> None:
    n, k = 40, 6
    cohort = make_cohort(n, 16, k, 3, n_min=10, seed=9, device_auth=True,
                         consistency_check=True)
    driver = drive_to(cohort, Stage.CONSISTENCY_CHECK)
    request = driver.pending[1]
    assert isinstance(request, ConsistencyRequest)
    survivors = tuple(sorted(set(request.survivors) - _two_gaps(n, k, cohort.config.graph_seed)
                             | {1}))
    device = driver.devices[1]
    with pytest.raises(SecAggAbort) as info:
        device.consistency_check(dataclasses.replace(request, survivors=survivors))
    assert info.value.reason is AbortReason.SURVIVORS_DISCONNECTED


def test_an_honest_round_with_lying_server_parameters_releases_the_exact_sum() -> None:
    n = 60
    p = choose_parameters(n, 0.1, 0.05, Threat.LYING)
    cohort = make_cohort(n, 32, p.k, p.t, n_min=40, device_auth=True, consistency_check=True,
                         seed=2)
    rng = np.random.default_rng(3)
    outcome = run_round(cohort, reports_for(n, 32), DropoutPlan.random(n, 0.1, rng),
                        policy=STRICT)
    assert outcome.result is not None, outcome.abort
    assert np.array_equal(outcome.result.total.astype(np.int64), outcome.expected_total)


def test_too_few_consistency_signatures_abort_before_any_unmask_request() -> None:
    n = 60
    p = choose_parameters(n, 0.1, 0.05, Threat.LYING)
    cohort = make_cohort(n, 32, p.k, p.t, n_min=40, device_auth=True, consistency_check=True,
                         seed=4)
    silent = set(range(1, 22))  # 39 of 60 sign: one short of n_min
    outcome = run_round(cohort, reports_for(n, 32), DropoutPlan.at(Stage.CONSISTENCY_CHECK, silent),
                        policy=STRICT)
    assert outcome.result is None and outcome.abort is not None
    assert outcome.abort.reason is AbortReason.TOO_FEW_DEVICES
    assert outcome.revealed == {}
