"""A device handed a task it must refuse (signed by another key than the coordinator's it pinned
at enrollment, as after the coordinator was restarted with a new signing key; or another
device's task) does not ask for it again and again; and a round it refuses (below its floors)
costs it none of its privacy budget.

Before: the refused task was not remembered as known, so the next GetTask was answered at once
with the same task, refused again: 20 devices of a coordinator restarted with a new key logged
9,763 "rejected a task" lines (and made as many calls) in the 16 s of two attempts. Now the
next poll names the refused task as known, which the coordinator holds until the round has
another task for the device."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from networked_kit import RefusingAggregator

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from aggregator_testkit import COORDINATOR_PUBLIC, make_cohort

from fedhh.rpc.tasks import CohortTasks
from fedhh.secagg import Threat, choose_parameters
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device.fleet import Fleet, Identity
from fedhh_device.report import DeviceData
from fedhh_device.secagg_run import Floors, log_round_counts

DEVICE_ID = 42


class Coordinator:
    """GetTask as the coordinator answers it: the current task at once unless the call names
    it as known, in which case it is held (here: until the test has seen the call)."""

    def __init__(self, task: pb.SignedTask, stop: asyncio.Event) -> None:
        self.task = task
        self.stop = stop
        self.requests: list[pb.GetTaskRequest] = []

    async def GetTask(self, request: pb.GetTaskRequest, **_: Any) -> pb.GetTaskResponse:
        self.requests.append(request)
        if request.known_task == hashlib.sha256(self.task.task).digest() \
                or len(self.requests) >= 50:
            self.stop.set()  # held until the round is over; the test ends here
            await asyncio.Event().wait()
        return pb.GetTaskResponse(task=self.task)


def polls_after_a_refused(task_for: int, signer: Ed25519PrivateKey,
                          pinned: Ed25519PrivateKey) -> list[pb.GetTaskRequest]:
    shared = pb.Task(run_id="r", round=1, attempt=1, eps_local=1.0, codec="5bit", max_bits=10)
    signed = CohortTasks(shared, signer).task(task_for, 1, b"")

    async def scenario() -> list[pb.GetTaskRequest]:
        stop = asyncio.Event()
        coordinator = Coordinator(signed, stop)
        user = DeviceData(("word",), np.ones(1, dtype=np.int64))
        fleet = Fleet([(7, user)], coordinator, {}, lambda _: None, stop=stop)
        fleet._identities[7] = Identity(DEVICE_ID, b"\0" * 32, Ed25519PrivateKey.generate(),
                                        pinned.public_key().public_bytes_raw())
        device = asyncio.create_task(fleet._device(7, user))
        await asyncio.wait_for(stop.wait(), 60)
        device.cancel()
        await asyncio.gather(device, return_exceptions=True)
        return coordinator.requests

    return asyncio.run(scenario())


def test_a_task_signed_by_another_key_is_not_asked_for_again() -> None:
    pinned, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    requests = polls_after_a_refused(DEVICE_ID, signer=other, pinned=pinned)
    assert len(requests) == 2, f"{len(requests)} polls for one refused task"
    assert requests[0].known_task == b""
    assert requests[1].known_task != b""


def test_another_devices_task_is_not_asked_for_again() -> None:
    key = Ed25519PrivateKey.generate()
    requests = polls_after_a_refused(DEVICE_ID + 1, signer=key, pinned=key)
    assert len(requests) == 2, f"{len(requests)} polls for one refused task"


# ---- a round the device refuses costs it no budget --------------------------------------------


def spends_after_a_round(floors: Floors, windows_ms: tuple[int, ...] = (2000,) * 5,
                         calls: list[str] | None = None) -> int:
    """The device's budget spends after a task of a 60-device lying-server round with n_min
    45 (the config signed by the key it pinned) whose stages close ``windows_ms`` apart from
    now; the aggregator calls it made are added to ``calls``."""
    p = choose_parameters(60, 0.1, 0.05, Threat.LYING)
    cohort = make_cohort(60, 64, p.k, p.t, n_min=45, consistency_check=True,
                         windows_ms=windows_ms)  # type: ignore[arg-type]
    task = pb.Task(run_id="r", round=1, attempt=1, prefix_bits=4, prefixes=[3], segment_bits=6,
                   eps_local=1.0, codec="5bit", max_bits=10, selection="uniform",
                   aggregator_address="127.0.0.1:1", round_config=cohort.signed.payload,
                   round_config_signature=cohort.signed.signature, secagg_id=1,
                   admission=cohort.admissions[1].proof, device_id=DEVICE_ID)
    user = DeviceData(("ab",), np.ones(1, dtype=np.int64))
    identity = Identity(DEVICE_ID, b"\0" * 32, cohort.identity_keys[1], COORDINATOR_PUBLIC)

    async def scenario() -> int:
        aggregator = RefusingAggregator(calls if calls is not None else [])
        fleet = Fleet([(7, user)], aggregator, {}, lambda _: aggregator, floors=floors, seed=3)
        try:
            await fleet._perform(7, user, identity, task, cohort.round_keys[1])
        finally:
            log_round_counts()  # (the process stops, as Fleet.run does: its rounds counted)
        assert fleet.stats.failed == 1
        return len(fleet._budget(7).spends)

    return asyncio.run(scenario())


def test_a_round_below_the_devices_floors_spends_none_of_its_budget() -> None:
    """Before: the report was made, and its eps_local recorded as spent, before the round's
    config met the device's floors: a coordinator whose rounds every device refuses (n_min
    below their floor of 100) drained each device's lifetime budget by eps_local a round
    (8 of 100 in each of the probe's rounds), while no report left any device."""
    calls: list[str] = []
    assert spends_after_a_round(Floors(), calls=calls) == 0
    assert calls == ["Decline"]  # its seat given up, nothing else sent
    assert spends_after_a_round(Floors(min_cohort=40)) == 1  # taken part in: spent


def test_a_device_whose_clock_is_ahead_says_so_and_stays_out(caplog: pytest.LogCaptureFixture
                                                             ) -> None:
    """A task whose first stage closed 40 s ago by the device's clock (a clock 40 s or more
    ahead: the task comes before that stage closes). Before: the device made its report (its
    budget spent), advertised its keys (a dropout the round had to recover from), then gave up
    at once with "no request before the previous stage's deadline". Now it refuses the round,
    saying its clock may be ahead, before it spends anything, and its one call to the
    aggregator gives up its seat (Decline: the round need not wait for it)."""
    calls: list[str] = []
    with caplog.at_level(logging.WARNING, logger="fedhh_device.secagg_run"):
        spends = spends_after_a_round(Floors(min_cohort=40), (-40_000, 50_000, 2000, 2000, 2000),
                                      calls)
    assert (spends, calls) == (0, ["Decline"])
    reasons = [getattr(r, "reason", "") for r in caplog.records]
    assert any("at least that far ahead of the coordinator's" in r for r in reasons), reasons
    # A clock within the slack the device waits anyway (its first stage closed 10 s ago):
    # it takes part.
    calls.clear()
    assert spends_after_a_round(Floors(min_cohort=40), (-10_000, 50_000, 2000, 2000, 2000),
                                calls) == 1
    assert calls[:1] == ["Session"] or calls[:1] == ["AdvertiseKeys"], calls
