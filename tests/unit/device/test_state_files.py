"""A device process's state files (--state-dir: devices.json, budgets/USER.json) damaged or
edited into other JSON are refused naming the file as corrupt, and nothing is written.

Before, devices.json holding JSON other than an object ([], 5, "x") was an AttributeError
traceback, a device id of 1e400 an OverflowError, and either file holding arrays nested
thousands deep a RecursionError."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedhh.errors import ConfigError
from fedhh_device.budget import DeviceBudget
from fedhh_device.fleet import Fleet
from fedhh_device.report import DeviceData

DEEP = "[" * 100_000


@pytest.mark.parametrize("text", [
    "[]", "5", '"x"', DEEP,
    '{"0": {"device_id": 1e400, "credential": "", "key": "00", "coordinator_public": ""}}',
])
def test_a_damaged_identities_file_is_refused_as_corrupt(tmp_path: Path, text: str) -> None:
    state = tmp_path / "devices.json"
    state.write_text(text)
    data = DeviceData(("word",), np.ones(1, dtype=np.int64))
    with pytest.raises(ConfigError, match=f"^{state} is corrupt: "):
        Fleet([(0, data)], object(), {}, lambda address: None, state_dir=tmp_path, seed=1)
    assert [p.name for p in tmp_path.iterdir()] == ["devices.json"]
    assert state.read_text() == text


def test_a_budget_file_nested_too_deep_is_refused_as_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "0.json"
    path.write_text(DEEP)
    with pytest.raises(ConfigError, match=f"^{path} is corrupt: "):
        DeviceBudget.load(path, 10.0, 86_400.0)
    assert path.read_text() == DEEP
