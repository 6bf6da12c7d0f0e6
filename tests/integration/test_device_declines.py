"""The device process (``fedhh_device``) gives up its seat in a round it refuses: the
refusal's ``SecureAggregation.Decline`` reaches a real aggregator, whose first stage then
closes once the other members advertised, not at its deadline (ten minutes here; ``run``
bounds the scenario at 60 s, so a round that waited for the deadline fails). Two places
refuse: the task's local epsilon above the device's limit (before its report is prepared),
and the round's config below its floors (n_min under ``--min-cohort``). The refusing device
spends none of its budget and contributes nothing.

Before, the device sent nothing at all when it refused, and the round waited for it."""

from __future__ import annotations

import numpy as np
import pytest
from aggregator_testkit import COORDINATOR_PUBLIC, TOKEN, aggregator, make_cohort, run, take_part

from fedhh.rpc.aggregator_client import AggregatorControl
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device.fleet import Fleet, Identity
from fedhh_device.report import DeviceData
from fedhh_device.secagg_run import Floors, log_round_counts

N = 6
REFUSING = 6
DEVICE_ID = 42


@pytest.mark.parametrize("floors", [
    Floors(max_eps_local=0.5, min_cohort=4),  # the task's eps_local 1 is above the limit
    Floors(min_cohort=5),  # the round's n_min 4 is below the floor
], ids=["eps_local", "n_min"])
def test_a_refused_round_goes_on_without_waiting_for_the_refusing_device(floors: Floors) -> None:
    cohort = make_cohort(N, 32, 5, 3, n_min=4, windows_ms=(600_000,) * 5,
                         round_id=b"run/device/declines")
    task = pb.Task(run_id="r", round=1, attempt=1, prefix_bits=4, prefixes=[3], segment_bits=6,
                   eps_local=1.0, codec="5bit", max_bits=10, selection="uniform",
                   aggregator_address="aggregator", round_config=cohort.signed.payload,
                   round_config_signature=cohort.signed.signature, secagg_id=REFUSING,
                   admission=cohort.admissions[REFUSING].proof, device_id=DEVICE_ID)
    user = DeviceData(("ab",), np.ones(1, dtype=np.int64))
    identity = Identity(DEVICE_ID, b"\0" * 32, cohort.identity_keys[REFUSING],
                        COORDINATOR_PUBLIC)

    async def scenario() -> tuple[int, int, int]:
        async with aggregator() as (_, channel):
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            fleet = Fleet([(7, user)], channel, {}, lambda _: channel, floors=floors, seed=3)
            try:
                await fleet._perform(7, user, identity, task, cohort.round_keys[REFUSING])
            finally:
                log_round_counts()
            outcomes = await take_part(channel, cohort, range(1, N))
            assert all(o.contributed for o in outcomes), outcomes
            result = await control.result(cohort.round_id, 30)
            return result.num_contributors, fleet.stats.failed, len(fleet._budget(7).spends)

    contributors, failed, spends = run(scenario())
    assert (contributors, failed, spends) == (N - 1, 1, 0)
