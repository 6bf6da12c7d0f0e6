"""`fedhh simulate --plot`'s figure (fedhh.plot) is written whole or not at all, as the --json
beside it: a write cut short keeps the figure that was there and leaves no part behind. Before,
savefig wrote in place, so a full disk or a kill left part of a figure under the name asked for.
The format still follows the suffix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.figure
import numpy as np
import pytest

from fedhh.metrics import Truth
from fedhh.plot import plot_marginal

TRUTH = Truth(np.array([10, 20, 30], dtype=np.uint64), np.array([0.5, 0.3, 0.2]),
              np.array([0.6, 0.3, 0.1]))
SERIES = [("run", np.array([10, 30], dtype=np.uint64))]


def test_a_plot_write_cut_short_keeps_the_figure_that_was_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "marginal.png"
    plot_marginal(SERIES, TRUTH, target)
    before = target.read_bytes()
    assert before.startswith(b"\x89PNG")
    real = matplotlib.figure.Figure.savefig

    def disk_full_half_way(self: Any, fname: Any, **kwargs: Any) -> None:
        real(self, fname, **kwargs)
        if hasattr(fname, "truncate"):
            fname.truncate(100)
        else:
            Path(fname).write_bytes(Path(fname).read_bytes()[:100])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", disk_full_half_way)
    with pytest.raises(OSError, match="No space left"):
        plot_marginal(SERIES, TRUTH, target, title="another")
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["marginal.png"]


@pytest.mark.parametrize(("suffix", "begins"), [(".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_the_format_follows_the_suffix(tmp_path: Path, suffix: str, begins: bytes) -> None:
    target = tmp_path / f"marginal{suffix}"
    plot_marginal(SERIES, TRUTH, target)
    assert target.read_bytes().startswith(begins)
