"""Per-configuration statistics over seeds, and paired comparisons between configurations.

Every scalar of a run (heavy hitters found, false positives, utility loss, the local epsilon,
...) is summarised over the seeds as mean, sample standard deviation, min and max. Two
configurations are compared by the ratio of their values seed by seed (runs with the same
seed share the single items in the single-data-point setting, so the pairing removes part of
the noise); the ratio's mean and its range over seeds are what the claims report.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fedhh.experiments.store import RunRecord
from fedhh.experiments.studies import Study, StudyVariant


def _metric(*path: str) -> Callable[[RunRecord], float | None]:
    def get(record: RunRecord) -> float | None:
        value: object = record.data
        for part in path:
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        return float(value) if isinstance(value, int | float) and value is not None else None

    return get


def _own_true_positives(record: RunRecord) -> float | None:
    if "run_metrics" in record.data:
        return float(record.data["run_metrics"]["true_positives"])
    return _metric("metrics", "true_positives")(record)


def _round_false_positives(record: RunRecord) -> float | None:
    rounds = record.data.get("rounds")
    if not rounds or any(r.get("actual_false_positives") is None for r in rounds):
        return None
    return float(sum(r["actual_false_positives"] for r in rounds))


def _round_fp_ratio(record: RunRecord) -> float | None:
    """False positives among the elements kept over all rounds (what PruneHH controls)."""
    fp = _round_false_positives(record)
    kept = sum(r["kept"] for r in record.data.get("rounds", ()))
    return fp / kept if fp is not None and kept else None


def _trimmed(record: RunRecord) -> float | None:
    """Live prefixes dropped because the next segment left no room for them."""
    rounds = record.data.get("rounds")
    return float(sum(r["trimmed"] for r in rounds)) if rounds else None


def _threshold(record: RunRecord) -> float | None:
    """Median detection threshold over the rounds (estimated devices an element needs)."""
    rounds = record.data.get("rounds")
    return float(np.median([r["threshold"] for r in rounds])) if rounds else None


def _first_threshold(record: RunRecord) -> float | None:
    rounds = record.data.get("rounds")
    return float(rounds[0]["threshold"]) if rounds else None


def _rounds_run(record: RunRecord) -> float | None:
    return float(len(record.data["rounds"])) if "rounds" in record.data else None


# name -> (column title, getter); the order is the order of the CSV columns.
SCALARS: dict[str, tuple[str, Callable[[RunRecord], float | None]]] = {
    "true_positives": ("heavy hitters found", _metric("metrics", "true_positives")),
    "false_positives": ("false positives", _metric("metrics", "false_positives")),
    "fp_ratio": ("empirical FP ratio", _metric("metrics", "false_positive_ratio")),
    "discovered": ("output size", _metric("metrics", "discovered")),
    "whole_items_found": ("whole items found (not truncated)",
                          _metric("metrics", "whole_items_found")),
    "whole_precision": ("whole true items / output size",
                        _metric("metrics", "whole_precision")),
    "whole_recall_top50": ("top 50 items found whole",
                           _metric("metrics", "whole_recall_at", "50")),
    "whole_recall_top100": ("top 100 items found whole",
                            _metric("metrics", "whole_recall_at", "100")),
    "cut_prefixes": ("heavy prefixes left cut", _metric("metrics", "cut_prefixes")),
    "round_false_positives": ("false positives kept over the rounds", _round_false_positives),
    "round_fp_ratio": ("FP ratio of the kept elements over the rounds", _round_fp_ratio),
    "own_true_positives": ("found by the run itself", _own_true_positives),
    "utility_loss_weighted": ("utility loss (weighted)",
                              _metric("metrics", "weighted", "utility_loss")),
    "utility_loss_unweighted": ("utility loss (unweighted)",
                                _metric("metrics", "unweighted", "utility_loss")),
    "discovered_mass_weighted": ("discovered mass (weighted)",
                                 _metric("metrics", "weighted", "discovered_mass")),
    "recall_top100": ("recall of the top 100", _metric("metrics", "weighted", "recall_at", "100")),
    "recall_top1000": ("recall of the top 1000",
                       _metric("metrics", "weighted", "recall_at", "1000")),
    "eps_local": ("local epsilon per round", _metric("privacy", "eps_local")),
    "sampling_rate": ("sampling rate", _metric("privacy", "sampling_rate")),
    "noise_scale": ("noise scale", _metric("privacy", "noise_scale")),
    "rounds_run": ("rounds run", _rounds_run),
    "trimmed": ("prefixes trimmed by the dimension limit", _trimmed),
    "threshold": ("median threshold (devices)", _threshold),
    "first_threshold": ("first round's threshold (devices)", _first_threshold),
    "wall_s": ("wall time (s)", _metric("timings", "wall_s")),
}


@dataclass(frozen=True)
class Stat:
    mean: float
    sd: float
    min: float
    max: float
    n: int

    @staticmethod
    def of(values: np.ndarray) -> Stat:
        v = np.asarray(values, dtype=np.float64)
        v = v[np.isfinite(v)]
        if v.size == 0:
            nan = float("nan")
            return Stat(nan, nan, nan, nan, 0)
        sd = float(v.std(ddof=1)) if v.size > 1 else 0.0
        return Stat(float(v.mean()), sd, float(v.min()), float(v.max()), int(v.size))

    def fmt(self, digits: int = 0) -> str:
        if self.n == 0:
            return "-"
        if self.n == 1 or self.sd == 0:
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.sd:.{digits}f}"


@dataclass
class VariantResult:
    variant: StudyVariant
    records: list[RunRecord]  # one per seed, in seed order

    @property
    def label(self) -> str:
        return self.variant.label

    def values(self, metric: str) -> np.ndarray:
        getter = SCALARS[metric][1]
        return np.array([_nan(getter(r)) for r in self.records], dtype=np.float64)

    def stat(self, metric: str) -> Stat:
        return Stat.of(self.values(metric))

    @property
    def segments(self) -> str:
        """The segment lengths of the runs (the most common sequence; '*' marks variation)."""
        seqs = [tuple(r.data.get("segments", ())) for r in self.records]
        if not seqs or not seqs[0]:
            return "-"
        common, count = Counter(seqs).most_common(1)[0]
        return "[" + ", ".join(str(s) for s in common) + "]" + ("" if count == len(seqs) else "*")


@dataclass(frozen=True)
class Ratio:
    """Seed-paired ratio of a metric between two configurations."""

    per_seed: np.ndarray
    of_means: float

    @property
    def stat(self) -> Stat:
        return Stat.of(self.per_seed)

    def fmt(self) -> str:
        if not math.isfinite(self.of_means):
            # (the reference found nothing in any seed: the report said "nanx")
            return "- (nothing to compare: the reference found none)"
        s = self.stat
        low, high = f"{s.min:.2f}", f"{s.max:.2f}"
        if s.n <= 1 or low == high:
            return f"{self.of_means:.2f}x"
        return f"{self.of_means:.2f}x (seeds {low}-{high})"


@dataclass
class StudyResults:
    study: Study
    seeds: list[int]
    variants: dict[str, VariantResult]
    num_users: int

    def __getitem__(self, label: str) -> VariantResult:
        return self.variants[label]

    def ratio(self, a: str, b: str, metric: str = "true_positives") -> Ratio:
        va, vb = self[a].values(metric), self[b].values(metric)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_seed = np.where(vb > 0, va / np.where(vb > 0, vb, 1), np.nan)
        def mean(values: np.ndarray) -> float:  # nan when no seed has the value
            finite = values[np.isfinite(values)]
            return float(finite.mean()) if finite.size else float("nan")

        mean_b = mean(vb)
        of_means = mean(va) / mean_b if mean_b > 0 else float("nan")
        return Ratio(per_seed[np.isfinite(per_seed)], of_means)


def _nan(value: float | None) -> float:
    return float("nan") if value is None or not math.isfinite(value) else value
