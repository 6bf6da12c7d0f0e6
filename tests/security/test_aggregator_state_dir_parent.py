"""An aggregation service's --state-dir (aggregator, worker, combiner: the outcome journal) is
made only as its last folder: a missing parent is refused, naming it, and nothing is made.
Before, every missing folder on the path was made, so a typo in a parent started an empty
journal and the service forgot every round it had finished (the record GetOutcome answers
from); the device's --state-dir had the same rule since 07e335b."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh_aggregator.journal import Journal


def test_a_state_dir_whose_parent_is_missing_is_refused_naming_the_parent(
        tmp_path: Path) -> None:
    wanted = tmp_path / "typo" / "deeper" / "state"
    with pytest.raises(ConfigError, match=(
            f"^the state directory {wanted}: the folder {wanted.parent} does not exist; ")):
        Journal(wanted).load()
    assert list(tmp_path.iterdir()) == []


def test_the_last_folder_is_made_and_an_existing_journal_kept(tmp_path: Path) -> None:
    state = tmp_path / "state"
    journal = Journal(state)
    assert journal.load() == {} and state.is_dir()
    journal.close()
    again = Journal(state)
    assert again.load() == {}
    again.close()
