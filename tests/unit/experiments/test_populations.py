"""The populations by name: resolve() opens them and absolute() leaves their names as they are,
from one mapping (a name that were only in one of them would be taken for a relative path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fedhh.experiments import populations


def test_a_named_population_is_opened_by_name_and_never_made_a_path(
        tiny_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(populations.NAMED, "new-population", lambda: tiny_path)
    monkeypatch.chdir(tmp_path)
    for name in populations.NAMED:  # a directory of that name here is not the population
        (tmp_path / name).mkdir()
        assert populations.absolute(name) == name
    assert populations.resolve("new-population").root == tiny_path
    (tmp_path / "elsewhere").mkdir()
    assert populations.absolute("elsewhere") == os.path.join(tmp_path, "elsewhere")
