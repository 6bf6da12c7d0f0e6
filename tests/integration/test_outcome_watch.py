"""GetOutcome's long-poll (a request with ``seen``) at a real aggregator over gRPC: a running
round's answer waits for its stage to change, or for the asked wait, and says it waited
(``watched``). Before, every GetOutcome was answered at once, and the coordinator's stage watch
asked every second while a round ran (about 1 ms of CPU a side per TLS call, at every service
on the way)."""

from __future__ import annotations

import asyncio

from aggregator_testkit import TOKEN, aggregator, make_cohort, run, take_part

from fedhh.rpc.aggregator_client import AggregatorControl
from fedhh.rpc.control_client import OutcomeView
from fedhh.secagg import Stage


def test_a_watch_is_answered_when_the_stage_changes_or_at_its_wait() -> None:
    cohort = make_cohort(4, 16, 3, 2, n_min=3)  # deadlines ten minutes apart: none passes

    async def scenario() -> None:
        async with aggregator() as (_, channel):
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            first = await control.outcome(cohort.round_id)
            assert (first.state, first.stage, first.watched) == ("running",
                                                                 Stage.ADVERTISE_KEYS, False)
            seen = OutcomeView.of(first)

            loop = asyncio.get_running_loop()
            asked = loop.time()
            capped = await control.outcome(cohort.round_id, seen, 0.3)
            assert capped.watched and OutcomeView.of(capped) == seen
            assert loop.time() - asked >= 0.3  # (it waited: nothing changed)

            watch = asyncio.create_task(control.outcome(cohort.round_id, seen, 60))
            await take_part(channel, cohort, range(1, 5))
            changed = await watch
            assert changed.watched
            assert changed.state != "running" or changed.stage != Stage.ADVERTISE_KEYS, changed

            # A round that no longer runs is answered at once, whatever was seen.
            await control.result(cohort.round_id, 60)  # (released, the sum read)
            done = await control.outcome(cohort.round_id, seen, 60)
            assert done.watched and done.state == "released"

    run(scenario())
