"""Run a whole discovery over a simulated population and score it.

``simulate(dataset, config)`` builds the population, the algorithm's mechanism and the round
logic (``fedhh.prefixtree.PrefixTree``, the same one the coordinator drives), then for every
round asks ``SimulatedRounds`` for the released sum and advances the tree. With ``runs = 2`` the
first run's output becomes the second run's deny list (the paper's "2 rounds" deny-list mode);
the caller splits the budget (the local epsilon is solved for runs x rounds rounds).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from fedhh.codec import DEFAULT_CODEBOOK, Codec
from fedhh.codec import codes as cw
from fedhh.data.dataset import FederatedDataset
from fedhh.data.truth import GroundTruth
from fedhh.errors import ConfigError
from fedhh.mechanisms import Mechanism
from fedhh.metrics import Truth, evaluate, whole_items
from fedhh.prefixtree import HeavyHitter, PrefixTree, RoundReport, TreeConfig, TreeState
from fedhh.privacy import PrivacyLedger
from fedhh.selection import Selection
from fedhh.simulation.participation import Participation
from fedhh.simulation.population import Population
from fedhh.simulation.rounds import SimulatedRounds

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int, RoundReport], None]


@dataclass(frozen=True)
class SimulationConfig:
    tree: TreeConfig
    mechanism: Mechanism
    encoding: str = DEFAULT_CODEBOOK  # a codec spec: built-in name or codebook JSON
    max_bits: int = 60
    selection: Selection = field(default_factory=Selection)
    participation: Participation = field(default_factory=Participation)
    single_item: bool = False
    deny_list: tuple[str, ...] = ()
    runs: int = 1
    seed: int = 0
    per_device: bool = False

    def validate(self) -> None:
        if self.runs not in (1, 2):
            raise ConfigError(f"runs must be 1 or 2, got {self.runs}")
        Codec(self.encoding, self.max_bits)
        self.tree.validate(self.max_bits)


@dataclass
class SimulationResult:
    heavy_hitters: list[HeavyHitter]
    deny_list: list[str]
    rounds: list[dict[str, Any]]
    metrics: dict[str, Any]
    timings: dict[str, float]
    output_codes: np.ndarray
    truth: Truth | None = None
    ledger: PrivacyLedger | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "heavy_hitters": [h.to_dict() for h in self.heavy_hitters],
            "deny_list": self.deny_list,
            "metrics": self.metrics,
            "rounds": self.rounds,
            "timings": self.timings,
            "ledger": None if self.ledger is None else self.ledger.to_dict(),
        }


def simulate(
    dataset: FederatedDataset,
    config: SimulationConfig,
    truth_items: GroundTruth | None = None,
    progress: ProgressCallback | None = None,
    ledger: PrivacyLedger | None = None,
    population: Population | None = None,
) -> SimulationResult:
    """Run the configured discovery; ``truth_items`` is the dataset's per-item ground truth.

    With a ``ledger`` every released round is recorded in it (round index counted across runs),
    exactly as the coordinator does; a round the ledger refuses stops the run with PrivacyError.
    Under Poisson sampling the accountant's guarantee is over the sampling at the planned
    expected cohort, so a sampled round is recorded at no fewer than the ledger's n_min.
    A ``population`` built once (``Population.build``) can be passed to many runs over the same
    dataset and codec; it is not modified.
    """
    config.validate()
    clock = time.perf_counter()
    codec = Codec(config.encoding, config.max_bits)
    if population is None:
        population = Population.build(dataset, codec)
    elif population.dataset is not dataset or population.codec != codec:
        raise ConfigError("the population was built for another dataset or codec")
    if config.single_item:
        population = population.with_single_items(config.seed)
    timings = {"setup_s": time.perf_counter() - clock}

    deny_words = list(dict.fromkeys(config.deny_list))
    deny_codes = codec.encode_many(deny_words).codes
    all_rounds: list[dict[str, Any]] = []
    tree, state, ledger = _one_run(population, config, codec, deny_codes, 0, ledger, progress,
                                   all_rounds)
    for run in range(1, config.runs):
        # The previous run's output is this run's deny list (the paper's "2 rounds" mode).
        found = cw.from_ints([f.code for f in state.discovered], codec.max_bits)
        deny_codes = np.union1d(deny_codes, found)
        tree, state, ledger = _one_run(population, config, codec, deny_codes, run, ledger,
                                       progress, all_rounds)
    timings["rounds_s"] = time.perf_counter() - clock - timings["setup_s"]
    hitters = tree.heavy_hitters(state)
    deny_display = [codec.display_item(c) for c in cw.to_ints(np.unique(deny_codes))]
    output = np.union1d(cw.from_ints([h.code for h in hitters], codec.max_bits), deny_codes)
    metrics: dict[str, Any] = {}
    truth = ground_truth(population, truth_items)
    if truth is not None:
        metrics = evaluate(output, truth)
        metrics["discovered_by_run"] = len(hitters)
        metrics.update(whole_items(cw.from_ints([h.code for h in hitters], codec.max_bits),
                                   np.array([h.ended for h in hitters], dtype=bool), truth))
    timings["total_s"] = time.perf_counter() - clock
    return SimulationResult(hitters, deny_display, all_rounds, metrics, timings, output, truth,
                            ledger)


def _one_run(
    population: Population,
    config: SimulationConfig,
    codec: Codec,
    deny_codes: np.ndarray,
    run: int,
    ledger: PrivacyLedger | None,
    progress: ProgressCallback | None,
    rounds_out: list[dict[str, Any]],
) -> tuple[PrefixTree, TreeState, PrivacyLedger | None]:
    """One discovery (all its rounds); appends each round's diagnostics to ``rounds_out``."""
    tree = PrefixTree(config.tree, codec, config.mechanism, deny_codes)
    transport = SimulatedRounds(
        population, config.mechanism, config.selection, config.participation,
        seed=config.seed + 1_000_003 * run, per_device=config.per_device,
    )
    state = tree.initial_state()
    while not state.done:
        started = time.perf_counter()
        query = tree.query(state)
        round_sum = transport.aggregate(query)
        if ledger is not None:
            contributors = round_sum.participants
            if config.participation.rate < 1:
                contributors = max(contributors, ledger.n_min)
            ledger = ledger.record(run * config.tree.rounds + query.round - 1, contributors)
        aggregated = time.perf_counter()
        state, report = tree.advance(state, round_sum.sums, round_sum.participants,
                                     round_sum.true_counts)
        finished = time.perf_counter()
        report = replace(report, extra={
            "run": run + 1,
            "aggregate_s": aggregated - started,
            "server_s": finished - aggregated,
        })
        rounds_out.append(report.to_dict())
        if progress is not None:
            progress(run + 1, query.round, report)
    return tree, state, ledger


def ground_truth(population: Population, truth_items: GroundTruth | None) -> Truth | None:
    """Truth over codes: the fixed items' distribution in single-item mode, else the dataset's
    (cached next to the dataset per codec, since recounting shared codes scans every entry)."""
    codes = population.item_codes
    if population.single_items is not None:
        held = population.single_items[population.single_items >= 0]
        freq = np.bincount(held, minlength=codes.size) / max(population.num_users, 1)
        return Truth.from_items(codes, freq, freq)
    if truth_items is None:
        return None
    ds, codec = population.dataset, population.codec
    cache = None
    if ds.root is not None:
        # v2: codes of the lossless codecs (v1 files hold the old lossy codes of the same names).
        cache = Path(ds.root) / f"truth_codes_v2_{codec.key}.npz"
        cached = _load_code_truth(cache, ds)
        if cached is not None:
            return cached
    truth = Truth.from_items(codes, truth_items.weighted, truth_items.unweighted, ds)
    if cache is not None:
        try:
            with open(cache.with_suffix(".tmp"), "wb") as out:
                np.savez(out, codes=truth.codes, weighted=truth.weighted,
                         unweighted=truth.unweighted,
                         shape=np.array([ds.num_users, ds.num_entries, len(ds.vocabulary)]))
            os.replace(cache.with_suffix(".tmp"), cache)
        except OSError as error:  # a read-only dataset directory: just do not cache
            log.info("not caching code truth at %s: %s", cache, error)
    return truth


def _load_code_truth(path: Path, ds: FederatedDataset) -> Truth | None:
    try:
        with np.load(path, allow_pickle=False) as data:
            shape = data["shape"].tolist()
            truth = Truth(data["codes"], data["weighted"], data["unweighted"])
    except (OSError, KeyError, ValueError):
        return None
    if shape != [ds.num_users, ds.num_entries, len(ds.vocabulary)]:
        return None
    if not (truth.codes.size == truth.weighted.size == truth.unweighted.size):
        return None
    return truth


def config_summary(config: SimulationConfig) -> dict[str, Any]:
    """The configuration as plain JSON-ready values."""
    summary = asdict(config)
    summary["deny_list"] = len(config.deny_list)
    return summary
