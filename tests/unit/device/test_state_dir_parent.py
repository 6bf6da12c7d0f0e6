"""A device process's --state-dir is made only as its last folder: a missing parent is refused,
naming it, and nothing is made. Before, every missing folder on the path was made, so a typo
in a parent (/data/devcies/state) started a fresh tree of identities and budgets."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh_device.main import check_state_dir


def test_a_state_dir_whose_parent_is_missing_is_refused_naming_the_parent(
        tmp_path: Path) -> None:
    wanted = tmp_path / "typo" / "deeper" / "state"
    with pytest.raises(ConfigError, match=(
            f"^--state-dir {wanted}: the folder {wanted.parent} does not exist; ")):
        check_state_dir(str(wanted))
    assert list(tmp_path.iterdir()) == []


def test_the_last_folder_is_made_and_an_existing_one_kept(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert check_state_dir(str(state)) == state and state.is_dir()
    (state / "devices.json").write_text("{}")
    assert check_state_dir(str(state)) == state
    assert (state / "devices.json").read_text() == "{}"
