"""A deployed device's floors, whoever signed the round (issue 10, item 1): the real device code
(``fedhh_device.secagg_run.run_secure_aggregation`` with the default ``Floors``) refuses a task
whose config has curious-server parameters, no consistency check or no device authentication:
the one call it makes is its Decline (its seat given up, nothing of its own sent); it takes part
in a round with lying-server parameters and the check.
The config is signed with the very key the device trusts: the floor does not depend on who
signed."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np
import pytest
from networked_kit import RefusingAggregator

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from aggregator_testkit import COORDINATOR_PUBLIC, Cohort, make_cohort

from fedhh.secagg import Threat, choose_parameters
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device.fleet import FleetStats
from fedhh_device.secagg_run import Floors, run_secure_aggregation


def _task(cohort: Cohort) -> pb.Task:
    return pb.Task(round_config=cohort.signed.payload,
                   round_config_signature=cohort.signed.signature, secagg_id=1,
                   admission=cohort.admissions[1].proof, round=1, attempt=1)


DECLINED = ["Decline"]  # the calls of a device that refused: its seat given up, no more


def _calls(cohort: Cohort) -> list[str]:
    aggregator = RefusingAggregator()
    outcome = asyncio.run(run_secure_aggregation(
        aggregator,  # type: ignore[arg-type]
        _task(cohort), cohort.identity_keys[1], cohort.round_keys[1], COORDINATOR_PUBLIC,
        np.zeros(0, np.int64), None, FleetStats(), Floors(min_cohort=40)))
    assert outcome == "failed"  # refused by the device, or by the stand-in aggregator
    return aggregator.calls


@pytest.mark.parametrize("n", [60, 200])
def test_curious_server_parameters_are_refused_sending_only_a_decline(n: int) -> None:
    p = choose_parameters(n, 0.1, 0.05, Threat.CURIOUS)
    cohort = make_cohort(n, 64, p.k, p.t, n_min=n // 2 + 10, consistency_check=True)
    assert _calls(cohort) == DECLINED


def test_a_round_without_the_consistency_check_is_refused() -> None:
    p = choose_parameters(60, 0.1, 0.05, Threat.LYING)
    cohort = make_cohort(60, 64, p.k, p.t, n_min=45, consistency_check=False)
    assert _calls(cohort) == DECLINED


def test_a_round_without_device_authentication_is_refused() -> None:
    p = choose_parameters(60, 0.1, 0.05, Threat.LYING)
    cohort = make_cohort(60, 64, p.k, p.t, n_min=45, device_auth=False)
    aggregator = RefusingAggregator()
    outcome = asyncio.run(run_secure_aggregation(
        aggregator,  # type: ignore[arg-type]
        _task(cohort), cohort.identity_keys[1], cohort.round_keys[1], COORDINATOR_PUBLIC,
        np.zeros(0, np.int64), None, FleetStats(), Floors(min_cohort=40)))
    assert (outcome, aggregator.calls) == ("failed", DECLINED)


def test_lying_server_parameters_with_the_check_are_accepted() -> None:
    p = choose_parameters(60, 0.1, 0.05, Threat.LYING)
    cohort = make_cohort(60, 64, p.k, p.t, n_min=45, consistency_check=True)
    assert _calls(cohort) == ["AdvertiseKeys"]  # it took part (and the stand-in refused it)


def test_a_device_assuming_more_colluders_refuses_what_the_coordinator_sized() -> None:
    p = choose_parameters(1000, 0.1, 0.05, Threat.LYING)
    cohort = make_cohort(1000, 8, p.k, p.t, n_min=500, consistency_check=True)
    aggregator = RefusingAggregator()
    outcome = asyncio.run(run_secure_aggregation(
        aggregator,  # type: ignore[arg-type]
        _task(cohort), cohort.identity_keys[1], cohort.round_keys[1], COORDINATOR_PUBLIC,
        np.zeros(0, np.int64), None, FleetStats(),
        Floors(min_cohort=40, max_corrupt_fraction=0.2)))
    assert (outcome, aggregator.calls) == ("failed", DECLINED)
