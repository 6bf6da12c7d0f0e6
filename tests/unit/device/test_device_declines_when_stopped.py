"""A device whose process is asked to stop while it holds a task it has not yet taken part in
(checking the round's config, making its report, waiting its turn to open its stream) gives
up its seat once (``Decline``), so that the round's first stage does not wait for it to the
deadline; one that has taken part sends nothing more (its stream's end, or the deadline, tells
the aggregator). Before, a stop there cancelled the device and nothing was sent: the stage
waited for it to its deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np
from aggregator_testkit import COORDINATOR_PUBLIC, Cohort, make_cohort
from networked_kit import RefusingAggregator

from fedhh.rpc.device_client import Transport
from fedhh.secagg import Threat, choose_parameters
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device.fleet import FleetStats
from fedhh_device.secagg_run import Floors, run_secure_aggregation


def _cohort() -> Cohort:
    p = choose_parameters(60, 0.1, 0.05, Threat.LYING)
    return make_cohort(60, 64, p.k, p.t, n_min=45, consistency_check=True)


def _task(cohort: Cohort) -> pb.Task:
    return pb.Task(round_config=cohort.signed.payload,
                   round_config_signature=cohort.signed.signature, secagg_id=1,
                   admission=cohort.admissions[1].proof, round=1, attempt=1)


class HeldAggregator(RefusingAggregator):
    """Records every call; its first AdvertiseKeys is held until the test cancels it."""

    def __init__(self) -> None:
        super().__init__()
        self.advertising = asyncio.Event()

    async def AdvertiseKeys(self, *args: object, **kwargs: object) -> object:
        self.calls.append("AdvertiseKeys")
        self.advertising.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_a_device_stopped_while_it_makes_its_report_declines_once() -> None:
    cohort = _cohort()
    aggregator = RefusingAggregator()

    async def scenario() -> None:
        making = asyncio.Event()

        async def report() -> np.ndarray:
            making.set()
            await asyncio.Event().wait()  # (its report is being made as the stop comes)
            raise AssertionError("unreachable")

        device = asyncio.create_task(run_secure_aggregation(
            aggregator,  # type: ignore[arg-type]
            _task(cohort), cohort.identity_keys[1], cohort.round_keys[1], COORDINATOR_PUBLIC,
            report, None, FleetStats(), Floors(min_cohort=40)))
        await asyncio.wait_for(making.wait(), 30)
        device.cancel()
        done = await asyncio.gather(device, return_exceptions=True)
        assert isinstance(done[0], asyncio.CancelledError)

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert aggregator.calls == ["Decline"]


def test_a_device_stopped_while_it_waits_to_open_its_stream_declines_once() -> None:
    """In a fleet of thousands most devices holding a task wait their turn to open their
    session streams (the fleet's ``opening``): stopped there, each has told its aggregator
    nothing, and gives up its seat."""
    cohort = _cohort()
    aggregator = RefusingAggregator()

    async def scenario() -> None:
        opening = asyncio.Semaphore(0)  # (every turn taken by other devices)
        device = asyncio.create_task(run_secure_aggregation(
            aggregator,  # type: ignore[arg-type]
            _task(cohort), cohort.identity_keys[1], cohort.round_keys[1], COORDINATOR_PUBLIC,
            np.zeros(0, np.int64), None, FleetStats(), Floors(min_cohort=40),
            transport=Transport.STREAM, opening=opening))
        while not opening._waiters:  # (the device waits for its turn)
            await asyncio.sleep(0)
        device.cancel()
        await asyncio.gather(device, return_exceptions=True)

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert aggregator.calls == ["Decline"]


class HeldStream(RefusingAggregator):
    """Records every call; a session stream it opens never answers."""

    def __init__(self) -> None:
        super().__init__()
        self.opened = asyncio.Event()

    def Session(self, *args: object, **kwargs: object) -> object:
        self.calls.append("Session")
        self.opened.set()

        class Call:
            async def read(self) -> object:
                await asyncio.Event().wait()
                raise AssertionError("unreachable")

            def cancel(self) -> None:
                return None

        return Call()


def _stopped_once(aggregator: Any, reached: Callable[[], asyncio.Event],
                  **transport: Any) -> None:
    """Run device 1 of a cohort against ``aggregator`` and stop it once ``reached()`` is set."""
    cohort = _cohort()

    async def scenario() -> None:
        device = asyncio.create_task(run_secure_aggregation(
            aggregator, _task(cohort), cohort.identity_keys[1], cohort.round_keys[1],
            COORDINATOR_PUBLIC, np.zeros(0, np.int64), None, FleetStats(),
            Floors(min_cohort=40), **transport))
        await asyncio.wait_for(reached().wait(), 30)
        device.cancel()
        await asyncio.gather(device, return_exceptions=True)

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_device_stopped_once_its_stream_opened_sends_no_decline() -> None:
    aggregator = HeldStream()
    _stopped_once(aggregator, lambda: aggregator.opened,
                  transport=Transport.STREAM, opening=asyncio.Semaphore(1))
    assert aggregator.calls == ["Session"]


def test_a_device_stopped_once_it_takes_part_sends_no_decline() -> None:
    aggregator = HeldAggregator()
    _stopped_once(aggregator, lambda: aggregator.advertising)
    assert aggregator.calls == ["AdvertiseKeys"]
