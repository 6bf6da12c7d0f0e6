"""One run of an experiment: the `fedhh simulate` options it stands for, and its store key.

A ``RunSpec`` holds the knobs a study varies; ``Settings`` the suite-wide ones (dataset and
privacy target). Together with a seed they become the exact ``fedhh simulate`` argument list
(`simulate_argv`), which is both how the run is configured (parsed by the same parser and
``build_config`` as ``fedhh simulate``) and the command printed in the report, so every number
can be reproduced with one shell command. The store key is a hash of that argument list and of
the dataset's identity.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import asdict, dataclass
from typing import Any

from fedhh.algorithms import ALGORITHMS
from fedhh.codec import CODEC_NAMES
from fedhh.errors import ConfigError
from fedhh.selection import SelectionRule

STORE_VERSION = 2  # 2: lossless codecs (issue 13): non-a-z items encode differently


@dataclass(frozen=True)
class RunSpec:
    """The options of one configuration (defaults are `fedhh simulate`'s defaults)."""

    algorithm: str = "optprefixtree"
    rounds: int = 4
    dim_limit: int = 10_000_000
    fp_ratio: float = 0.5
    segment_bits: int | None = None  # None: adaptive segmentation
    selection: str = "uniform"
    prefix_conditioning: bool = True
    encoding: str = "huffman"
    max_bits: int = 60
    single_item: bool = False
    warm_start: bool = False
    two_runs: bool = False
    sampling_rate: float | None = None  # None: the algorithm's default (calibrated or 1)
    theta: int = 10
    dataset: str | None = None  # None: the suite's dataset

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        if self.encoding not in CODEC_NAMES:
            raise ConfigError(f"encoding must be one of {CODEC_NAMES}, got {self.encoding!r}")
        if self.selection not in {r.value for r in SelectionRule}:
            raise ConfigError(f"selection must be uniform or weighted, got {self.selection!r}")
        if self.rounds < 1:
            raise ConfigError(f"rounds must be >= 1, got {self.rounds}")
        if self.sampling_rate is not None and not 0 < self.sampling_rate <= 1:
            raise ConfigError(f"sampling_rate must be in (0, 1], got {self.sampling_rate}")

    @property
    def runs(self) -> int:
        return 2 if self.two_runs else 1

    @property
    def total_rounds(self) -> int:
        """Rounds simulated (and charged to the budget): rounds x runs."""
        return self.rounds * self.runs

    @property
    def setting(self) -> str:
        """The population and encoding, e.g. ``single item, huffman``: runs of one setting and
        seed share their ground truth."""
        where = f", {self.dataset}" if self.dataset else ""
        return f"{'single item' if self.single_item else 'multiple items'}, {self.encoding}{where}"

    def options(self) -> list[str]:
        """The `fedhh simulate` options of this configuration, in a canonical order.

        Options equal to `fedhh simulate`'s defaults are left out, so equivalent configurations
        (e.g. OptPrefixTree at sampling rate 1 and without sampling) share one store entry.
        """
        argv = ["--algorithm", self.algorithm, "--rounds", str(self.rounds),
                "--dim-limit", str(self.dim_limit), "--fp-ratio", _num(self.fp_ratio)]
        if self.segment_bits is not None:
            argv += ["--segment-bits", str(self.segment_bits)]
        argv += ["--selection", self.selection]
        if not self.prefix_conditioning:
            argv.append("--no-prefix-conditioning")
        argv += ["--encoding", self.encoding, "--max-bits", str(self.max_bits)]
        if self.single_item:
            argv.append("--single-item")
        if self.warm_start:
            argv.append("--warm-start")
        if self.two_runs:
            argv.append("--two-runs")
        rate = self.sampling_rate
        if rate is not None and not (self.algorithm == "optprefixtree" and rate >= 1):
            argv += ["--sampling-rate", _num(rate)]
        if self.algorithm in ("triehh", "triehh++"):
            argv += ["--theta", str(self.theta)]
        return argv

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Settings:
    """Suite-wide choices: the dataset (name or path) and the aggregate privacy target."""

    dataset: str
    eps_agg: float = 1.0
    delta: float = 1e-6

    def __post_init__(self) -> None:
        if not self.eps_agg > 0:
            raise ConfigError(f"eps_agg must be > 0, got {self.eps_agg}")
        if not 0 < self.delta < 1:
            raise ConfigError(f"delta must be in (0, 1), got {self.delta}")


def simulate_argv(spec: RunSpec, settings: Settings, seed: int) -> list[str]:
    """The full `fedhh simulate` argument list of one run."""
    if seed < 0:
        raise ConfigError(f"seed must be >= 0, got {seed}")
    return ["--dataset", spec.dataset or settings.dataset, "--eps-agg", _num(settings.eps_agg),
            "--delta", _num(settings.delta), *spec.options(), "--seed", str(seed)]


def command_line(argv: list[str]) -> str:
    """The shell command that reproduces a run."""
    return shlex.join(["fedhh", "simulate", *argv])


def run_key(argv: list[str], dataset_identity: dict[str, Any]) -> str:
    """Store key of a run: the options except the dataset's spelling, plus its identity (so a
    dataset named by name or by path shares entries, and a rebuilt dataset does not)."""
    options = list(argv)
    if "--dataset" in options:
        at = options.index("--dataset")
        del options[at : at + 2]
    blob = json.dumps({"version": STORE_VERSION, "dataset": dataset_identity,
                       "options": options}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def static_key(name: str, encoding: str, max_bits: int, dataset_identity: dict[str, Any]) -> str:
    """Store key of a measurement that is not a simulation (e.g. the warm-start list alone)."""
    blob = json.dumps({"version": STORE_VERSION, "dataset": dataset_identity, "static": name,
                       "encoding": encoding, "max_bits": max_bits}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _num(value: float) -> str:
    """A float as a short exact option value (1.0 -> '1', 1e-06 -> '1e-06')."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text
