"""A device process logs, once a run, how many of its devices' items are longer than that run's
codes (the task's codec and max_bits) and how many devices hold one: the run finds those only
cut. Before, nothing on the devices' side said so."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device.fleet import Fleet
from fedhh_device.report import DeviceData

LONG = "https://example.com/" + "a" * 40


def _fleet() -> Fleet:
    def data(*words: str) -> DeviceData:
        return DeviceData(words, np.ones(len(words), dtype=np.int64))

    return Fleet([(0, data("word", LONG)), (1, data("word")), (2, data(LONG, LONG + "b"))],
                 object(), {}, lambda address: None, seed=1)


def _told(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("items longer than")]


def test_the_items_past_a_runs_codes_are_counted_once_a_run(
        caplog: pytest.LogCaptureFixture) -> None:
    fleet = _fleet()
    caplog.set_level(logging.INFO)
    task = pb.Task(run_id="r1", codec="unicode", max_bits=60)
    fleet._tell_past_codes(task)
    fleet._tell_past_codes(task)  # (a second task of the run: said already)
    [record] = _told(caplog)
    assert (record.run_id, record.max_bits, record.items, record.devices_holding,  # type: ignore[attr-defined]
            record.devices) == ("r1", 60, 2, 2, 3)  # type: ignore[attr-defined]
    caplog.clear()
    fleet._tell_past_codes(pb.Task(run_id="r2", codec="unicode", max_bits=4096))
    assert _told(caplog) == []  # (every item fits: nothing)
    fleet._tell_past_codes(pb.Task(run_id="r3", codec="no-such-book", max_bits=60))
    assert _told(caplog) == []  # (a codec the report refuses: nothing here)
