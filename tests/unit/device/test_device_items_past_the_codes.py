"""A device process logs, once a run, how many of its devices' items are longer than that run's
codes (the task's codec and max_bits) and how many devices hold one: the run finds those only
cut. Before, nothing on the devices' side said so. The counting runs in a thread no device awaits:
on the event loop it held every device of the process (4.4 s for 950,000 distinct items)."""

from __future__ import annotations

import asyncio
import logging
import threading

import numpy as np
import pytest

from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device import fleet as fleet_module
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


async def _tell(fleet: Fleet, task: pb.Task) -> None:
    fleet._tell_past_codes(task)
    await asyncio.gather(*fleet._counting)


def test_the_items_past_a_runs_codes_are_counted_once_a_run(
        caplog: pytest.LogCaptureFixture) -> None:
    fleet = _fleet()
    caplog.set_level(logging.INFO)
    task = pb.Task(run_id="r1", codec="unicode", max_bits=60)

    async def scenario() -> None:
        await _tell(fleet, task)
        await _tell(fleet, task)  # (a second task of the run: said already)
        [record] = _told(caplog)
        assert (record.run_id, record.max_bits, record.items, record.devices_holding,  # type: ignore[attr-defined]
                record.devices) == ("r1", 60, 2, 2, 3)  # type: ignore[attr-defined]
        caplog.clear()
        await _tell(fleet, pb.Task(run_id="r2", codec="unicode", max_bits=4096))
        assert _told(caplog) == []  # (every item fits: nothing)
        await _tell(fleet, pb.Task(run_id="r3", codec="no-such-book", max_bits=60))
        assert _told(caplog) == []  # (a codec the report refuses: nothing here)

    asyncio.run(scenario())


def test_the_counting_leaves_the_event_loop_to_the_devices(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The devices' loop goes on while the items are counted: the counting runs off its thread
    and the task that asked returns before it is done."""
    counted_on: list[threading.Thread] = []
    release = threading.Event()
    real = fleet_module.past_codes

    def past_codes(vocabulary: tuple[str, ...], codec: object) -> np.ndarray:
        counted_on.append(threading.current_thread())
        if threading.current_thread() is not threading.main_thread():
            release.wait(timeout=60)  # (held until the loop has shown it goes on)
        return real(vocabulary, codec)  # type: ignore[arg-type]

    monkeypatch.setattr(fleet_module, "past_codes", past_codes)
    fleet = _fleet()
    caplog.set_level(logging.INFO)

    async def scenario() -> None:
        loop_thread = threading.current_thread()
        try:
            fleet._tell_past_codes(pb.Task(run_id="r1", codec="unicode", max_bits=60))
            await asyncio.sleep(0)  # (the loop turns: a device's step would run here)
        finally:
            release.set()
        await asyncio.gather(*getattr(fleet, "_counting", ()))  # (none: counted on the loop)
        assert counted_on and counted_on[0] is not loop_thread

    asyncio.run(scenario())
    [record] = _told(caplog)
    assert record.items == 2  # type: ignore[attr-defined]


def test_the_items_a_runs_deny_list_denies_cut_alike_are_left_out(
        caplog: pytest.LogCaptureFixture) -> None:
    """A device compares codes: an item whose cut code is on the task's deny list is never
    output, so it is not counted (as `fedhh simulate` and `fedhh up` leave it out)."""
    other = "mailto:" + "b" * 40
    fleet = Fleet([(0, DeviceData((LONG, "word"), np.ones(2, dtype=np.int64))),
                   (1, DeviceData((other,), np.ones(1, dtype=np.int64)))],
                  object(), {}, lambda address: None, seed=1)
    codec = Codec.from_spec("unicode", 60)
    denied = cw.to_wire(codec.encode_many([LONG + "c"]).codes, 60)  # (cut as LONG is)
    caplog.set_level(logging.INFO)
    asyncio.run(_tell(fleet, pb.Task(run_id="r1", codec="unicode", max_bits=60,
                                     deny_list=denied)))
    [record] = _told(caplog)
    assert (record.items, record.devices_holding) == (1, 1)  # type: ignore[attr-defined]
