"""What the benchmarks that time alternated repeats print and write (not a benchmark)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path


def spread(values: Sequence[float]) -> str:
    """``median (min-max)`` of the repeats, one decimal each."""
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def publish(lines: list[str], out: Path) -> None:
    """Print the report and write it to ``out``."""
    text = "\n".join(lines) + "\n"
    print(text)
    out.write_text(text)
