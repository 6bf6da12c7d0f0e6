"""Run a whole discovery over a simulated population and score it.

``simulate(dataset, config)`` prepares the algorithm named by the run configuration (its
mechanism, participation rule and privacy calibration), builds the population and drives the
rounds with the library's round driver (``fedhh.rounds.RoundDriver``, the same one the
coordinator uses) over an in-memory link that draws each round's released sum exactly
(``SimulatedRounds``). With ``two_runs`` the first run's output becomes the second run's deny
list (the paper's "2 rounds" deny-list mode); the budget covers both runs (the local epsilon is
solved for runs x rounds rounds, and the ledger is charged across both).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.codec.codec import MAX_SUPPORTED_BITS
from fedhh.codec.shown import message_text
from fedhh.config import Mode, RunConfig, with_most_completions
from fedhh.data.dataset import FederatedDataset, atomic_file, read_cache
from fedhh.data.progress import Meter
from fedhh.data.truth import GroundTruth, dataset_contents
from fedhh.errors import ConfigError, DatasetError, StateError
from fedhh.metrics import WHOLE_TOP_K, Truth, evaluate, unranked, whole_items, whole_recall
from fedhh.pirappor.accounting import accounting_method
from fedhh.pirappor.mechanism import PiRappor
from fedhh.privacy import DEFAULT_METHOD, PrivacyLedger
from fedhh.rounds import (
    AttemptId,
    ChargeHook,
    MemoryRunStore,
    Recovered,
    Recovery,
    Released,
    RoundDriver,
)
from fedhh.server import (
    HeavyHitter,
    Mechanism,
    PrefixTree,
    RoundQuery,
    RoundReport,
    TailKind,
    TreeState,
)
from fedhh.server.causes import RAN_OUT, completion_budget_note, ran_out_cause
from fedhh.server.mechanisms import LocalRandomizer, estimate_std
from fedhh.server.prefixtree import Found
from fedhh.server.segment import check_feasible
from fedhh.simulation.algorithms import PrivacyTarget, build_algorithm
from fedhh.simulation.participation import Participation
from fedhh.simulation.population import Population
from fedhh.simulation.rounds import SimulatedRounds

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int, RoundReport], None]


@dataclass(frozen=True)
class Prepared:
    """A run configuration made concrete for a population of ``num_devices`` devices."""

    config: RunConfig
    mechanism: Mechanism
    participation: Participation
    privacy: dict[str, Any]
    ledger: PrivacyLedger | None
    round_mechanisms: tuple[Mechanism, ...] | None = None  # a per-round budget allocation
    round_items: tuple[int, ...] | None = None  # items per report of each round (None: one)


# What fits more completion rounds at a given --eps-local: each runs at eps_local + ln(its
# weight), which neither more devices nor a larger --eps-agg moves (eps_local is not solved)
EPS_LOCAL_FITS = "a larger --eps-local or --completion-weight"


def eps_local_refusal(eps_local: float) -> str:
    """Why completion rounds dropped at a given ``eps_local`` did not run."""
    return f"cannot run at --eps-local {eps_local:g}"


def prepare(config: RunConfig, num_devices: int) -> Prepared:
    """``_prepare`` with as many of the completion rounds as can be budgeted among
    ``num_devices`` devices (``with_most_completions``: at their weights, a completion round's
    local epsilon must stay positive); the privacy figures say when some were dropped
    (``Prepared.config`` is the configuration run)."""
    run, prepared = with_most_completions(config, lambda c: _prepare(c, num_devices),
                                          lambda p: float(p.privacy["eps_local"]))
    if run.completion() < config.completion():
        cause = f"cannot be budgeted among {num_devices} devices"
        eps = config.eps_local
        refused = None if eps is None else run.next_completion(eps)
        if eps is not None and refused is not None:
            # (an explicit eps_local is not solved for the devices: more of them, or a larger
            # --eps-agg, change nothing; before, the note blamed the device count)
            which = "next" if run.completion() else "first"
            cause = (f"{eps_local_refusal(eps)}: the {which} would run at "
                     f"{eps:g} + ln {refused[0]:.4g} <= 0 (a round's local "
                     f"epsilon must be positive); {EPS_LOCAL_FITS} fits more")
        prepared.privacy["completion_rounds"] = (
            f"{run.completion()} of {config.completion()}: the later completion rounds' "
            f"weights (from {config.completion_weight}, less as the round's index grows) "
            f"{cause}")
    return prepared


def _prepare(config: RunConfig, num_devices: int) -> Prepared:
    """Calibrate the configured algorithm for ``num_devices`` devices: its mechanism, its
    participation rule, the privacy figures, and (OptPrefixTree with a solved local epsilon)
    the ledger every round's spend is recorded in.

    PI-RAPPOR (``randomizer="pi-rappor"``) is accounted with a shuffle bound: its reports are
    shuffled, not summed (``fedhh.pirappor.accounting``)."""
    config.validate(Mode.SIMULATION)
    pi_rappor = config.randomizer == "pi-rappor"
    method = accounting_method(config.privacy_method) if pi_rappor else config.privacy_method
    weights = config.round_weights()
    items = config.items_per_round()
    if items is not None and weights is None:
        weights = (1.0,) * config.total_rounds  # several items are accounted as an allocation
    if weights is not None and pi_rappor:
        raise ConfigError("a round budget allocation (round_budget) is accounted for the "
                          "one-hot randomizer's sums; PI-RAPPOR runs with equal rounds")
    offsets: tuple[float, ...] = ()
    eps_local = config.eps_local
    solution: dict[str, Any] = {}
    if weights is not None and eps_local is None and num_devices < 2:
        raise ConfigError(
            f"the dataset has {num_devices} user(s): the aggregate guarantee needs at least 2 "
            "(one report is protected only by its own eps_local; give --eps-local to run with "
            "that alone)")
    if weights is not None:
        from fedhh.privacy.accountant import allocation_offsets, repeat_offsets
        from fedhh.privacy.solver import solve_allocation

        offsets = allocation_offsets(weights) * config.runs
        if eps_local is None:
            q = 1.0 if config.sampling_rate is None else config.sampling_rate
            # A round of k items is k compositions of the one-hot round (fedhh.privacy.ledger).
            charged = offsets if items is None else repeat_offsets(offsets, items * config.runs)
            solved = solve_allocation(config.eps_agg, config.delta, charged, num_devices, q)
            eps_local, solution = solved.eps_local, solved.to_dict()
    choice = build_algorithm(
        config.algorithm, config.charged_rounds, num_devices,
        PrivacyTarget(config.eps_agg, config.delta, method),
        eps_local=eps_local, sampling_rate=config.sampling_rate, theta=config.theta,
        noise_scale=config.noise_scale, tail=TailKind(config.tail),
    )
    mechanism: Mechanism = choice.mechanism
    privacy = {"eps_agg": config.eps_agg, "delta": config.delta,
               "charged_rounds": config.charged_rounds, **choice.privacy, **solution}
    if pi_rappor:
        mechanism = PiRappor(privacy["eps_local"], TailKind(config.tail))
        privacy.update(randomizer="pi-rappor", accounting=method)
    round_mechanisms = None
    if offsets:
        base = float(choice.privacy["eps_local"])
        privacy["round_eps_local"] = [base + o for o in offsets]
        round_mechanisms = tuple(LocalRandomizer(base + o, TailKind(config.tail))
                                 for o in offsets[: config.total_rounds])
    ledger = None
    if config.algorithm == "optprefixtree":
        q = choice.participation.rate
        n_min = num_devices if q >= 1 else max(2, round(q * num_devices))
        population = num_devices if q < 1 else None  # (the devices a sampled round draws from)

        def open_ledger(budget: float) -> PrivacyLedger:
            if offsets:
                return PrivacyLedger.open_allocated(
                    budget, config.delta, offsets, n_min, q,
                    eps_local=choice.privacy["eps_local"],
                    items=() if items is None else items * config.runs, population=population)
            return PrivacyLedger.open(
                budget, config.delta, config.charged_rounds, n_min=n_min, sampling_rate=q,
                eps_local=choice.privacy["eps_local"], population=population,
                method=method or DEFAULT_METHOD)

        if config.eps_local is None:
            ledger = open_ledger(config.eps_agg)
        else:
            # An explicit eps_local decides what the run spends, not --eps-agg: report (and
            # charge against) the run's real figure. Basic composition bounds the projection,
            # so a budget above it always fits.
            probe = open_ledger(config.charged_rounds * float(config.eps_local) * 1.01 + 1.0)
            spent = probe.projected_epsilon()
            ledger = replace(probe, eps_agg=spent)
            privacy.update(eps_agg=spent, eps_agg_target=config.eps_agg)
    if items is not None:
        privacy["round_items"] = list(items)
    return Prepared(config, mechanism, choice.participation, privacy, ledger,
                    round_mechanisms, items)


@dataclass
class SimulationResult:
    heavy_hitters: list[HeavyHitter]
    deny_list: list[str]
    rounds: list[dict[str, Any]]
    metrics: dict[str, Any]
    timings: dict[str, float]
    output_codes: np.ndarray
    privacy: dict[str, Any]
    truth: Truth | None = None
    ledger: PrivacyLedger | None = None
    cut_prefixes: list[HeavyHitter] = field(default_factory=list)
    # --two-runs: what the first run found (the second run's deny list besides the given one)
    earlier_runs: list[HeavyHitter] = field(default_factory=list)
    # the deny-list items longer than the codes, and the dataset's items each also denies
    # (`cut_deny_items`)
    deny_list_cut: list[dict[str, Any]] = field(default_factory=list)
    # the cause of a prefix the rounds ran out on, and the figures when it is the privacy
    # budget (``fedhh.server.causes.ran_out_cause``, ``completion_budget_note``)
    ran_out: str = RAN_OUT
    budget_note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "heavy_hitters": [h.to_dict() for h in self.heavy_hitters],
            "cut_prefixes": [h.to_dict() for h in self.cut_prefixes],
            "earlier_runs": [h.to_dict() for h in self.earlier_runs],
            "deny_list": self.deny_list,
            "deny_list_cut": self.deny_list_cut,
            "metrics": self.metrics,
            "rounds": self.rounds,
            "timings": self.timings,
            "privacy": self.privacy,
            "ledger": None if self.ledger is None else self.ledger.to_dict(),
        }


class SimulationLink:
    """The in-memory AggregatorLink: each attempt's sum drawn exactly (``SimulatedRounds``),
    charged at its real number of participants (the ledger accounts a sampled round given
    that number)."""

    def __init__(self, transport: SimulatedRounds) -> None:
        self.transport = transport
        self.started = self.drawn = 0.0  # perf_counter of the last attempt's start and sum
        self.diagnostics: dict[str, Any] = {}  # the last attempt's (PI-RAPPOR: its decoding)

    async def collect(self, attempt: AttemptId, query: RoundQuery,
                      charge: ChargeHook) -> Released:
        self.started = time.perf_counter()
        drawn = self.transport.aggregate(query)
        self.drawn = time.perf_counter()
        self.diagnostics = drawn.diagnostics
        # (over: an attempt drawn in this process, never resumed by another)
        await charge(drawn.participants, f"drawn for {attempt.label}")
        return Released(drawn.sums, drawn.participants, drawn.true_counts)

    async def recover(self, attempt: AttemptId) -> Recovered:
        return Recovered(Recovery.NOTHING, "a simulation keeps no attempt across processes")

    async def resume(self, attempt: AttemptId, query: RoundQuery,
                     charge: ChargeHook) -> Released:
        raise StateError("a simulated attempt cannot be resumed")


def simulate(
    dataset: FederatedDataset,
    config: RunConfig,
    truth_items: GroundTruth | None = None,
    progress: ProgressCallback | None = None,
    population: Population | None = None,
    ledger: PrivacyLedger | None = None,
    show_progress: bool = False,
    prepared: Prepared | None = None,
) -> SimulationResult:
    """Run the configured discovery; ``truth_items`` is the dataset's per-item ground truth.

    A dataset with no users, or whose users hold no items, is refused (DatasetError): there is
    nothing to discover. ``progress`` is called after every round; ``show_progress`` shows
    meters for the other long steps (`fedhh.data.progress`).

    Every released round is recorded in the ledger (round index counted across runs), exactly
    as the coordinator does; a round the ledger refuses stops the run with PrivacyError. A
    ``ledger`` given here replaces the one ``prepare`` opens (e.g. a coordinator's, to replay
    its accounting). A ``population`` built once (``Population.build``) can be passed to many
    runs over the same dataset and codec; it is not modified. ``prepared``: what
    ``prepare(config, dataset.num_users)`` returned, where the caller has it already (one
    solve takes seconds at the default dataset; its ledger is fresh, never recorded in).
    """
    check_discoverable(dataset)
    if prepared is None:
        prepared = prepare(config, dataset.num_users)
    config = prepared.config  # without completion rounds when they cannot be budgeted
    if ledger is not None:
        prepared = replace(prepared, ledger=ledger)
    clock = time.perf_counter()
    codec = Codec.from_spec(config.codec, config.code_bits(Mode.SIMULATION))
    if population is not None and population.dataset is not dataset:
        raise ConfigError("the population was built for another dataset")
    if population is None or population.codec != codec:
        population = Population.build(dataset, codec, show_progress)
    if config.single_item:
        population = population.with_single_items(config.seed)
    timings = {"setup_s": time.perf_counter() - clock}
    truth = ground_truth(population, truth_items, show_progress)
    timings["truth_s"] = time.perf_counter() - clock - timings["setup_s"]

    denied = codec.encode_many(config.deny_items())
    deny_codes = denied.codes
    deny_cut = cut_deny_items(config.deny_items(), denied, population, truth_items)
    all_rounds: list[dict[str, Any]] = []
    with Meter(show_progress, "rounds", config.charged_rounds, "round") as meter:

        def on_round(run_index: int, round_index: int, report: RoundReport) -> None:
            meter.set_postfix(**({"run": run_index} if config.runs > 1 else {}),
                              round=round_index, kept=report.kept, found=report.finished,
                              next_s=report.next_segment_bits or "-")
            meter.update()
            if progress is not None:
                progress(run_index, round_index, report)

        tree, tree_state, ledger = _one_run(population, prepared, codec, deny_codes, 0,
                                            prepared.ledger, on_round, all_rounds)
        earlier: list[HeavyHitter] = []
        for run in range(1, config.runs):
            # The previous run's output is this run's deny list (the paper's "2 rounds" mode).
            earlier += _with_std(tree.heavy_hitters(tree_state), prepared, all_rounds, run)
            found = cw.from_ints([f.code for f in tree_state.discovered], codec.max_bits)
            deny_codes = np.union1d(deny_codes, found)
            tree, tree_state, ledger = _one_run(population, prepared, codec, deny_codes, run,
                                                ledger, on_round, all_rounds)
        meter.update(config.charged_rounds - meter.n)  # a tree that finished early
    timings["rounds_s"] = (time.perf_counter() - clock - timings["setup_s"]
                           - timings["truth_s"])
    hitters = _with_std(tree.heavy_hitters(tree_state), prepared, all_rounds, config.runs)
    cut = _with_std(tree.cut_prefixes(tree_state), prepared, all_rounds, config.runs)
    # The deny list as given (an item longer than the codes is denied by its prefix, but the
    # list says what was asked); what earlier runs found is ``earlier``, with its flags.
    deny_display = config.deny_items()
    found_codes = cw.from_ints([h.code for h in hitters], codec.max_bits)
    output = np.union1d(found_codes, deny_codes)
    metrics: dict[str, Any] = {}
    if truth is not None:
        metrics = evaluate(output, truth)
        metrics["discovered_by_run"] = len(hitters)
        ended = np.array([h.ended for h in hitters], dtype=bool)
        # (every run's output: with --two-runs the first run's whole items counted none while
        # its true positives were counted, 0 whole items beside 32 true positives)
        every = earlier + hitters
        metrics.update(whole_items(cw.from_ints([h.code for h in every], codec.max_bits),
                                   np.array([h.ended for h in every], dtype=bool), truth))
        metrics["whole_precision"] = (metrics["whole_items_found"] / len(every)
                                      if every else 0.0)
        metrics["cut_prefixes"] = len(cut)
        metrics["denied_in_output"] = int(np.unique(denied.codes).size)
        if truth_items is not None and population.single_items is None:
            # (the deny list's items and what an earlier run found whole count as found, as
            # in recall_at: denied, they cannot be found again; a denied URL of the top 50
            # counted as missed)
            known = cw.from_ints([h.code for h in earlier if h.ended], codec.max_bits)
            whole = np.union1d(np.union1d(found_codes[ended], known),
                               denied.codes[~denied.truncated])
            metrics["whole_recall_at"] = whole_recall(population.item_codes, truth_items, whole)
            metrics["whole_recall_at_null"] = unranked(
                WHOLE_TOP_K, int(np.count_nonzero(truth_items.weighted > 0)))
    privacy = prepared.privacy
    if ledger is not None:
        # What the released rounds spent (the ledger's charges composed, as the coordinator
        # reports eps_spent), beside the plan's eps_agg for every charged round: a run whose
        # tree ends early spends less (before, only the plan was reported).
        privacy = {**privacy, "eps_agg_spent": ledger.spent_epsilon(),
                   "rounds_spent": ledger.rounds_recorded}
    timings["total_s"] = time.perf_counter() - clock
    eps_local = privacy.get("eps_local")
    eps_local = float(eps_local) if isinstance(eps_local, int | float) else None
    ran_out = ran_out_cause(config, eps_local)
    budget_note = completion_budget_note(config, eps_local, [ran_out], networked=False) or ""
    return SimulationResult(hitters, deny_display, all_rounds, metrics, timings, output,
                            privacy, truth, ledger, cut, earlier, deny_cut, ran_out, budget_note)


def cut_deny_items(items: list[str], denied: Any, population: Population,
                   truth_items: GroundTruth | None) -> list[dict[str, Any]]:
    """The deny-list items longer than the codes (``denied``: their `ItemCodes`): a device
    compares codes, so such an item denies every item whose code starts with the same
    ``max_bits`` bits, and those of the dataset are named, with the share of the users holding
    each (``truth_items``), so that a deny list never drops a heavy item unsaid; ``needs_bits``:
    the item's whole code, None past the codes' limit."""
    cut = np.flatnonzero(denied.truncated)
    if not cut.size:
        return []
    vocabulary = population.dataset.vocabulary
    codec = population.codec
    widest = Codec.from_spec(codec.spec, MAX_SUPPORTED_BITS).encode_many(
        [items[i] for i in cut.tolist()])
    entries = []
    for at, index in enumerate(cut.tolist()):
        item = items[index]
        same = np.flatnonzero(population.item_codes == denied.codes[index]).tolist()
        also = [{"item": vocabulary[i],
                 "users_holding": (None if truth_items is None
                                   else float(truth_items.unweighted[i]))}
                for i in same if vocabulary[i] != item]
        also.sort(key=lambda entry: -(entry["users_holding"] or 0.0))
        needs = None if widest.truncated[at] else int(widest.lengths[at])
        entries.append({"item": item, "bits": codec.max_bits, "needs_bits": needs,
                        "also_denies": also})
    return entries


def _with_std(found: list[HeavyHitter], prepared: Prepared, rounds: list[dict[str, Any]],
              run: int) -> list[HeavyHitter]:
    """``found`` (of run number ``run``) each with its estimate's standard deviation: at its
    round's randomizer and contributors (``estimate_std``; a completion round's noise is its
    own smaller share's)."""
    contributors = {r["round"]: r["participants"] for r in rounds if r["extra"]["run"] == run}
    mechanisms = prepared.round_mechanisms
    return [replace(h, std=estimate_std(
        prepared.mechanism if mechanisms is None else mechanisms[h.round - 1], h.estimate,
        contributors.get(h.round, 0), h.parts)) for h in found]


def _one_run(
    population: Population,
    prepared: Prepared,
    codec: Codec,
    deny_codes: np.ndarray,
    run: int,
    ledger: PrivacyLedger | None,
    progress: ProgressCallback | None,
    rounds_out: list[dict[str, Any]],
) -> tuple[PrefixTree, TreeState, PrivacyLedger | None]:
    """One discovery (all its rounds); appends each round's diagnostics to ``rounds_out``.

    With ``leftover_rounds="passes"``, rounds the tree did not need (it finished early) run
    further passes, each a new tree over the rounds left with everything found so far
    deny-listed, while those rounds can still cover an item's bits; their rounds are charged
    as the rounds they replace (the budget was solved for them). The returned state holds
    every pass's discoveries."""
    config = prepared.config
    tree_config = config.tree(Mode.SIMULATION)
    used, passes = 0, 0
    found: list[Found] = []
    while True:
        rounds = config.total_rounds - used
        mechanisms = (None if prepared.round_mechanisms is None
                      else prepared.round_mechanisms[used:])
        tree = PrefixTree(replace(tree_config, rounds=rounds), codec, prepared.mechanism,
                          deny_codes, mechanisms)
        tree, state, ledger = _one_pass(population, prepared, tree, run, used, passes, ledger,
                                        progress, rounds_out)
        # (a pass's tree counts its rounds from 1: the run's numbers go on from the last pass's)
        found.extend(replace(f, round=f.round + used) for f in state.discovered)
        used += state.next_round - 1
        passes += 1
        if config.leftover_rounds != "passes" or used >= config.total_rounds:
            break
        try:
            check_feasible(config.total_rounds - used, codec.max_bits, tree_config.dim_limit,
                           tree_config.segment_bits)
        except ConfigError:
            break  # the rounds left cannot cover an item: they stay unspent
        codes = cw.from_ints([f.code for f in state.discovered], codec.max_bits)
        deny_codes = np.union1d(deny_codes, codes)
    return tree, replace(state, discovered=tuple(found)), ledger


def _one_pass(population: Population, prepared: Prepared, tree: PrefixTree, run: int,
              used: int, pass_index: int, ledger: PrivacyLedger | None,
              progress: ProgressCallback | None, rounds_out: list[dict[str, Any]]
              ) -> tuple[PrefixTree, TreeState, PrivacyLedger | None]:
    """The rounds of one tree, its round 1 being round ``used + 1`` of the run."""
    config = prepared.config
    transport = SimulatedRounds(
        population, prepared.mechanism, config.selection_rule(), prepared.participation,
        seed=config.seed + 1_000_003 * run + 7_919 * pass_index, per_device=config.per_device,
        round_mechanisms=tree.round_mechanisms,
        round_items=None if prepared.round_items is None else prepared.round_items[used:],
    )
    link = SimulationLink(transport)

    def on_round(attempt: AttemptId, report: RoundReport) -> None:
        extra: dict[str, Any] = {"run": run + 1, "aggregate_s": link.drawn - link.started,
                                 "server_s": time.perf_counter() - link.drawn,
                                 **link.diagnostics}
        if pass_index:
            extra["pass"] = pass_index + 1
        report = replace(report, round=used + report.round, extra=extra)
        rounds_out.append(report.to_dict())
        if progress is not None:
            progress(run + 1, used + attempt.round, report)

    driver = RoundDriver(
        run_id=f"simulation-{run + 1}" + (f"-pass-{pass_index + 1}" if pass_index else ""),
        tree=tree, store=MemoryRunStore(), link=link, ledger=ledger,
        min_contributors=ledger.n_min if ledger is not None else 2, max_attempts=1,
        round_offset=run * config.total_rounds + used, on_round=on_round,
    )
    state = asyncio.run(driver.run(tree.initial_state()))
    return tree, state, driver.ledger


def check_discoverable(dataset: FederatedDataset, label: str | None = None) -> None:
    """DatasetError unless some user of ``dataset`` (named ``label``) holds an item."""
    what = label or f"dataset {message_text(dataset.name)}"
    if dataset.num_users == 0:
        raise DatasetError(f"{what} has no users (one line per user in a text file; is it "
                           "empty?): nothing to discover")
    if dataset.num_entries == 0:
        raise DatasetError(f"{what}: none of its {dataset.num_users:,} users holds an item (a "
                           "text file of blank lines?): nothing to discover")


def ground_truth(population: Population, truth_items: GroundTruth | None,
                 progress: bool = False) -> Truth | None:
    """Truth over codes: the fixed items' distribution in single-item mode, else the dataset's
    (cached next to the dataset per codec, since recounting shared codes scans every entry;
    ``progress``: a meter counts them)."""
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
        # Kept with the SHA-256 of the dataset's contents (before, its sizes alone: a dataset
        # edited in place to the same sizes was given its former truth); a file without it, or
        # of other contents, is counted again and rewritten.
        cache = Path(ds.root) / f"truth_codes_v2_{codec.key}.npz"
        cached = _load_code_truth(cache, ds)
        if cached is not None:
            return cached
    truth = Truth.from_items(codes, truth_items.weighted, truth_items.unweighted, ds, progress)
    if cache is not None:
        try:
            with atomic_file(cache) as out:
                np.savez(out, codes=truth.codes, weighted=truth.weighted,
                         unweighted=truth.unweighted,
                         shape=np.array([ds.num_users, ds.num_entries, len(ds.vocabulary)]),
                         contents=np.array(dataset_contents(ds)))
        except OSError as error:  # a read-only dataset directory: just do not cache
            log.info("not caching code truth at %s: %s", cache, error)
    return truth


def _load_code_truth(path: Path, ds: FederatedDataset) -> Truth | None:
    data = read_cache(path, ("shape", "contents", "codes", "weighted", "unweighted"))
    if data is None:
        return None
    shape, contents = data["shape"].tolist(), str(data["contents"])
    truth = Truth(data["codes"], data["weighted"], data["unweighted"])
    if shape != [ds.num_users, ds.num_entries, len(ds.vocabulary)] \
            or contents != dataset_contents(ds):
        return None
    if not (truth.codes.size == truth.weighted.size == truth.unweighted.size):
        return None
    return truth
