"""Output files (--json, --plot): refused before the run when they cannot be written, and
written whole or not at all, a failure one line (fedhh.cli.options)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.cli import options
from fedhh.data import dataset
from fedhh.errors import ConfigError


@pytest.mark.parametrize(("path", "needle"), [
    ("/proc/results.json", "cannot write in /proc"),
    ("/dev/null", "is not a regular file"),
])
def test_an_output_that_cannot_be_written_is_refused_first(path: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        options.check_output("--json", path)


def test_a_failed_write_keeps_the_file_that_was_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "results.json"
    options.write_output("--json", str(target), '{"old": true}\n')

    def full(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(dataset.os, "replace", full)
    with pytest.raises(ConfigError, match=r"results\.json: cannot write it: No space left"):
        options.write_output("--json", str(target), '{"new": true}\n')
    assert target.read_text() == '{"old": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # no temporary left
