"""A device's budget file that is JSON but not a budget is refused as corrupt when read.

Before, only its shape was checked: a spend whose eps_local was NaN (JSON that Python reads)
made the spent sum NaN, and ``NaN + eps > cap`` is false, so the device never refused a report
again (an unlimited budget); a field of another type ended each of the device's tasks with a
TypeError (the whole device process, before the fleet caught a task's unforeseen errors).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fedhh.errors import ConfigError, PrivacyError
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device.budget import DeviceBudget

GOOD_SPEND = {"run_id": "r", "round": 0, "eps_local": 40.0, "at": 1000.0}
GOOD_REPORT = {"run_id": "r", "round": 0, "digest": "ab", "ones": [1, 5]}


def _write(path: Path, spends: object, reports: object) -> None:
    path.write_text(json.dumps({"spends": spends, "reports": reports}))


@pytest.mark.parametrize(("spends", "reports"), [
    ([{**GOOD_SPEND, "eps_local": float("nan")}], {}),
    ([{**GOOD_SPEND, "eps_local": float("inf")}], {}),
    ([{**GOOD_SPEND, "eps_local": -5.0}], {}),
    ([{**GOOD_SPEND, "eps_local": "40"}], {}),
    ([{**GOOD_SPEND, "eps_local": True}], {}),
    ([{**GOOD_SPEND, "at": None}], {}),
    ([{**GOOD_SPEND, "round": "0"}], {}),
    ([{**GOOD_SPEND, "extra": 1}], {}),
    (["r"], {}),
    ({"r": GOOD_SPEND}, {}),
    ([GOOD_SPEND], [GOOD_REPORT]),
    ([GOOD_SPEND], {"r": {**GOOD_REPORT, "ones": ["1"]}}),
    ([GOOD_SPEND], {"r": {**GOOD_REPORT, "ones": 3}}),
    ([GOOD_SPEND], {"r": {**GOOD_REPORT, "digest": None}}),
])
def test_a_budget_file_with_fields_of_other_types_is_refused_as_corrupt(
        tmp_path: Path, spends: object, reports: object) -> None:
    path = tmp_path / "5.json"
    _write(path, spends, reports)
    with pytest.raises(ConfigError, match=r"5\.json is corrupt"):
        DeviceBudget.load(path, 100.0, 3600.0)


def test_a_well_formed_file_is_read_and_its_spends_count(tmp_path: Path) -> None:
    path = tmp_path / "5.json"
    _write(path, [GOOD_SPEND, {**GOOD_SPEND, "round": 1, "eps_local": 50}],
           {"r": GOOD_REPORT})
    budget = DeviceBudget.load(path, 100.0, 3600.0)
    budget.clock = lambda: 1500.0
    assert budget.spent() == 90.0
    with pytest.raises(PrivacyError, match="budget is spent"):
        budget.report(pb.Task(run_id="r", round=2, eps_local=20.0), lambda: np.array([1]))
    # A report of another run within the cap is made.
    assert budget.report(pb.Task(run_id="s", round=0, eps_local=10.0),
                         lambda: np.array([3])).tolist() == [3]


def test_a_budget_file_that_cannot_be_read_is_refused_as_the_device_refuses_a_task(
        tmp_path: Path) -> None:
    """A folder at the file's name (or a file the process may not read): a ConfigError, which
    the device answers by giving up its seat (``Fleet._perform``). Before, the OSError failed
    the task as a bug would, logged with its traceback, and the seat was kept, never used."""
    path = tmp_path / "5.json"
    path.mkdir()
    with pytest.raises(ConfigError, match=r"5\.json cannot be read: Is a directory"):
        DeviceBudget.load(path, 100.0, 3600.0)
