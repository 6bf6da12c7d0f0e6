"""What the benchmarks that time alternated repeats print and write (not a benchmark)."""

from __future__ import annotations

import json
import pickle
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path


def spread(values: Sequence[float]) -> str:
    """``median (min-max)`` of the repeats, one decimal each."""
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def publish(lines: list[str], out: Path) -> None:
    """Print the report and write it to ``out``."""
    text = "\n".join(lines) + "\n"
    print(text)
    out.write_text(text)


def take_turns(data: object, argv: Callable[[str, str], list[str]], variants: list[str],
               repeats: int) -> dict[str, list[dict[str, float]]]:
    """Each variant's rows: ``repeats`` fresh processes of ``argv(scratch, variant)`` (this
    Python's arguments; ``scratch`` names a file holding ``data`` pickled), the variants
    taking turns, forwards then backwards; a row is the JSON object a child prints last."""
    runs: dict[str, list[dict[str, float]]] = {variant: [] for variant in variants}
    with tempfile.NamedTemporaryFile(suffix=".pickle") as scratch:
        pickle.dump(data, scratch)
        scratch.flush()
        for repeat in range(repeats):
            for variant in variants if repeat % 2 == 0 else reversed(variants):
                child = subprocess.run([sys.executable, *argv(scratch.name, variant)],
                                       check=True, capture_output=True, text=True)
                runs[variant].append(json.loads(child.stdout.strip().splitlines()[-1]))
                print(variant, {k: round(v, 1) for k, v in runs[variant][-1].items()},
                      file=sys.stderr, flush=True)
    return runs
