"""`fedhh simulate` plans its run once: the privacy solve the warning on items past the run's
codes needs (``prepare``, 32cd7e04) is the one the run uses. Before, ``simulate()`` solved it
again (2.56 s a solve at the default dataset on a busy 2-core machine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_kit import run_cli

from fedhh.simulation import runner


def test_the_run_is_planned_once(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "users.txt"
    data.write_text("".join(f"{word}\n" for word in ["apple", "banana", "cherry"] * 400))
    planned: list[Any] = []
    real = runner._prepare

    def counted(config: Any, num_devices: int) -> Any:
        planned.append(config.completion())
        return real(config, num_devices)

    monkeypatch.setattr(runner, "_prepare", counted)
    code, _, err = run_cli(["simulate", "--dataset", str(data), "--eps-agg", "1",
                            "--rounds", "4", "--seed", "1", "--quiet"], capsys)
    assert code == 0, err[-2000:]
    # (with_most_completions may try fewer completion rounds: each count once, not twice)
    assert len(planned) == len(set(planned)) >= 1, planned
