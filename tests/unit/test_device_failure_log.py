"""A device process whose devices' rounds fail alike logs the failure once per round and cause,
then a count, not once per device: with the aggregator unreachable, a 250-device process logged
250 "secure aggregation failed" warnings a round (fedhh_device.failures)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.errors import ConfigError
from fedhh.rpc.participation import ParticipationEnd, SessionResult
from fedhh.secagg import RoundKeys, Stage
from fedhh.secagg.primitives import system_random
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device import secagg_run
from fedhh_device.secagg_run import Floors, run_secure_aggregation
from fedhh_device.timing import CallStats

LOGGER = "fedhh_device.secagg_run"
UNREACHABLE = "UNAVAILABLE: failed to connect to all addresses (the test's)"
LATE = ("late for the round (a stage closed before this device's message; the round goes on "
        "without it, as after a dropout)")


class Stats:
    def __init__(self) -> None:
        self.calls = CallStats()
        self.outcome_seconds: dict[str, list[float]] = {}


@pytest.fixture(autouse=True)
def counted_before() -> None:
    """The rounds other tests of this process left uncounted are counted (and forgotten)
    before each test: the trackers are the process's, as in a device process."""
    secagg_run.log_round_counts()


@pytest.fixture
def ends(monkeypatch: pytest.MonkeyPatch) -> dict[int, SessionResult]:
    """How each device's participation ends, by its secagg id (set by the test): the round's
    config and the protocol are stood in for, only the outcome matters here."""
    ending: dict[int, SessionResult] = {}

    class Device:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.secagg_id = args[2]

    async def participate(channel: Any, device: Device, ones: Any, **kwargs: Any
                          ) -> SessionResult:
        await asyncio.sleep(0)  # (the devices of a round overlap, as they do over a network)
        return ending[device.secagg_id]

    monkeypatch.setattr(secagg_run, "SecAggDevice", Device)
    monkeypatch.setattr(secagg_run, "_check_clock", lambda device: None)
    monkeypatch.setattr(secagg_run, "participate", participate)
    return ending


def _task(secagg_id: int, round_: int = 3, attempt: int = 0) -> pb.Task:
    return pb.Task(run_id="run", round=round_, attempt=attempt, secagg_id=secagg_id,
                   round_config=b"config-%d" % round_)


async def _devices(tasks: list[pb.Task]) -> list[str]:
    """The devices of ``tasks`` take part, then the process stops (logging its counts)."""
    key = Ed25519PrivateKey.generate()
    keys = RoundKeys.generate(system_random)
    try:
        return await asyncio.gather(*(run_secure_aggregation(
            object(), task, key, keys, b"", np.zeros(1, dtype=np.int64), None, Stats(),
            Floors()) for task in tasks))
    finally:
        secagg_run.log_round_counts()


def _lines(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno == level]


def test_250_devices_failing_alike_log_one_warning_and_one_count(
        ends: dict[int, SessionResult], caplog: pytest.LogCaptureFixture) -> None:
    for secagg_id in range(1, 251):
        ends[secagg_id] = SessionResult(Stage.ADVERTISE_KEYS, ParticipationEnd.UNAVAILABLE,
                                        detail=UNREACHABLE)
    caplog.set_level(logging.DEBUG, LOGGER)
    outcomes = asyncio.run(_devices([_task(u) for u in range(1, 251)]))
    assert outcomes == ["failed"] * 250
    first, summary = _lines(caplog, logging.WARNING)
    assert first.getMessage() == "secure aggregation failed"
    assert (first.round, first.outcome, first.stage, first.detail) == (  # type: ignore[attr-defined]
        3, "unavailable", "ADVERTISE_KEYS", UNREACHABLE)
    # The rest are not lost: each is a debug line, and the count names them all.
    assert len(_lines(caplog, logging.DEBUG)) == 249
    assert summary.devices == 250  # type: ignore[attr-defined]
    assert summary.details == {UNREACHABLE: 250}  # type: ignore[attr-defined]
    assert "250 devices" in summary.getMessage() and "unavailable" in summary.getMessage()
    assert len(secagg_run._FAILURES) == 0  # (nothing kept once the round's devices are done)


def test_each_cause_and_each_round_has_its_own_warning(
        ends: dict[int, SessionResult], caplog: pytest.LogCaptureFixture) -> None:
    for secagg_id in range(1, 11):
        ends[secagg_id] = SessionResult(Stage.ADVERTISE_KEYS, ParticipationEnd.UNAVAILABLE,
                                        detail=UNREACHABLE)
    for secagg_id in range(11, 14):
        ends[secagg_id] = SessionResult(Stage.UNMASK, ParticipationEnd.TIMED_OUT,
                                        detail=f"no request ({secagg_id})")
    ends[14] = SessionResult(Stage.DONE, ParticipationEnd.COMPLETED, contributed=True)
    caplog.set_level(logging.INFO, LOGGER)
    tasks = [_task(u) for u in range(1, 15)] + [_task(u, round_=4) for u in range(1, 15)]
    outcomes = asyncio.run(_devices(tasks))
    assert outcomes.count("completed") == 2
    warnings = _lines(caplog, logging.WARNING)
    firsts = sorted((r.round, r.outcome) for r in warnings  # type: ignore[attr-defined]
                    if r.getMessage() == "secure aggregation failed")
    assert firsts == [(3, "timed_out"), (3, "unavailable"), (4, "timed_out"), (4, "unavailable")]
    counts = sorted((r.round, r.outcome, r.devices) for r in warnings  # type: ignore[attr-defined]
                    if r.getMessage() != "secure aggregation failed")
    assert counts == [(3, "timed_out", 3), (3, "unavailable", 10), (4, "timed_out", 3),
                      (4, "unavailable", 10)]
    timed_out = next(r for r in warnings if r.getMessage() != "secure aggregation failed"
                     and r.outcome == "timed_out")  # type: ignore[attr-defined]
    assert timed_out.details == {f"no request ({u})": 1 for u in (11, 12, 13)}  # type: ignore[attr-defined]


def test_a_lone_failure_is_one_warning_and_a_stopped_round_is_still_counted(
        ends: dict[int, SessionResult], caplog: pytest.LogCaptureFixture) -> None:
    ends[1] = SessionResult(Stage.SHARE_KEYS, ParticipationEnd.ROUND_ABORTED, detail="aborted")
    caplog.set_level(logging.DEBUG, LOGGER)
    asyncio.run(_devices([_task(1)]))
    assert [r.getMessage() for r in _lines(caplog, logging.WARNING)] == [
        "secure aggregation failed"]
    caplog.clear()

    # The process stops while a device of the round still takes part: the ones that failed
    # are counted all the same.
    for secagg_id in (2, 3):
        ends[secagg_id] = SessionResult(Stage.ADVERTISE_KEYS, ParticipationEnd.UNAVAILABLE,
                                        detail=UNREACHABLE)

    async def stopped() -> None:
        hung = asyncio.Event()
        original = secagg_run.participate

        async def participate(channel: Any, device: Any, ones: Any, **kwargs: Any) -> Any:
            if device.secagg_id == 4:
                await hung.wait()
            return await original(channel, device, ones, **kwargs)

        secagg_run.participate = participate
        running = asyncio.ensure_future(_devices([_task(u) for u in (2, 3, 4)]))
        for _ in range(1000):  # (until devices 2 and 3 have failed; 4 holds the round open)
            if len(_lines(caplog, logging.DEBUG)) + len(_lines(caplog, logging.WARNING)) == 2:
                break
            await asyncio.sleep(0)
        assert len(_lines(caplog, logging.WARNING)) == 1
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    asyncio.run(stopped())
    summary = _lines(caplog, logging.WARNING)[-1]
    assert summary.devices == 2  # type: ignore[attr-defined]
    assert len(secagg_run._FAILURES) == 0


def test_devices_refusing_a_round_alike_log_one_warning_and_one_count(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A config below the devices' floors: each device refuses the round before contacting the
    aggregator, and the process says so once, then counts them (was a warning per device)."""
    below = "the round's config is below this device's floors: n_min=15 < floor 30"

    class Refusing:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise ConfigError(below)

    monkeypatch.setattr(secagg_run, "SecAggDevice", Refusing)
    caplog.set_level(logging.DEBUG, LOGGER)
    # (each device refuses before the next begins: no two of a round overlap here)
    outcomes = asyncio.run(_devices([_task(u) for u in range(1, 26)] + [_task(1, round_=4)]))
    assert outcomes == ["failed"] * 26
    warnings = _lines(caplog, logging.WARNING)
    assert len(warnings) == 3, [r.getMessage() for r in warnings]
    first, summary, next_round = warnings
    assert first.getMessage() == "refused the round"
    assert (first.round, first.reason) == (3, below)  # type: ignore[attr-defined]
    assert len(_lines(caplog, logging.DEBUG)) == 24
    # Round 3 is counted as soon as the process moves on to round 4.
    assert summary.getMessage().startswith("refused the round: 25 devices of this process in "
                                           "round 3")
    assert summary.details == {below: 25}  # type: ignore[attr-defined]
    assert (next_round.getMessage(), next_round.round) == (  # type: ignore[attr-defined]
        "refused the round", 4)
    assert len(secagg_run._REFUSALS) == 0


def test_a_device_a_stage_closed_on_is_late_not_failed(
        ends: dict[int, SessionResult], caplog: pytest.LogCaptureFixture) -> None:
    # On a loaded host a quiet close cut devices whose shares came after SHARE_KEYS closed
    # (FAILED_PRECONDITION "message rejected (late)"): the round went on without them, as
    # without a dropout, and the load test counted them "failed" (2-62 of 5,000 devices).
    late = "FAILED_PRECONDITION: message rejected (late): SHARE_KEYS has closed"
    ends[1] = SessionResult(Stage.SHARE_KEYS, ParticipationEnd.LATE, detail=late)
    ends[2] = SessionResult(Stage.UNMASK, ParticipationEnd.LATE, contributed=True,
                            detail="FAILED_PRECONDITION: message rejected (late): UNMASK has "
                                   "closed")
    ends[3] = SessionResult(Stage.SHARE_KEYS, ParticipationEnd.TIMED_OUT, detail="no request")
    caplog.set_level(logging.WARNING, LOGGER)
    outcomes = asyncio.run(_devices([_task(u) for u in (1, 2, 3)]))
    assert outcomes == ["late", "completed", "failed"]
    # The cut device is still told in the log, with its cause and the stage whose message was
    # refused, as late for the round (which goes on without it) where a failure is a failure.
    # (Before, both lines read "secure aggregation failed".)
    lines = {(r.getMessage(), r.outcome, r.stage, r.detail)  # type: ignore[attr-defined]
             for r in _lines(caplog, logging.WARNING)}
    assert lines == {(LATE, "late", "SHARE_KEYS", late),
                     ("secure aggregation failed", "timed_out", "SHARE_KEYS", "no request")}


def test_late_devices_alike_are_counted_apart_from_failed_ones(
        ends: dict[int, SessionResult], caplog: pytest.LogCaptureFixture) -> None:
    late = "FAILED_PRECONDITION: message rejected (late): SHARE_KEYS has closed"
    for secagg_id in (1, 2, 3):
        ends[secagg_id] = SessionResult(Stage.SHARE_KEYS, ParticipationEnd.LATE, detail=late)
    ends[4] = SessionResult(Stage.SHARE_KEYS, ParticipationEnd.TIMED_OUT, detail="no request")
    caplog.set_level(logging.WARNING, LOGGER)
    assert asyncio.run(_devices([_task(u) for u in (1, 2, 3, 4)])) == ["late"] * 3 + ["failed"]
    summary = next(r for r in _lines(caplog, logging.WARNING)
                   if getattr(r, "devices", 0) == 3)
    assert summary.getMessage() == (f"{LATE}: 3 devices of this process in round 3 (attempt 0), "
                                    "late at SHARE_KEYS")
    assert len(secagg_run._LATE) == 0
