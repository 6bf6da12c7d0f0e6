"""Progress meters: shown on a terminal only, redrawn while a step works, and wired into every
long step of preparing a dataset (generation, conversion, checking, ground truth)."""

from __future__ import annotations

import dataclasses
import io
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fedhh.data import progress as progress_module
from fedhh.data.dataset import from_user_counts, load_dataset, save_dataset
from fedhh.data.progress import Meter
from fedhh.data.synthetic import SyntheticShape, generate_synthetic
from fedhh.data.text import import_text
from fedhh.data.truth import compute_truth

SMALL = dataclasses.replace(SyntheticShape(), tail_strings=20_000, num_topics=50,
                            topic_size=500)


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


Screen = Callable[[], Terminal]


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Screen:
    """Makes stderr a terminal and shows meters at once (called in the test itself: pytest
    puts its own stderr back after fixtures run)."""

    def use() -> Terminal:
        screen = Terminal()
        monkeypatch.setattr(sys, "stderr", screen)
        monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
        return screen

    return use


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def test_a_meter_draws_its_step_on_a_terminal(terminal: Screen) -> None:
    screen = terminal()
    with Meter(True, "counting", 10, " things") as meter:
        meter.update(4)
        wait_for(lambda: "4/10" in screen.getvalue())
        meter.update(6)
    shown = screen.getvalue()
    assert "counting" in shown and "10/10" in shown and shown.endswith("\n")


def test_a_meter_redraws_while_its_count_stands_still(terminal: Screen,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    screen = terminal()
    monkeypatch.setattr(progress_module, "REDRAW_S", 0.01)
    with Meter(True, "waiting", 3) as meter:
        meter.update(1)
        wait_for(lambda: screen.getvalue().count("1/3") >= 3)


@pytest.mark.parametrize("asked,tty", [(False, True), (True, False)])
def test_no_meter_unless_asked_for_on_a_terminal(asked: bool, tty: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    screen = Terminal() if tty else io.StringIO()
    monkeypatch.setattr(sys, "stderr", screen)
    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    with Meter(asked, "hidden", 5) as meter:
        meter.update(5)
    assert screen.getvalue() == ""


def test_a_quick_step_leaves_no_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    monkeypatch.setattr(progress_module, "DELAY_S", 3600.0)
    with Meter(True, "quick", 5) as meter:
        meter.update(5)
    assert screen.getvalue() == ""


def test_the_ground_truth_is_metered(terminal: Screen) -> None:
    ds = from_user_counts([{"a": 2, "b": 1}, {}, {"b": 3}], name="tiny")
    screen = terminal()
    compute_truth(ds, progress=True)
    assert re.search(r"ground truth of tiny: 100%.* 3.00/3.00 \[", screen.getvalue())


def test_loading_a_dataset_meters_its_check(terminal: Screen, tmp_path: Path) -> None:
    save_dataset(from_user_counts([{"a": 2, "b": 1}, {"c": 1}], name="tiny"), tmp_path / "d")
    screen = terminal()
    load_dataset(tmp_path / "d", progress=True)
    assert re.search(r"checking tiny: 100%.* 3.00/3.00 \[", screen.getvalue())


def test_generating_a_population_meters_every_stage(terminal: Screen,
                                                    tmp_path: Path) -> None:
    screen = terminal()
    generate_synthetic(tmp_path / "g", num_users=300, seed=1, shape=SMALL, workers=1,
                       shard_users=100, name="gen", progress=True)
    shown = screen.getvalue()
    assert re.search(r"gen: word tables: 100%.* 9/9 \[", shown)
    assert re.search(r"gen: users: 100%.* 300/300 \[", shown)
    assert re.search(r"gen: writing: 100%.* 6/6 \[", shown)


def test_importing_text_meters_the_bytes_read(terminal: Screen, tmp_path: Path) -> None:
    source = tmp_path / "users.txt"
    source.write_text("a b\n\nc c\n")
    screen = terminal()
    import_text(source, tmp_path / "d", progress=True)
    shown = screen.getvalue()
    assert re.search(r"reading users.txt: 100%.* 9\.00/9\.00 \[", shown)
    assert re.search(r"users: writing: 100%.* 1/1 \[", shown)
