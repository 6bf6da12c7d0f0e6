"""The resumable result store: one finished run per key, never recomputed.

Layout: ``<root>/<key>.json`` (the run's command, configuration, privacy calibration, metrics
and per-round diagnostics) and ``<root>/<key>.npz`` (its output codes and the slice of the
ground truth its plots need). The arrays are written first and the JSON last, each atomically
(write to a temporary file, then rename), so a run interrupted at any point leaves either a
complete entry or none. A JSON file that cannot be read is treated as missing and the run
is done again.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedhh.data.dataset import atomic_file
from fedhh.metrics import Truth

log = logging.getLogger(__name__)


@dataclass
class RunRecord:
    """A finished run. ``data`` holds JSON values; ``arrays`` the output codes and truth slice
    (``output_codes``, ``truth_codes``, ``truth_weighted``, ``truth_unweighted``)."""

    key: str
    seed: int
    argv: list[str]
    command: str
    data: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def metrics(self) -> dict[str, Any]:
        metrics: dict[str, Any] = self.data.get("metrics", {})
        return metrics

    @property
    def output_codes(self) -> np.ndarray:
        return self.arrays["output_codes"]

    def truth(self) -> Truth:
        """The ground truth restricted to this run's output and the true top |output| items
        of each metric (enough for its curves and weight ratio)."""
        return Truth(self.arrays["truth_codes"], self.arrays["truth_weighted"],
                     self.arrays["truth_unweighted"])

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "seed": self.seed, "argv": self.argv, "command": self.command,
                **self.data}


class ResultStore:
    """Finished runs under a directory (created on first write)."""

    ARRAYS = ("output_codes", "truth_codes", "truth_weighted", "truth_unweighted")

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.root / f"{key}.json", self.root / f"{key}.npz"

    def has(self, key: str) -> bool:
        meta, arrays = self._paths(key)
        return meta.is_file() and arrays.is_file()

    def load(self, key: str) -> RunRecord | None:
        """The stored run, or None when it is missing or unreadable."""
        meta_path, array_path = self._paths(key)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            with np.load(array_path, allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in self.ARRAYS}
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError) as error:
            log.warning("ignoring unreadable stored run %s: %s", key, error)
            return None
        if not isinstance(meta, dict) or meta.get("key") != key:
            log.warning("ignoring stored run %s: its JSON does not describe it", key)
            return None
        data = {k: v for k, v in meta.items() if k not in ("key", "seed", "argv", "command")}
        return RunRecord(key, int(meta["seed"]), list(meta["argv"]), str(meta["command"]),
                         data, arrays)

    def save(self, record: RunRecord) -> None:
        missing = [name for name in self.ARRAYS if name not in record.arrays]
        if missing:
            raise ValueError(f"run {record.key} lacks the arrays {missing}")
        self.root.mkdir(parents=True, exist_ok=True)
        meta_path, array_path = self._paths(record.key)
        with atomic_file(array_path) as out:
            np.savez_compressed(out, allow_pickle=False,
                                **{name: record.arrays[name] for name in self.ARRAYS})
        with atomic_file(meta_path, "w") as meta:
            meta.write(json.dumps(record.to_json(), indent=1, default=jsonable) + "\n")


def jsonable(value: Any) -> Any:
    """JSON fallback for numpy scalars, enums and other values of configurations."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "value"):
        return value.value
    return str(value)
