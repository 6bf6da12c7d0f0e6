"""Plan and execute the studies' runs against the result store.

``Suite`` opens the dataset once, turns studies into a de-duplicated list of planned runs
(one per configuration and seed; configurations shared by several studies run once), and
executes the runs the store does not hold yet, in plan order, one after the other (the
simulator already uses both cores), or hands them to Dask workers (``fedhh.experiments.dask``,
where each worker computes with a ``Suite`` of its own and the client stores). Each run is a
``RunConfig`` passed to the library's ``simulate``, as `fedhh simulate` does with the
configuration its flags describe.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.config import RunConfig
from fedhh.data.dataset import FederatedDataset
from fedhh.data.truth import GroundTruth, dataset_contents
from fedhh.errors import ConfigError
from fedhh.experiments.code import check_unchanged, code_identity
from fedhh.experiments.spec import (
    SuiteSettings,
    command_line,
    run_config,
    run_key,
    simulate_argv,
    static_key,
)
from fedhh.experiments.store import ResultStore, RunRecord
from fedhh.experiments.studies import (
    DECODE_TIMING,
    PAPER,
    PI_RAPPOR,
    PRIVACY_DEPENDENT,
    WARM_START_ALONE,
    Study,
    StudyVariant,
)
from fedhh.metrics import Truth, evaluate
from fedhh.server import RoundReport
from fedhh.simulation.population import Population
from fedhh.simulation.runner import simulate

log = logging.getLogger(__name__)

TOP_HITTERS = 20


@dataclass(frozen=True)
class PlannedRun:
    key: str
    study: str
    label: str
    seed: int
    config: RunConfig | None
    static: str | None
    command: str
    dataset: str = ""  # the dataset's name or path (the suite's unless the variant names one)

    @property
    def total_rounds(self) -> int:
        return self.config.charged_rounds if self.config is not None else 0


@dataclass(frozen=True)
class ProgressEvent:
    """``cached``: a run found in the store; ``started``; ``round``: one simulated round
    finished; ``done``: a run finished and was stored (``rounds`` counts what the event
    accounts for, so ``sum(rounds)`` over a run's events is its ``total_rounds``)."""

    kind: str
    run: PlannedRun
    rounds: int = 0
    seconds: float = 0.0


ProgressCallback = Callable[[ProgressEvent], None]


# The identity's digest of the dataset's contents (``fedhh.data.digest``). Keys made before it
# was part of the identity (``legacy_identity``) are not reused: see ``Suite.load_stored``.
CONTENTS = "contents_sha256"


@dataclass
class SuiteData:
    """A dataset the suite's runs use, its identity (part of every store key) and its ground
    truth (computed on first use)."""

    dataset: FederatedDataset
    identity: dict[str, Any]
    truth: GroundTruth | None = None

    @staticmethod
    def of(dataset: FederatedDataset) -> SuiteData:
        """The dataset's identity: its name, folder, sizes and the SHA-256 of its contents
        (before, the sizes alone: a dataset rebuilt in place with the same sizes, such as
        another seed of a generator or a file edited to the same length, reused the runs
        stored for the old one). The digest is the one the ground truth and the simulator's
        caches key on (``dataset_contents``), so the dataset is hashed once for all of them."""
        return SuiteData(dataset, {
            "name": dataset.name,
            "directory": dataset.root.name if dataset.root is not None else None,
            "users": dataset.num_users,
            "entries": dataset.num_entries,
            "vocabulary": len(dataset.vocabulary),
            CONTENTS: dataset_contents(dataset),
        })

    def truth_items(self) -> GroundTruth:
        if self.truth is None:
            from fedhh.data.truth import ground_truth

            self.truth = ground_truth(self.dataset)
        return self.truth


def legacy_identity(identity: dict[str, Any]) -> dict[str, Any] | None:
    """The identity a store key of fedhh before content digests held for this dataset (its
    name, folder and sizes), or None for a stand-in identity (no digest)."""
    if CONTENTS not in identity:
        return None
    return {k: v for k, v in identity.items() if k != CONTENTS}


class Suite:
    """The runs of some studies over some seeds with one privacy target, on the suite's dataset
    (and on the dataset a variant names, if any)."""

    def __init__(self, settings: SuiteSettings, store: ResultStore | None,
                 dataset: FederatedDataset | None = None, *, reuse_populations: bool = True,
                 max_populations: int | None = None, listing: bool = False,
                 progress: bool = False) -> None:
        """``store`` None: a suite that only computes (a Dask worker's; ``execute`` refuses).
        ``max_populations`` bounds the encoded vocabularies kept (least recently used go).
        ``listing``: a suite that plans without building a dataset (a dry run: building the
        default one takes minutes and 3.5 GB); see ``identity_of``. ``progress``: a dataset
        built or imported on first use says so, with its meters (``fedhh.data.progress``:
        on a terminal); before, building the default one was ten minutes of silence."""
        if max_populations is not None and max_populations < 1:
            raise ConfigError(f"max_populations must be >= 1, got {max_populations}")
        self.settings = settings
        self.store = store
        # Encoded vocabularies (and, inside them, single-item draws) shared by the runs.
        self.reuse_populations = reuse_populations
        self.max_populations = max_populations
        self._populations: dict[tuple[int, str], Population] = {}
        self.listing = listing
        self.progress = progress
        # The datasets a listing suite planned under a stand-in identity, first use first.
        self.unbuilt: list[str] = []
        self._data: dict[str, SuiteData] = {}
        if dataset is not None:
            self._data[settings.dataset] = SuiteData.of(dataset)
        self.identity = self.identity_of(settings.dataset)
        self.computed = 0
        self.reused = 0

    @property
    def dataset(self) -> FederatedDataset:
        return self.data(self.settings.dataset).dataset

    @property
    def truth_items(self) -> GroundTruth:
        return self.data(self.settings.dataset).truth_items()

    def identity_of(self, name: str) -> dict[str, Any]:
        """The identity of a dataset by name or path (part of every store key). A listing
        suite does not build a dataset for it: a dataset not built yet gets a stand-in that no
        stored run's key was made with (its runs' stored state is unknown until it is built,
        as a store may outlive the cache), and its name goes to ``unbuilt``."""
        if self.listing and name not in self._data:
            from fedhh.experiments.populations import built

            if not built(name):
                if name not in self.unbuilt:
                    self.unbuilt.append(name)
                return {"name": name, "built": False}
        return self.data(name).identity

    def data(self, name: str) -> SuiteData:
        """A dataset by name or path (each resolved once)."""
        if name not in self._data:
            from fedhh.experiments.populations import resolve

            data = SuiteData.of(resolve(name, progress=self.progress))
            if data.dataset.num_users < 2:
                # (the simulator's refusal said "give --eps-local", an option no study has)
                raise ConfigError(
                    f"{name}: the dataset has {data.dataset.num_users} user(s); every study "
                    "solves its runs' eps_local for the aggregate target (--eps-agg, --delta) "
                    "among the dataset's users, which needs at least 2")
            self._data[name] = data
        return self._data[name]

    def planned(self, study: Study, variant: StudyVariant, seed: int) -> PlannedRun:
        if variant.spec is None:
            static = variant.static or ""
            key = self._static_key(static, self.identity)
            return PlannedRun(key, study.name, variant.label, seed, None, static,
                              f"(not a simulation: {static})", self.settings.dataset)
        name = variant.dataset or self.settings.dataset
        config = run_config(variant.spec, self.settings, seed)
        return PlannedRun(run_key(config, self.identity_of(name)), study.name, variant.label,
                          seed, config, None, command_line(config, self.settings, name), name)

    def _static_key(self, static: str, identity: dict[str, Any]) -> str:
        target = (f"{static}@{self.settings.eps_agg:g},{self.settings.delta:g}"
                  if static in PRIVACY_DEPENDENT else static)
        return static_key(target, PAPER.codec, PAPER.code_bits(), identity)

    def legacy_key(self, run: PlannedRun) -> str | None:
        """The key ``run`` had before store keys held the dataset's content digest (None for a
        run on a dataset a listing suite did not build)."""
        if run.config is None:
            old = legacy_identity(self.identity)
            return None if old is None else self._static_key(run.static or "", old)
        old = legacy_identity(self.identity_of(run.dataset or self.settings.dataset))
        return None if old is None else run_key(run.config, old)

    def plan(self, studies: Sequence[Study], seeds: Sequence[int]) -> list[PlannedRun]:
        """Every distinct run of the studies, seed-major within each study, first use first."""
        seen: dict[str, PlannedRun] = {}
        for study in studies:
            for seed in seeds:
                for variant in study.variants:
                    run = self.planned(study, variant, seed)
                    seen.setdefault(run.key, run)
        return list(seen.values())

    def execute(self, plan: Sequence[PlannedRun],
                progress: ProgressCallback | None = None) -> dict[str, RunRecord]:
        """Load or compute every planned run; returns the records by key, in plan order."""
        records, missing = self.load_stored(plan, progress)
        for run in missing:
            records[run.key] = self._compute_and_store(run, progress)
        return {run.key: records[run.key] for run in plan}

    def load_stored(self, plan: Sequence[PlannedRun], progress: ProgressCallback | None = None
                    ) -> tuple[dict[str, RunRecord], list[PlannedRun]]:
        """The stored records of ``plan`` by key (``cached`` events, counted in ``reused``)
        and the runs the store lacks (or cannot read), in plan order."""
        store = self.require_store()
        records: dict[str, RunRecord] = {}
        missing: list[PlannedRun] = []
        for run in plan:
            record = store.load(run.key)
            if record is None:
                missing.append(run)
                continue
            records[run.key] = record
            self.reused += 1
            if progress is not None:
                progress(ProgressEvent("cached", run, run.total_rounds))
        self._warn_legacy(store, missing)
        return records, missing

    def _warn_legacy(self, store: ResultStore, missing: Sequence[PlannedRun]) -> None:
        """A warning when the store holds runs of ``missing`` under the keys of fedhh before
        content digests (``legacy_key``): they are computed again, not reused, since nothing
        tells whether their dataset was rebuilt since with the same sizes."""
        old = [key for key in map(self.legacy_key, missing)
               if key is not None and store.has(key)]
        if old:
            log.warning(
                "%d of the runs to compute are stored in %s under keys made before a store "
                "key held a digest of the dataset's contents (e.g. %s.json): they are not "
                "reused, since their dataset may have been rebuilt since with the same sizes, "
                "and are computed again under the new keys (the old entries stay; delete them "
                "to free their space)", len(old), store.root, old[0])

    def require_store(self) -> ResultStore:
        """The suite's result store; ConfigError for a suite that only computes (a worker's)."""
        if self.store is None:
            raise ConfigError("this suite has no result store: it only computes runs")
        return self.store

    def _population(self, config: RunConfig, data: SuiteData) -> Population | None:
        if not self.reuse_populations:
            return None
        codec = Codec.from_spec(config.codec, config.code_bits())
        # By the dataset object (one per name or path in the suite): populations built by one
        # generator under other seeds or sizes share a dataset name.
        key = (id(data.dataset), codec.key)
        population = self._populations.pop(key, None)  # re-inserted last: most recently used
        if population is None:
            if self.max_populations is not None:
                while len(self._populations) >= self.max_populations:
                    del self._populations[next(iter(self._populations))]
            population = Population.build(data.dataset, codec)
        self._populations[key] = population
        return population

    def _compute_and_store(self, run: PlannedRun, progress: ProgressCallback | None
                           ) -> RunRecord:
        if progress is not None:
            progress(ProgressEvent("started", run))
        started = time.perf_counter()
        record = self.compute(run, progress)
        self.require_store().save(record)
        self.computed += 1
        elapsed = time.perf_counter() - started
        log.info("%s / %s / seed %d: %.1f s", run.study, run.label, run.seed, elapsed)
        if progress is not None:
            done = len(record.data.get("rounds", ()))
            progress(ProgressEvent("done", run, max(run.total_rounds - done, 0), elapsed))
        return record

    def compute(self, run: PlannedRun, progress: ProgressCallback | None = None) -> RunRecord:
        """Compute one planned run (the store is neither read nor written); the record names
        the fedhh code that computed it (``code``: a stored run is reused by later code, whose
        report tells them apart). ConfigError, before or after the run (then it is not
        returned), when fedhh's files changed on disk since this process loaded them: the run
        would be of neither code (``check_unchanged``)."""
        self.check_code()
        record = self._computed(run, progress)
        self.check_code()
        record.data["code"] = code_identity()
        return record

    def check_code(self) -> None:
        """``check_unchanged`` for this suite's process: a worker's suite (no store) says to
        restart the worker, the client's to run the command again (what finished is stored)."""
        if self.store is None:
            check_unchanged(this_worker(), "restart the worker, then run the same command "
                            "again (the runs that finished are stored)")
        else:
            check_unchanged("this process", "the runs that finished are stored: run the same "
                            "command again to go on with the new code")

    def _computed(self, run: PlannedRun, progress: ProgressCallback | None) -> RunRecord:
        if run.static == WARM_START_ALONE:
            return self._warm_start_alone(run)
        if run.static == DECODE_TIMING:
            return self._decode_timing(run)
        config = run.config
        if config is None:
            raise ConfigError(f"unknown static measurement {run.static!r}")
        source = self.data(run.dataset or self.settings.dataset)
        truth_items = None if config.single_item else source.truth_items()

        def on_round(run_index: int, round_index: int, report: RoundReport) -> None:
            if progress is not None:
                progress(ProgressEvent("round", run, 1))

        started = time.perf_counter()
        result = simulate(source.dataset, config, truth_items, on_round,
                          self._population(config, source))
        wall = time.perf_counter() - started
        if result.truth is None:
            raise ConfigError("the experiments need the dataset's ground truth")
        data: dict[str, Any] = {
            "spec": config.overrides(),
            "settings": {"dataset": run.dataset, "eps_agg": self.settings.eps_agg,
                         "delta": self.settings.delta},
            "dataset": source.identity,
            "config": config.to_dict(),
            "privacy": result.privacy,
            "metrics": result.metrics,
            "segments": [r["segment_bits"] for r in result.rounds],
            "rounds": result.rounds,
            "timings": {**result.timings, "wall_s": wall},
            # (each run's, each row naming its run, as `fedhh simulate --json` does: with
            # --two-runs, before, only the second run's, whose rounds count from 1 again,
            # though the first finds most items and the metrics count both)
            "top_hitters": [{**h.to_dict(), "run": run_number}
                            for run_number, hitters in ((1, result.earlier_runs),
                                                        (config.runs, result.heavy_hitters))
                            for h in hitters[:TOP_HITTERS]],
        }
        if config.warm_start:
            # What the run itself found beyond the public list.
            own = cw.from_ints([h.code for h in result.heavy_hitters], config.code_bits())
            data["run_metrics"] = evaluate(own, result.truth)
        return RunRecord(run.key, run.seed, simulate_argv(config, self.settings, run.dataset),
                         run.command, data, _arrays(result.output_codes, result.truth))

    def _warm_start_alone(self, run: PlannedRun) -> RunRecord:
        from fedhh.data.wordlists import WARM_START_SOURCE, warm_start_list
        from fedhh.simulation.population import Population
        from fedhh.simulation.runner import ground_truth as code_truth

        started = time.perf_counter()
        # Coded as the deny-list study's runs are, so the list and the runs compare.
        codec = Codec.from_spec(PAPER.codec, PAPER.code_bits())
        truth = code_truth(Population.build(self.dataset, codec), self.truth_items)
        if truth is None:
            raise ConfigError("the warm start list needs the dataset's ground truth")
        words = warm_start_list()
        codes = np.unique(codec.encode_many(words).codes)
        data = {
            "static": WARM_START_ALONE,
            "source": WARM_START_SOURCE,
            "items": len(words),
            "dataset": self.identity,
            "metrics": evaluate(codes, truth),
            "timings": {"wall_s": time.perf_counter() - started},
        }
        return RunRecord(run.key, 0, [], run.command, data, _arrays(codes, truth))


    def _decode_timing(self, run: PlannedRun) -> RunRecord:
        """PI-RAPPOR's decoders against the domain size, at the study's eps_local."""
        from fedhh.pirappor.timing import measure_decoders
        from fedhh.simulation.runner import prepare

        users = self.dataset.num_users
        eps = prepare(run_config(PI_RAPPOR, self.settings, 0), users).privacy["eps_local"]
        data = {"static": DECODE_TIMING, "dataset": self.identity,
                **measure_decoders(eps, users)}
        none = {name: np.zeros(0) for name in ("truth_weighted", "truth_unweighted")}
        return RunRecord(run.key, 0, [], run.command, data,
                         {"output_codes": np.zeros(0, np.uint64),
                          "truth_codes": np.zeros(0, np.uint64), **none})


def this_worker() -> str:
    """This Dask worker's address in words ("this worker" outside one)."""
    if "distributed" not in sys.modules:  # (not a worker: no need to import it, ~1 s)
        return "this worker"
    try:
        from distributed import get_worker

        return f"worker {get_worker().address}"
    except (ImportError, ValueError):  # not in a worker (a test calls compute directly)
        return "this worker"


def _arrays(output_codes: np.ndarray, truth: Truth) -> dict[str, np.ndarray]:
    """The output codes and the truth restricted to them and to the true top |output|."""
    output = np.unique(truth.as_codes(output_codes))
    k = max(int(output.size), 1)
    keep = np.union1d(output, np.union1d(truth.top_codes("weighted", k),
                                         truth.top_codes("unweighted", k)))
    return {
        "output_codes": output,
        "truth_codes": keep,
        "truth_weighted": truth.lookup(keep, "weighted"),
        "truth_unweighted": truth.lookup(keep, "unweighted"),
    }


def result_records(study: Study, suite: Suite, seeds: Sequence[int],
                   records: dict[str, RunRecord]) -> dict[str, list[RunRecord]]:
    """Each variant's records in seed order (a static measurement repeats for every seed)."""
    out: dict[str, list[RunRecord]] = {}
    for variant in study.variants:
        out[variant.label] = [records[suite.planned(study, variant, s).key] for s in seeds]
    return out


__all__ = ["PlannedRun", "ProgressEvent", "Suite", "result_records", "this_worker"]
