"""One run of an experiment: its run configuration, the command that reproduces it, its store key.

A study's variant is a ``fedhh.config.RunConfig`` holding the knobs the study varies; the suite
adds its ``SuiteSettings`` (the privacy target) and a seed (``run_config``). The same configuration
gives the `fedhh simulate` command printed in the report (``command_line``: the flags are
generated from the configuration, so every number can be reproduced with one shell command) and
the store key (a hash of the configuration's non-default fields and the dataset's identity).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, replace
from typing import Any

from fedhh.config import SIMULATION_DIM_LIMIT, Mode, RunConfig
from fedhh.config.flags import to_argv
from fedhh.errors import ConfigError

STORE_VERSION = 4  # 2: lossless codecs (non-a-z items encode differently); 3: RunConfig keys;
# 4: the default accountant is the one of the released sums (issue 12)


@dataclass(frozen=True)
class SuiteSettings:
    """Suite-wide choices: the dataset (name or path) and the aggregate privacy target."""

    dataset: str
    eps_agg: float = 1.0
    delta: float = 1e-6

    def __post_init__(self) -> None:
        if not self.eps_agg > 0:
            raise ConfigError(f"eps_agg must be > 0, got {self.eps_agg}")
        if not 0 < self.delta < 1:
            raise ConfigError(f"delta must be in (0, 1), got {self.delta}")


def setting_of(config: RunConfig, dataset: str | None = None) -> str:
    """The population and codec (and dataset, when not the suite's), e.g. ``single item,
    huffman``: runs of one setting and seed share their ground truth."""
    where = f", {dataset}" if dataset else ""
    return f"{'single item' if config.single_item else 'multiple items'}, {config.codec}{where}"


def canonical(config: RunConfig) -> RunConfig:
    """Equivalent configurations made equal, so they share one store entry: OptPrefixTree at
    sampling rate 1 samples nobody out (the same run as without sampling), and P given as the
    simulation's default is the default."""
    if config.algorithm == "optprefixtree" and config.sampling_rate == 1.0:
        config = replace(config, sampling_rate=None)
    if config.dim_limit == SIMULATION_DIM_LIMIT:
        config = replace(config, dim_limit=None)
    return config


def run_config(spec: RunConfig, settings: SuiteSettings, seed: int) -> RunConfig:
    """The full configuration of one run of a study's variant."""
    if seed < 0:
        raise ConfigError(f"seed must be >= 0, got {seed}")
    config = replace(canonical(spec), eps_agg=settings.eps_agg, delta=settings.delta, seed=seed)
    return config.validate(Mode.SIMULATION)


def command_line(config: RunConfig, settings: SuiteSettings, dataset: str | None = None) -> str:
    """The shell command that reproduces a run (on ``dataset``, default the suite's)."""
    return shlex.join(["fedhh", "simulate", *simulate_argv(config, settings, dataset)])


def simulate_argv(config: RunConfig, settings: SuiteSettings, dataset: str | None = None
                  ) -> list[str]:
    """The `fedhh simulate` arguments of a run (the privacy target and the seed always
    spelled out, for a reader of the report)."""
    return ["--dataset", dataset or settings.dataset,
            *to_argv(config, Mode.SIMULATION, always=("eps_agg", "delta", "seed"))]


def run_key(config: RunConfig, dataset_identity: dict[str, Any]) -> str:
    """Store key of a run: its non-default settings plus the dataset's identity (so a dataset
    named by name or by path shares entries, and a rebuilt dataset does not)."""
    blob = json.dumps({"version": STORE_VERSION, "dataset": dataset_identity,
                       "config": canonical(config).overrides()}, sort_keys=True, default=list)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def static_key(name: str, codec: str, max_bits: int, dataset_identity: dict[str, Any]) -> str:
    """Store key of a measurement that is not a simulation (e.g. the warm-start list alone)."""
    blob = json.dumps({"version": STORE_VERSION, "dataset": dataset_identity, "static": name,
                       "codec": codec, "max_bits": max_bits}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]
