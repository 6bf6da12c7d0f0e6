"""A device process given a task it cannot handle fails that task alone.

Before, a signed task naming a selection rule the device does not know (a newer coordinator's,
a typo in a run's configuration) raised a ValueError from the report, which the round's refusals
(they catch FedhhError) let through: it ended the gather of ``Fleet.run``, and the whole device
process, every device it hosted, exited with a traceback. Any other unforeseen error in one
device's task did the same.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.device.randomizer import RandomizedResponse, a0_threshold
from fedhh.errors import ConfigError
from fedhh.secagg import RoundConfig, StageDeadlines
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device import fleet as fleet_module
from fedhh_device import secagg_run
from fedhh_device.fleet import Fleet, Identity
from fedhh_device.report import DeviceData, make_report

USER = 5


def _task(selection: str) -> pb.Task:
    config = RoundConfig(b"r", 10, 1024, 16, 5, 4, 3, b"g" * 32, StageDeadlines(1, 2, 3, 4, 5),
                         device_auth=True, identity_root=b"i" * 32).to_bytes()
    return pb.Task(run_id="run", round=1, attempt=1, device_id=9, prefix_bits=0, prefixes=[0],
                   segment_bits=10, eps_local=4.0, codec="5bit", max_bits=30,
                   selection=selection, prefix_conditioning=True, round_config=config)


class OneTask:
    """A coordinator that hands ``task`` once, then answers "nothing" until the fleet stops on
    the third check-in."""

    def __init__(self, task: pb.Task) -> None:
        self.task = task
        self.calls = 0
        self.fleet: Fleet | None = None

    async def GetTask(self, request: pb.GetTaskRequest, metadata: Any = None
                      ) -> pb.GetTaskResponse:
        self.calls += 1
        if self.calls == 1:
            return pb.GetTaskResponse(task=pb.SignedTask(task=self.task.SerializeToString()))
        if self.calls >= 3 and self.fleet is not None:
            self.fleet.stop.set()
        return pb.GetTaskResponse()


def _run_device(task: pb.Task, monkeypatch: pytest.MonkeyPatch) -> tuple[OneTask, Fleet]:
    """One device of a fleet through ``task`` (its signature and round checks taken as passed)
    and two more check-ins; it must end by itself when the fleet stops."""
    coordinator = OneTask(task)
    data = DeviceData(("apple", "日本", "😀", "https://x.example/?q=1", "1 000"),
                      np.array([1, 2, 3, 4, 5]))
    fleet = Fleet([(USER, data)], coordinator, {}, lambda address: None, seed=3)
    coordinator.fleet = fleet
    fleet._identities[USER] = Identity(9, b"credential", Ed25519PrivateKey.generate(), b"")
    monkeypatch.setattr(fleet, "_verified", lambda signed, identity: pb.Task.FromString(
        signed.task))

    async def no_pause(seconds: float) -> None:
        pass

    monkeypatch.setattr(fleet, "_pause", no_pause)
    asyncio.run(asyncio.wait_for(fleet._device(USER, data), 60))
    return coordinator, fleet


def test_an_unknown_selection_rule_is_refused_and_the_device_goes_on(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # The real round up to the report: the config's own checks are not under test here, so the
    # device is stood in for; the round must never reach the aggregator.
    monkeypatch.setattr(secagg_run, "SecAggDevice", lambda *args, **kwargs: object())
    monkeypatch.setattr(secagg_run, "_check_clock", lambda device: None)

    async def participate(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a refused report reached the aggregator")

    monkeypatch.setattr(secagg_run, "participate", participate)
    caplog.set_level(logging.WARNING)
    coordinator, fleet = _run_device(_task("greedy"), monkeypatch)
    assert coordinator.calls == 3  # it checked in again after the task
    assert (fleet.stats.tasks, fleet.stats.failed, fleet.stats.completed) == (1, 1, 0)
    assert fleet._budget(USER).spent() == 0  # nothing reported, nothing spent
    secagg_run.log_round_counts()
    refusal = " ".join(r.getMessage() + str(r.__dict__) for r in caplog.records)
    assert "'greedy' is not one this device knows (uniform, weighted)" in refusal
    assert "apple" not in refusal and "日本" not in refusal


def test_any_other_failure_of_one_task_fails_that_task_not_the_process(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    async def broken(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("something no check foresaw")

    monkeypatch.setattr(fleet_module, "run_secure_aggregation", broken)
    caplog.set_level(logging.ERROR)
    coordinator, fleet = _run_device(_task("uniform"), monkeypatch)
    assert coordinator.calls == 3
    assert (fleet.stats.tasks, fleet.stats.failed) == (1, 1)
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.getMessage() == "a device's task failed unexpectedly"
    assert record.exc_info is not None and "no check foresaw" in str(record.exc_info[1])


def test_a_task_a_stage_closed_on_is_counted_late_not_failed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def cut(*args: Any, **kwargs: Any) -> str:
        return "late"  # (a stage closed before the device's message: run_secure_aggregation)

    monkeypatch.setattr(fleet_module, "run_secure_aggregation", cut)
    _, fleet = _run_device(_task("uniform"), monkeypatch)
    stats = fleet.stats
    assert (stats.tasks, stats.completed, stats.late, stats.failed) == (1, 0, 1, 0)


def test_make_report_refuses_an_unknown_selection_with_a_config_error() -> None:
    data = DeviceData(("apple",), np.array([1]))
    for selection in ("greedy", "", "Uniform"):
        with pytest.raises(ConfigError, match="is not one this device knows"):
            make_report(data, _task(selection), np.random.default_rng(0))


@pytest.mark.parametrize("eps", [22.5, 63.999, 64.0, 1e4, 2.4e6, 1e308])
def test_a_huge_local_epsilon_has_threshold_one_not_an_overflow(eps: float) -> None:
    # 2^32 / (e^eps + 1) < 1 from eps ~22.2 on; Decimal's exp raised decimal.Overflow above
    # ~2.3e6 (clients/web returns 1 there too).
    assert a0_threshold(eps) == 1
    ones = RandomizedResponse(eps).randomize(3, 64, np.random.default_rng(1))
    assert set(ones.tolist()) <= set(range(64))  # (before: decimal.Overflow above ~2.3e6)
