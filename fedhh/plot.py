"""The paper's marginal discovered-frequency plot (sliding window W = 50, true-histogram line)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fedhh.data.dataset import atomic_file
from fedhh.metrics import WINDOW, Truth, marginal_curve


def plot_marginal(
    series: Sequence[tuple[str, np.ndarray]],
    truth: Truth,
    path: str | os.PathLike[str],
    which: str = "weighted",
    window: int = WINDOW,
    title: str | None = None,
    counts_scale: float | None = None,
) -> None:
    """One line per (label, output codes) plus the TruHist line, written to ``path`` in the
    format its suffix names (PNG without one).

    With ``counts_scale`` (the number of users) frequencies are shown as counts instead.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    longest = 0
    for label, codes in series:
        found, top = marginal_curve(codes, truth, which, window)
        scale = counts_scale or 1.0
        ax.plot(np.arange(1, found.size + 1), found * scale, label=f"{label} ({found.size})")
        longest = max(longest, top.size)
    top = truth.ranking(which)[:longest]
    cum = np.concatenate(([0.0], np.cumsum(top)))
    idx = np.arange(top.size)
    true_curve = cum[idx + 1] - cum[np.maximum(idx - window, 0)]
    ax.plot(np.arange(1, top.size + 1), true_curve * (counts_scale or 1.0), "k--", lw=1,
            label="TruHist")
    ax.set_yscale("log")
    ax.set_xlabel("heavy hitters, ordered by true frequency")
    ax.set_ylabel(f"marginal discovered {'counts' if counts_scale else 'frequency'} (W={window})")
    ax.set_title(title or f"Marginal discovered frequencies ({which} metric)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    # Whole or not at all, as the --json beside it: savefig writes in place, so a write cut
    # short (a full disk, a kill) left part of a figure under the name asked for.
    with atomic_file(Path(path)) as out:
        fig.savefig(out, format=Path(path).suffix.lstrip(".").lower() or "png")
    plt.close(fig)
