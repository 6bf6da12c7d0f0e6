"""The resumable result store: one finished run per key, never recomputed.

Layout: ``<root>/<key>.json`` (the run's command, configuration, privacy calibration, metrics
and per-round diagnostics) and ``<root>/<key>.npz`` (its output codes and the slice of the
ground truth its plots need). The arrays are written first and the JSON last, each atomically
(write to a temporary file, then rename), so a run interrupted at any point leaves either a
complete entry or none. An entry that cannot be read (a damaged file, or a record that lacks
a field the report reads: a hand edit or a partial copy) is treated as missing, with a warning
naming the file, and the run is done again.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedhh.data.dataset import NPZ_UNREADABLE, atomic_file, read_npz
from fedhh.errors import FedhhError
from fedhh.experiments.studies import DECODE_TIMING, WARM_START_ALONE
from fedhh.metrics import Truth

log = logging.getLogger(__name__)

_NUMBER = (int, float)
# The fields a record must hold, and their JSON types: its identity, then what the report and
# its analysis read from each kind of record (by ``static``: None for a simulated run).
IDENTITY: dict[str, type | tuple[type, ...]] = {
    "key": str, "seed": int, "argv": list, "command": str, "dataset": dict, "timings": dict}
FIELDS: dict[str | None, dict[str, type | tuple[type, ...]]] = {
    None: {"spec": dict, "settings": dict, "config": dict, "privacy": dict, "metrics": dict,
           "segments": list, "rounds": list, "top_hitters": list},
    WARM_START_ALONE: {"source": str, "items": int, "metrics": dict},
    DECODE_TIMING: {"eps_local": _NUMBER, "population": int, "rows": list,
                    "predicted_speedup": _NUMBER},
}
# What every output's metrics hold (fedhh.metrics.evaluate).
METRICS: dict[str, type | tuple[type, ...]] = {
    "discovered": int, "true_positives": int, "false_positives": int,
    "false_positive_ratio": _NUMBER, "weighted": dict, "unweighted": dict}


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
        """The stored run, or None when it is missing or unreadable (a warning names the file
        and what is wrong with it: the run is computed again)."""
        meta_path, array_path = self._paths(key)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        # (UnicodeDecodeError, JSONDecodeError; RecursionError: JSON nested thousands deep)
        except (OSError, ValueError, RecursionError) as error:
            _warn_unreadable(meta_path, error)
            return None
        defect = record_defect(meta, key)
        if defect is not None:
            _warn_unreadable(meta_path, defect)
            return None
        try:
            arrays = read_npz(array_path, self.ARRAYS)
        except FileNotFoundError:
            return None
        except NPZ_UNREADABLE as error:
            _warn_unreadable(array_path, error)
            return None
        defect = arrays_defect(arrays)
        if defect is not None:
            _warn_unreadable(array_path, defect)
            return None
        data = {k: v for k, v in meta.items() if k not in ("key", "seed", "argv", "command")}
        return RunRecord(key, meta["seed"], meta["argv"], meta["command"], data, arrays)

    def save(self, record: RunRecord) -> None:
        """Store ``record`` (its arrays, then its JSON, each atomically); StoreUnwritable
        naming the store and the OS's reason when it cannot be written (a full disk, a
        read-only folder): the run is not stored (an arrays file without its JSON is no
        entry), the entries before it stay."""
        missing = [name for name in self.ARRAYS if name not in record.arrays]
        if missing:
            raise ValueError(f"run {record.key} lacks the arrays {missing}")
        meta_path, array_path = self._paths(record.key)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with atomic_file(array_path) as out:
                np.savez_compressed(out, allow_pickle=False,
                                    **{name: record.arrays[name] for name in self.ARRAYS})
            with atomic_file(meta_path, "w") as meta:
                meta.write(json.dumps(record.to_json(), indent=1, default=jsonable) + "\n")
        except OSError as error:
            # (a full disk's ENOSPC names no file: the OS's "No space left on device" alone
            # ended the suite, with no word of the store or of the runs it holds)
            raise StoreUnwritable(f"cannot store run {record.key} in the result store "
                                  f"{self.root}: {os_reason(error)}") from error


class StoreUnwritable(FedhhError):
    """The result store cannot be written (a full disk, a read-only folder, a quota)."""


def os_reason(error: OSError) -> str:
    """An OS error in words: its reason, and the file it names if it is not the one the
    message names already."""
    reason = error.strerror or " ".join(str(error).split()) or type(error).__name__
    return reason + (f" ({error.filename})" if error.filename else "")


def _warn_unreadable(path: Path, error: object) -> None:
    log.warning("ignoring unreadable stored run %s (it is computed again): %s", path,
                f"{type(error).__name__}: {error}" if isinstance(error, Exception) else error)


def _type_defect(where: str, value: dict[str, Any],
                 fields: dict[str, type | tuple[type, ...]]) -> str | None:
    for name, kind in fields.items():
        if name not in value:
            return f"{where} lacks {name!r}"
        # (bool is an int to Python, never one of these numbers)
        if not isinstance(value[name], kind) or isinstance(value[name], bool):
            return f"{where}: {name!r} is a {type(value[name]).__name__}"
    return None


def record_defect(meta: object, key: str) -> str | None:
    """What makes ``meta`` (a stored JSON) no record of run ``key``, or None: a field the
    report reads missing or of another type (``IDENTITY``, ``FIELDS``, ``METRICS``)."""
    if not isinstance(meta, dict):
        return f"the JSON is a {type(meta).__name__}, not a record"
    if meta.get("key") != key:
        return f"the JSON describes run {meta.get('key')!r}, not {key!r}"
    static = meta.get("static")
    if static not in FIELDS:
        return f"unknown static measurement {static!r}"
    defect = _type_defect("the record", meta, {**IDENTITY, **FIELDS[static]})
    if defect is None and "metrics" in FIELDS[static]:
        defect = _type_defect("its metrics", meta["metrics"], METRICS)
    if defect is None and not all(isinstance(a, str) for a in meta["argv"]):
        defect = "its argv holds a value that is no string"
    return defect


def arrays_defect(arrays: dict[str, np.ndarray]) -> str | None:
    """What makes a stored run's arrays no run's (a hand edit, or arrays of another run), or
    None: each 1-D; the truth's codes ascending and of the output's kind (integers or byte
    strings), with one weighted and one unweighted frequency each. (Read as they were, such
    arrays gave curves of frequencies paired with other codes, without a word.)"""
    for name, array in arrays.items():
        if array.ndim != 1:
            return f"{name!r} has {array.ndim} dimensions, not 1"
    codes, output = arrays["truth_codes"], arrays["output_codes"]
    if codes.dtype.kind not in "uS" or (output.size and output.dtype.kind != codes.dtype.kind):
        return f"its codes are {output.dtype} and {codes.dtype}, not one kind of code"
    if codes.size > 1 and not bool(np.all(codes[1:] > codes[:-1])):
        return "'truth_codes' is not in ascending order"
    for name in ("truth_weighted", "truth_unweighted"):
        if arrays[name].dtype.kind != "f" or arrays[name].size != codes.size:
            return (f"{name!r} holds {arrays[name].size} {arrays[name].dtype} values for "
                    f"{codes.size} codes")
    return None


def jsonable(value: Any) -> Any:
    """JSON fallback for numpy scalars, enums and other values of configurations."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "value"):
        return value.value
    return str(value)
