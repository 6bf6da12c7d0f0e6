"""The run configuration: every knob of a discovery, its default, its validation and its help.

One frozen dataclass, ``RunConfig``, serves every way of running fedhh: ``fedhh simulate`` and
``fedhh admin start`` generate their flags and help text from it (``fedhh.config.flags``),
the experiments build it directly, the coordinator stores it (``to_dict``) and sends it over
the wire (one converter, ``fedhh.rpc.run_config``). Each field carries its description and the
modes it applies to in its metadata:

- ``both``: the algorithm and its privacy target, the same in simulation and on the network;
- ``simulation``: the simulator's own choices (baselines, seeds, sampling, per-device mode);
- ``network``: the networked system's cohort and secure-aggregation timing.

``None`` is a value of its own where a field says so (e.g. ``segment_bits=None``: adaptive
segmentation); zero is always a value, never "the default".

Every count, size and time has an upper bound (``validate`` checks them first, before anything
is computed from them): far above what any useful run asks for, and low enough that whatever
a value below it makes the coordinator or the simulator do stays bounded (issue 28: a StartRun
with rounds = 2*10^7 took the coordinator to 7.6 GB, 2^32 - 1 rounds raised a MemoryError, and
``simulate --dim-limit 1e12`` asked for 4 TiB):

- rounds and completion_rounds: 1,024 each (``MAX_ROUNDS``): each round spends at least one
  bit of an item's code (a million completion rounds had the planner solve for a million
  rounds before it could drop them);
- max_bits and segment_bits: 4,096, the codec's ``MAX_SUPPORTED_BITS`` (512 bytes of a URL in
  the byte codebook; a code array of 4,096-bit codes takes 512 bytes per item);
- dim_limit: 2^26 in simulation (a round's domain is allocated as arrays: 2^26 takes ~1.8 GB
  on Shakespeare, 2^28 took more than 7 GB; the paper's P is 10^7; PI-RAPPOR needs fields
  below 2^31), 2^24 on the network (each device uploads one entry per domain element; secure
  aggregation's ``MAX_DIMENSION``);
- target_devices, min_devices, shard_size: 10^7 (``MAX_DEVICES``, six times the paper's 1.6M);
- every window in ms (check-in, quiet spell, stages): one day (``MAX_WINDOW_MS``);
- max_attempts: 100; oversubscription: 100;
- an explicit eps_local: 40 (``fedhh.privacy.solver.EPS_LOCAL_MAX``, the largest the
  accountants solve for; a device's coins resolve 2^-32, so any eps_local above
  ln(2^32 - 1) = 22.18 randomizes as that one; 1e308 made the spend infinite);
- the deny list: 10^6 items of at most 1,000 characters; the codec: 1 MiB of codebook JSON
  (the coordinator's receive cap); each per-round list (round_budget, round_fp_ratio,
  round_items): 64 KiB of text.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from fedhh.errors import ConfigError, PrivacyError, shown
from fedhh.integers import read_integer, read_number
from fedhh.server.vocabulary import DOMAINS, FP_RATIO_OF, SEGMENT_PLANS, THRESHOLD_WEIGHTS

if TYPE_CHECKING:
    from fedhh.device import Selection
    from fedhh.server import TreeConfig

ALGORITHMS = ("optprefixtree", "triehh", "triehh++", "central-laplace", "central-gaussian")
SELECTIONS = ("uniform", "weighted")
RANDOMIZERS = ("ohe-rr", "pi-rappor")
TAILS = ("binomial", "gaussian")
LEFTOVER_ROUNDS = ("idle", "passes")
SIMULATION_DIM_LIMIT = 10_000_000  # the paper's P
NETWORK_DIM_LIMIT = 1 << 16  # each device uploads one 16- or 32-bit entry per domain element
WINDOW_FIELDS = ("advertise_ms", "share_keys_ms", "masked_input_ms", "consistency_ms",
                 "unmask_ms")
# The upper bounds of the module docstring's table.
MAX_ROUNDS = 1024
MAX_SIMULATION_DIM_LIMIT = 1 << 26
MAX_DEVICES = 10_000_000
MAX_WINDOW_MS = 24 * 3600 * 1000
MAX_ATTEMPTS = 100
MAX_OVERSUBSCRIPTION = 100.0
MAX_DENY_ITEMS = 1_000_000
MAX_ITEM_CHARS = 1000
MAX_CODEC_SPEC_CHARS = 1 << 20
MAX_LIST_CHARS = 1 << 16


class Mode(StrEnum):
    BOTH = "both"
    SIMULATION = "simulation"
    NETWORK = "network"


DEFAULT_COMPLETION_ROUNDS = 32


def _knob(default: Any, help: str, mode: Mode = Mode.BOTH, *,
          choices: tuple[str, ...] | None = None, metavar: str | None = None,
          parse: Callable[[str], Any] | None = None) -> Any:
    """A RunConfig field with its help text, its mode, and how a command line spells it
    (``parse``: a flag value to the field's value, default by the field's type)."""
    return field(default=default, metadata={"help": help, "mode": mode, "choices": choices,
                                            "metavar": metavar, "parse": parse})


def _finite(text: str) -> float:
    value = read_number(text)
    if not math.isfinite(value):
        raise ConfigError(f"expected a finite number, got {text!r}")
    return value


def _finite_or_none(text: str) -> float:
    """``_finite`` for a knob that also takes 'none': its refusal names both forms."""
    try:
        return _finite(text)
    except ConfigError as error:
        raise ConfigError(f"{error} (or 'none')") from None


def codec_value(text: str) -> str:
    """A ``--codec`` value (a built-in codebook, a codebook JSON file, or inline JSON) as the
    codec spec a run carries (``fedhh.codec.codec_spec``)."""
    from fedhh.codec import codec_spec

    return codec_spec(text)



def _weight_divisor(index: int) -> int:
    """The ``index``-th completion round's weight is completion_weight over this (from 1)."""
    octave = index.bit_length() - 1
    return 1 << octave + min(octave, 2)


def _fp_ratio_divisor(index: int) -> int:
    """The ``index``-th completion round's false-positive target is gamma over this."""
    return index * (index + 1)

@dataclass(frozen=True)
class RunConfig:
    """Every knob of a run (module docstring); ``validate()`` checks them all."""

    # ---- privacy --------------------------------------------------------------------------
    eps_agg: float = _knob(1.0, "aggregate epsilon of the whole run")
    delta: float = _knob(1e-6, "aggregate delta of the whole run")
    eps_local: float | None = _knob(
        None, "explicit per-round local epsilon (default: solved by the accountant)")
    privacy_method: str | None = _knob(
        None, "accountant method for the local epsilon (default: the accountant's default; "
        "see `fedhh privacy --help`)")
    # ---- the algorithm --------------------------------------------------------------------
    algorithm: str = _knob("optprefixtree", "the algorithm (the baselines run in simulation "
                           "only)", choices=ALGORITHMS)
    rounds: int = _knob(4, "rounds T of the discovery (each charged to the budget)")
    dim_limit: int | None = _knob(
        None, f"bound P on a round's domain size (default: {SIMULATION_DIM_LIMIT:.0e}, the "
        f"paper's, in simulation; 2^16 on the network, where every device uploads one entry "
        "per domain element)")
    fp_ratio: float = _knob(0.5, "target false-positive ratio gamma")
    fp_ratio_of: str = _knob(
        "kept", "what gamma is relative to: the kept elements (the paper's Algorithm as "
        "written; gamma < 1) or the expected true discoveries (its appendix figures)",
        choices=FP_RATIO_OF)
    tau0: float = _knob(1.0, "initial threshold multiplier tau_0 of PruneHH")
    eta: float = _knob(0.5, "PruneHH step: E <- eta * E")
    tail: str = _knob("binomial", "law of a zero-count estimate: the exact binomial or the "
                      "paper's Gaussian approximation", choices=TAILS)
    segment_bits: int | None = _knob(None, "fixed segment length (default: adaptive "
                                     "segmentation)")
    selection: str = _knob("uniform", "which of its items a device reports", choices=SELECTIONS)
    prefix_conditioning: bool = _knob(
        True, "select only among items whose prefix is on the round's prefix list")
    codec: str = _knob("unicode", "item code: a built-in codebook (unicode: English letters, "
                       "the pieces of URLs, e-mail addresses and numbers as tokens, any other "
                       "character its first byte and 6 bits a further byte; general: the same "
                       "with a token for each frequent character, the default before "
                       "2026-12; tokens, english, german, bytes, huffman, 5bit) or a codebook "
                       "JSON file (docs/codecs.md)",
                       metavar="CODEBOOK", parse=codec_value)
    max_bits: int = _knob(60, "bits r of an item's code (the paper's r): without completion "
                          "rounds the rounds are planned to cover them and longer items are "
                          "shown cut with …; with them there is no such deadline (codes are "
                          "every round's floor(log2 P) bits wide)")
    completion_rounds: int = _knob(
        DEFAULT_COMPLETION_ROUNDS, "cheaper rounds after the main ones (--rounds) for the items "
        "the main rounds left unended (URLs, e-mail addresses, long words); every round then "
        "takes the adaptive segment, with no deadline to trim the list for; skipped when "
        "nothing is left. They need --algorithm optprefixtree, the sum accountant "
        "(--privacy-method sum) and adaptive segments (no --segment-bits), and in `fedhh "
        "simulate` also --randomizer ohe-rr, --round-items 1, one run (no --two-runs) and "
        "--leftover-rounds idle (simulation's options, their defaults): 0 otherwise; when "
        "too few devices can budget them all, the last are dropped, said in the output")
    completion_weight: float = _knob(
        0.2, "the first completion round's share of the budget, relative to a main round (a "
        "share of e^eps_local: a round runs at eps_local + ln(weight), and the main rounds' "
        "eps_local is solved for all rounds together); a quarter of it for the 2nd and 3rd, a "
        "sixteenth for the 4th to 7th, then halved each time the round's index doubles")
    deny_list: tuple[str, ...] = _knob((), "items to exclude (never reported, never output)",
                                       metavar="PATH")
    warm_start: bool = _knob(False, "deny-list the built-in public warm-start list")
    # ---- utility levers (issue 15, docs/utility.md; simulation only until they are defaults) --
    segment_plan: str = _knob(
        "greedy", "segment schedule: greedy (the paper's: the largest segment that fits now), "
        "lookahead (plan the remaining rounds when greedy segments would trim the list later), "
        "spread (always plan: an untrimmed tree spends every round it paid for)",
        Mode.SIMULATION, choices=SEGMENT_PLANS)
    fp_ratio_finished: float | None = _knob(
        0.1, "false-positive target of the elements that finish an item (they become output), "
        "relative to those kept: about this share of the output is expected to be noise; the "
        "other elements keep fp_ratio ('none': fp_ratio for all, the paper's; simulation only)",
        parse=lambda text: None if text.strip().lower() == "none" else _finite_or_none(text))
    round_fp_ratio: str = _knob(
        "equal", "false-positive target per round: equal (fp_ratio in every round, the "
        "paper's) or one gamma per round, comma-separated, for the elements that do not "
        "finish an item (and for all of a round's elements without fp_ratio_finished)",
        Mode.SIMULATION, metavar="GAMMAS")
    threshold_weights: str = _knob(
        "uniform", "thresholds: uniform (the paper's) or parent (each element's threshold "
        "weighted by the probability that its parent prefix is real, from the previous round)",
        Mode.SIMULATION, choices=THRESHOLD_WEIGHTS)
    selection_hint: float = _knob(
        0.0, "devices weigh each eligible item by its prefix's estimated count to the power "
        "-hint (0: uniform among eligible items, the paper's); the weights travel with the "
        "round's prefix list, so simulation only", Mode.SIMULATION)
    consistency: bool = _knob(
        False, "single item, every device taking part: combine each prefix's estimate with its "
        "children's by least squares under the constraint that the children's counts add up to "
        "the parent's (Hay et al. 2010) before thresholding", Mode.SIMULATION)
    domain: str = _knob(
        "full", "what the dimension limit P counts: every s-bit extension of every prefix (the "
        "paper's) or only those some device can hold under the codec's grammar (a report "
        "indexes the possible elements only; simulation only, where a round's full grid is "
        "also bounded by 2P)", Mode.SIMULATION, choices=DOMAINS)
    leftover_rounds: str = _knob(
        "idle", "rounds a tree finished without: idle (unspent, the paper's) or passes (new "
        "trees over the rounds left, everything found so far deny-listed, while the rounds "
        "left can cover an item)", Mode.SIMULATION, choices=LEFTOVER_ROUNDS)
    round_budget: str = _knob(
        "equal", "how the budget is split over the rounds: equal (the paper's) or one positive "
        "weight per round, comma-separated (a round's share of e^eps_local; eps_local is the "
        "largest round's; accounted by the sum method)", Mode.SIMULATION, metavar="WEIGHTS")
    round_items: str = _knob(
        "1", "items a device reports per round: one count for every round or one per round, "
        "comma-separated (1: one-hot, the paper's; k: up to k distinct items drawn without "
        "replacement by the selection rule, one bit each; a round of k items is charged as k "
        "compositions of the one-hot round by the sum method, so eps_local falls; each report "
        "is then k * eps_local-LDP)", Mode.SIMULATION, metavar="COUNTS")
    # ---- simulation only ------------------------------------------------------------------
    two_runs: bool = _knob(False, "run twice, the first run's output being the second's deny "
                           "list (the budget covers both)", Mode.SIMULATION)
    sampling_rate: float | None = _knob(
        None, "device sampling rate (OptPrefixTree: Poisson q, default 1; TrieHH and TrieHH++: "
        "overrides the calibrated rate)", Mode.SIMULATION)
    theta: int = _knob(10, "TrieHH/TrieHH++ vote threshold", Mode.SIMULATION)
    noise_scale: float | None = _knob(
        None, "central baselines: explicit noise scale (default: calibrated)", Mode.SIMULATION)
    single_item: bool = _knob(False, "single-data-point mode: each device keeps one item for "
                              "every round", Mode.SIMULATION)
    per_device: bool = _knob(False, "randomize every report instead of drawing the sum "
                             "exactly (slow)", Mode.SIMULATION)
    randomizer: str = _knob(
        "ohe-rr", "local randomizer of optprefixtree: one-hot + randomized response, summed by "
        "secure aggregation, or PI-RAPPOR (a few field elements per report, decoded one by one: "
        "it needs a shuffler instead, and is accounted with a shuffle bound; docs/pi-rappor.md)",
        Mode.SIMULATION, choices=RANDOMIZERS)
    seed: int = _knob(0, "seed of the simulation's randomness", Mode.SIMULATION)
    # ---- network only ---------------------------------------------------------------------
    target_devices: int = _knob(1000, "devices per round the coordinator admits to a cohort",
                                Mode.NETWORK)
    min_devices: int = _knob(100, "n_min: a round releases nothing with fewer contributors; "
                             "the accountant charges each round at this count", Mode.NETWORK)
    checkin_ms: int = _knob(10_000, "longest a round's check-in stays open (ms)", Mode.NETWORK)
    checkin_quiet_ms: int = _knob(
        1_000, "check-in closes early once target_devices are in the pool and none joined for "
        "this long (ms)", Mode.NETWORK)
    oversubscription: float = _knob(
        1.5, "check-in admits up to this many times target_devices into the pool, and the "
        "cohort is drawn from the pool uniformly at random", Mode.NETWORK)
    stage_ms: int = _knob(10_000, "default window of each secure-aggregation stage (ms); an "
                          "attempt after one short of devices in time runs its windows twice "
                          "as long as that one did, up to 8 times", Mode.NETWORK)
    advertise_ms: int | None = _knob(None, "key-advertisement window (ms; default stage_ms)",
                                     Mode.NETWORK)
    share_keys_ms: int | None = _knob(None, "key-sharing window (ms; default stage_ms)",
                                      Mode.NETWORK)
    masked_input_ms: int | None = _knob(None, "masked-input window (ms; default stage_ms)",
                                        Mode.NETWORK)
    consistency_ms: int | None = _knob(None, "consistency-check window (ms; default stage_ms)",
                                       Mode.NETWORK)
    unmask_ms: int | None = _knob(None, "unmasking window (ms; default stage_ms)", Mode.NETWORK)
    expected_dropout: float = _knob(0.1, "the dropout rate SecAgg+ (k, t) is chosen for (an "
                                    "assumption; devices' --drop-rate makes them drop)",
                                    Mode.NETWORK)
    corrupt_fraction: float = _knob(0.05, "assumed fraction of corrupt devices, for choosing "
                                    "SecAgg+ (k, t)", Mode.NETWORK)
    max_attempts: int = _knob(5, "attempts of a round before the run fails (across restarts)",
                              Mode.NETWORK)
    max_eps_local: float = _knob(
        10.0, "cap on the per-round local epsilon the accountant may choose: the devices' own "
        "floor (fedhh device --max-eps-local, 10 by default) refuses more", Mode.NETWORK)
    shard_size: int | None = _knob(
        None, "sharded rounds: split each cohort into floor(n / shard_size) shards (each of at "
        "least shard_size devices), each its own secure aggregation on one of the combiner's "
        "workers; every shard must reach min_devices on its own (docs/scaling.md; default: "
        "one shard)", Mode.NETWORK)

    # ---- derived values ---------------------------------------------------------------------
    def resolved_dim_limit(self, mode: Mode) -> int:
        """P for this mode (the field's own value when it is set)."""
        if self.dim_limit is not None:
            return self.dim_limit
        return NETWORK_DIM_LIMIT if mode is Mode.NETWORK else SIMULATION_DIM_LIMIT

    def completion(self) -> int:
        """The completion rounds this run has: ``completion_rounds`` where they can be run and
        budgeted (``completion_blocker``), else 0."""
        return 0 if self.completion_blocker() else self.completion_rounds

    def completion_blocker(self) -> str | None:
        """The setting that rules completion rounds out (they need optprefixtree, the one-hot
        randomizer, the sum accountant, one item per report, one run, no passes and adaptive
        segments), or None."""
        blockers = (
            (self.algorithm != "optprefixtree", f"--algorithm {self.algorithm}"),
            (self.randomizer != "ohe-rr", f"--randomizer {self.randomizer}"),
            (self.privacy_method not in (None, "sum"),
             f"--privacy-method {self.privacy_method}"),
            (self.round_items != "1", f"--round-items {self.round_items}"),
            (self.two_runs, "--two-runs"),
            (self.leftover_rounds != "idle", f"--leftover-rounds {self.leftover_rounds}"),
            (self.segment_bits is not None, f"--segment-bits {self.segment_bits}"),
        )
        return next((why for blocked, why in blockers if blocked), None)

    @property
    def total_rounds(self) -> int:
        """The rounds of one discovery: the main rounds and the completion rounds."""
        return self.rounds + self.completion()

    def code_bits(self, mode: Mode = Mode.SIMULATION, completions: int | None = None) -> int:
        """Width of the codes: max_bits; with completion rounds, what every round can add at
        most, floor(log2 P) bits each (the main rounds may go past max_bits when their prefix
        list is short; at most ``MAX_SUPPORTED_BITS``). ``completions``: the bits the main
        rounds and only the first that many of the completion rounds reach."""
        from fedhh.codec import MAX_SUPPORTED_BITS

        if not self.completion():
            return self.max_bits
        count = self.completion() if completions is None else min(completions, self.completion())
        per_round = self.resolved_dim_limit(mode).bit_length() - 1
        return min(max(self.max_bits, per_round * self.rounds)
                   + per_round * count, MAX_SUPPORTED_BITS)

    def round_weights(self) -> tuple[float, ...] | None:
        """The per-round allocation weights of ``round_budget`` and the completion rounds
        (None: equal rounds)."""
        weights = self._per_round("round_budget", "weights")
        if weights is not None and not all(math.isfinite(w) and w > 0 for w in weights):
            raise ConfigError(f"round_budget weights must be positive, got {self.round_budget!r}")
        if self.completion():
            return (weights or (1.0,) * self.rounds) + self.completion_weights()
        return weights

    def completion_fp_ratios(self) -> tuple[float, ...]:
        """The completion rounds' false-positive targets: the finishing target gamma
        (fp_ratio_finished, else fp_ratio) split as gamma / (i (i + 1)) over the i-th, which
        sums to less than gamma however many there are.

        Why split. PruneHH (the paper's algorithm, ``fedhh.server.prune``) holds a round's
        expected false positives to gamma times what the round keeps, and a completion round
        keeps few elements: mostly the same long items' prefixes, one a round for as many
        rounds as an item needs. At gamma in every round each such chain would admit ~gamma
        false elements a round (a real prefix and noise bits, output as a whole item or a cut
        one), ~1.6 by the 16th round, for one true item; split, the chain admits fewer than
        gamma in all, as the output target promises. Every element of a completion round is
        held to it (not only the finishing ones), so noise prefixes do not crowd the next
        round's domain."""
        gamma = self.fp_ratio if self.fp_ratio_finished is None else self.fp_ratio_finished
        return tuple(gamma / _fp_ratio_divisor(i) for i in range(1, self.completion() + 1))

    def completion_weights(self) -> tuple[float, ...]:
        """The completion rounds' weights: ``completion_weight`` (w) for the first, w/4 for
        the 2nd and 3rd, w/16 for the 4th to 7th, then halved each time the round's index
        doubles (w/32 for the 8th to 15th, w/64 for the 16th to 31st): the i-th round's weight
        falls as 1/i^2 over the first two doublings of i and as 1/i after.

        Why so. The first completion round takes over the main rounds' whole unended list, a
        main round's load (on the default dataset 1,387 prefixes, on synthetic-urls 744), and
        a prefix it cannot extend is lost: its noise, and so its threshold, is the main
        rounds' times about 1/sqrt(weight) (measured: sigma 12.2 in the main rounds, 87 at
        0.02, 28 at 0.2), 7.1 times at the old 0.02, which lost ~180 heavy prefixes of the
        default dataset and ~350 URLs there, 2.2 times at 0.2.
        The lists then shrink fast (1,387, 91, 2 on the default dataset; 744, 54, 48, 28, 3
        on URLs), so the 2nd and 3rd need less, and the long items still going after the 7th
        (e-mail addresses, words of scripts the codebook spells byte by byte, URLs with
        queries) need little budget but many rounds: from the 4th each round weighs at least
        what it did at 0.02 (0.0125, 0.00625, 0.003125, against 0.01, 0.005, 0.0025).
        Every planned round is paid for by the main rounds' eps_local whether it runs or not,
        and their yield is steep in it: the old shape at 0.1 (0.906 of a main round in all)
        lowered it by 0.16 and lost 1.5% of the default dataset's true heavy hitters; these
        32 weigh 0.452 (0.18125 before) and lower it by 0.063. Measured at the defaults, 3
        seeds (docs/codecs.md): the default dataset 9,113 whole true heavy hitters before,
        9,386 now; synthetic-urls 326 URLs whole before, 485 now; synthetic-emoji and
        synthetic-german, whose items the main rounds mostly finish, lose 3.7% and 5.6% (their
        first threshold steps up with the lower eps_local). A thinner tail (dividing by
        3 or 4 each doubling) gave URLs more but left the 32nd round no epsilon at 30,000
        devices. Few distinct weights keep the accountant's solve short: each distinct
        epsilon is a privacy loss distribution of its own (3/i, all distinct, tripled the
        solve's time); these are six."""
        return tuple(self.completion_weight / _weight_divisor(i)
                     for i in range(1, self.completion() + 1))

    def next_completion(self, eps_local: float) -> tuple[float, bool] | None:
        """The weight of one completion round more than this run has, and whether it would
        get a positive local epsilon at ``eps_local``: eps_local + ln(w / the largest weight)
        > 0, the accountant's own test of every round (``allocation_offsets``, then
        ``check_offsets``). Adding a round only lowers eps_local (``with_most_completions``),
        so False means no more can be budgeted at this run's eps_agg and n_min, whatever
        --completion-rounds asks. None when completion rounds cannot run or no more can be
        asked (``MAX_ROUNDS``)."""
        if self.completion_blocker() or self.completion_rounds >= MAX_ROUNDS:
            return None
        from fedhh.privacy.accountant import allocation_offsets

        grown = replace(self, completion_rounds=self.completion() + 1)
        weights = grown.round_weights() or ()
        try:
            return weights[-1], eps_local + allocation_offsets(weights)[-1] > 0
        except ConfigError:  # (a weight e^40 below the largest: no eps_local reaches it)
            return weights[-1], False

    def items_per_round(self) -> tuple[int, ...] | None:
        """Items per device of each round (``round_items``; None: one in every round)."""
        text = self.round_items
        parts = text.split(",")
        if len(parts) == 1:
            parts = parts * self.rounds
        if len(parts) != self.rounds:
            raise ConfigError(f"round_items has {len(parts)} counts for {self.rounds} rounds")
        try:
            counts = tuple(read_integer(p) for p in parts)  # (as every integer option)
        except ConfigError:
            raise ConfigError(f"round_items must be a count or comma-separated counts, got "
                              f"{shown(text)}") from None
        if not all(c >= 1 for c in counts):
            raise ConfigError(f"round_items counts must be >= 1, got {shown(text)}")
        return None if all(c == 1 for c in counts) else counts

    def round_fp_ratios(self) -> tuple[float, ...] | None:
        """The per-round gammas of ``round_fp_ratio`` (None: fp_ratio every round); each is
        checked as fp_ratio is (TreeConfig.validate)."""
        return self._per_round("round_fp_ratio", "gammas")

    def _per_round(self, name: str, what: str) -> tuple[float, ...] | None:
        """Knob ``name``: 'equal' (None) or one number per round, comma-separated."""
        text = getattr(self, name)
        if text == "equal":
            return None
        try:
            values = tuple(read_number(v) for v in text.split(","))
        except ConfigError:
            raise ConfigError(f"{name} must be 'equal' or comma-separated {what}, got "
                              f"{shown(text)}") from None
        if len(values) != self.rounds:
            raise ConfigError(f"{name} has {len(values)} {what} for {self.rounds} rounds")
        return values

    @property
    def runs(self) -> int:
        return 2 if self.two_runs else 1

    @property
    def charged_rounds(self) -> int:
        """Rounds charged to the budget: (main and completion rounds) x runs."""
        return self.total_rounds * self.runs

    def stage_windows(self) -> tuple[int, int, int, int, int]:
        """(advertise, share keys, masked input, consistency, unmask) windows in ms, each
        defaulting to stage_ms. Every stage that lost a device waits for its deadline, so a
        window must fit the work of its live devices (share keys is the heaviest: k key
        agreements and k signature checks per device)."""
        return tuple(self.stage_ms if (value := getattr(self, name)) is None else value
                     for name in WINDOW_FIELDS)  # type: ignore[return-value]

    # ---- validation -------------------------------------------------------------------------
    def validate(self, mode: Mode = Mode.SIMULATION) -> RunConfig:
        """Check every knob (and, for ``mode``, their combination); returns self."""
        _check_types(self)
        self._check_bounds(mode)
        blocker = self.completion_blocker()
        if blocker and self.completion_rounds not in (0, DEFAULT_COMPLETION_ROUNDS):
            # (the default's rounds drop quietly with such a setting; a number asked for
            # does not)
            raise ConfigError(f"completion_rounds {self.completion_rounds} cannot run with "
                              f"{blocker}: completion rounds need optprefixtree, the ohe-rr "
                              "randomizer, the sum accountant, one item per report, one run, "
                              "no passes and adaptive segments (0 turns them off)")
        _positive("eps_agg", self.eps_agg)
        if not 0 < self.delta < 1:
            raise ConfigError(f"delta must be in (0, 1), got {self.delta}")
        if self.eps_local is not None:
            _positive("eps_local", self.eps_local)
            from fedhh.privacy.solver import EPS_LOCAL_MAX

            _at_most("eps_local", self.eps_local, EPS_LOCAL_MAX,
                     "(the largest the accountants solve for; a device's coins resolve 2^-32, "
                     "so any eps_local above 22.18 randomizes as that one)")
            _tells_bits_apart(self.eps_local, self.randomizer)
        _at_least("rounds", self.rounds, 1)
        if self.dim_limit is not None:
            _at_least("dim_limit", self.dim_limit, 2)
        _at_least("max_bits", self.max_bits, 1)
        _at_least("completion_rounds", self.completion_rounds, 0)
        if not (math.isfinite(self.completion_weight) and 0 < self.completion_weight <= 1):
            raise ConfigError(f"completion_weight must be in (0, 1] (a share of a main round's "
                              f"budget), got {self.completion_weight}")
        if self.segment_bits is not None:
            _at_least("segment_bits", self.segment_bits, 1)
        for name, choices in (("algorithm", ALGORITHMS), ("selection", SELECTIONS),
                              ("tail", TAILS), ("fp_ratio_of", FP_RATIO_OF),
                              ("segment_plan", SEGMENT_PLANS),
                              ("threshold_weights", THRESHOLD_WEIGHTS),
                              ("leftover_rounds", LEFTOVER_ROUNDS), ("domain", DOMAINS),
                              ("randomizer", RANDOMIZERS)):
            if getattr(self, name) not in choices:
                raise ConfigError(f"{name} must be one of {', '.join(choices)}, got "
                                  f"{getattr(self, name)!r}")
        if self.deny_list:
            from fedhh.data.dataset import item_defect

            for item in self.deny_list:
                if (defect := item_defect(item)) is not None:
                    raise ConfigError(f"deny-list item {shown(item)} {defect}")
        if self.privacy_method is not None:
            from fedhh.privacy.methods import LEGACY_NAMES, METHODS

            if LEGACY_NAMES.get(self.privacy_method, self.privacy_method) not in METHODS:
                raise ConfigError(f"privacy_method must be one of {', '.join(METHODS)} (or "
                                  f"{', '.join(LEGACY_NAMES)}, a former name), got "
                                  f"{shown(self.privacy_method)}")
        if self.consistency and not (self.single_item and self.algorithm == "optprefixtree"
                                     and self.sampling_rate in (None, 1.0)):
            raise ConfigError("consistency holds in the single-item mode of optprefixtree with "
                              "every device taking part (single_item, no sampling)")
        self._check_completion_shares()
        if (weights := self.round_weights()) is not None:
            from fedhh.privacy.accountant import allocation_offsets

            allocation_offsets(weights)  # (refuses weights too far apart, naming round_budget)
            if self.algorithm != "optprefixtree":
                raise ConfigError(f"round_budget applies to optprefixtree, not {self.algorithm}")
            if self.privacy_method not in (None, "sum"):
                raise ConfigError(f"round_budget is accounted by the sum method only, not "
                                  f"{self.privacy_method}")
        if self.items_per_round() is not None:
            self._validate_round_items()
        if self.sampling_rate is not None and not 0 < self.sampling_rate <= 1:
            raise ConfigError(f"sampling_rate must be in (0, 1], got {self.sampling_rate}")
        # (TrieHH's delta, (theta - 2) / ((theta - 3) theta!) by its Corollary 1, needs 4)
        _at_least("theta", self.theta, 4 if self.algorithm == "triehh" else 1)
        if self.noise_scale is not None:
            _positive("noise_scale", self.noise_scale)
        _at_least("seed", self.seed, 0)
        from fedhh.codec import Codec

        try:
            Codec.from_spec(self.codec, self.code_bits(mode))
        except ConfigError as error:
            raise ConfigError(f"codec {shown(self.codec)} with max_bits {self.max_bits}: "
                              f"{error}") from None
        self.tree(mode).validate(self.code_bits(mode))
        if self.randomizer == "pi-rappor":
            self._validate_pi_rappor(mode)
        if mode is Mode.NETWORK:
            self._validate_network()
        return self

    def _check_completion_shares(self) -> None:
        """A completion round's weight and false-positive target are shares of
        completion_weight and of the finishing gamma (``completion_weights``,
        ``completion_fp_ratios``), the last round's the smallest. A weight more than
        e^``MAX_LOG_WEIGHT_RATIO`` below a main round's gets no positive epsilon at any
        eps_local, and a gamma's share below the smallest normal float rounds to 0. Before,
        they were refused naming settings not given: "round_budget weights must be within a
        factor e^40 ...", "allocation weights must be positive numbers, got (1.0, ..., 0.0)",
        or the option --round-fp-ratio ("targets must be > 0, got 0.0")."""
        rounds = self.completion()
        if not rounds:
            return
        from fedhh.privacy.accountant import MAX_LOG_WEIGHT_RATIO

        divisor = _weight_divisor(rounds)
        weight = self.completion_weight
        if self.round_budget == "equal" and (
                math.log(weight) - math.log(divisor) <= -MAX_LOG_WEIGHT_RATIO):
            least = divisor * math.exp(-MAX_LOG_WEIGHT_RATIO)
            self._too_small("completion_weight", rounds, divisor, least,
                            f"weighs {weight / divisor:.3g}, more than e^"
                            f"{MAX_LOG_WEIGHT_RATIO:g} below a main round: no eps_local gives "
                            "it a positive epsilon")
        name = "fp_ratio" if self.fp_ratio_finished is None else "fp_ratio_finished"
        gamma, divisor = getattr(self, name), _fp_ratio_divisor(rounds)
        if math.isfinite(gamma) and 0 < gamma < divisor * sys.float_info.min:
            self._too_small(name, rounds, divisor, divisor * sys.float_info.min,
                            "rounds to 0")

    def _too_small(self, name: str, rounds: int, divisor: int, least: float, why: str) -> None:
        # (the least is shown rounded up: 3 digits are within 5e-4 of it)
        raise ConfigError(
            f"{name} {getattr(self, name)!r} is too small: the last of the {rounds} completion "
            f"rounds takes 1/{divisor:,} of it, which {why}; give more than "
            f"{least * 1.001:.3g}, or fewer completion rounds")

    def _check_bounds(self, mode: Mode) -> None:
        """The upper bounds of the module docstring, each refused by name before anything is
        computed from it (a per-round list, a domain, a deny list)."""
        from fedhh.codec import MAX_SUPPORTED_BITS

        _at_most("rounds", self.rounds, MAX_ROUNDS)
        _at_most("completion_rounds", self.completion_rounds, MAX_ROUNDS)
        _at_most("max_bits", self.max_bits, MAX_SUPPORTED_BITS)
        if self.segment_bits is not None:
            _at_most("segment_bits", self.segment_bits, MAX_SUPPORTED_BITS)
        if self.dim_limit is not None:
            from fedhh.secagg.config import MAX_DIMENSION

            top = MAX_DIMENSION if mode is Mode.NETWORK else MAX_SIMULATION_DIM_LIMIT
            _at_most("dim_limit", self.dim_limit, top,
                     "on the network" if mode is Mode.NETWORK else "in simulation")
        for name in ("target_devices", "min_devices"):
            _at_most(name, getattr(self, name), MAX_DEVICES)
        if self.shard_size is not None:
            _at_most("shard_size", self.shard_size, MAX_DEVICES)
        for name in ("checkin_ms", "checkin_quiet_ms", "stage_ms", *WINDOW_FIELDS):
            value = getattr(self, name)
            if value is not None:
                _at_most(name, value, MAX_WINDOW_MS, "(one day)")
        _at_most("max_attempts", self.max_attempts, MAX_ATTEMPTS)
        if not self.oversubscription <= MAX_OVERSUBSCRIPTION:
            raise ConfigError(f"oversubscription must be at most {MAX_OVERSUBSCRIPTION:g}, got "
                              f"{self.oversubscription}")
        if len(self.deny_list) > MAX_DENY_ITEMS:
            raise ConfigError(f"the deny list has {len(self.deny_list)} items; at most "
                              f"{MAX_DENY_ITEMS} are accepted")
        long = next((item for item in self.deny_list if len(item) > MAX_ITEM_CHARS), None)
        if long is not None:
            raise ConfigError(f"deny-list item {shown(long)} is too long: at most "
                              f"{MAX_ITEM_CHARS} characters are accepted")
        if len(self.codec) > MAX_CODEC_SPEC_CHARS:
            raise ConfigError(f"the codec spec has {len(self.codec)} characters; a codebook of "
                              f"at most {MAX_CODEC_SPEC_CHARS} is accepted")
        for name in ("round_budget", "round_fp_ratio", "round_items"):
            text = getattr(self, name)
            if len(text) > MAX_LIST_CHARS:
                raise ConfigError(f"{name} has {len(text)} characters; at most "
                                  f"{MAX_LIST_CHARS} are accepted (one value per round)")

    def _validate_round_items(self) -> None:
        """Several items per report are accounted for one-hot + RR sums of multi-item devices
        by the sum method (``fedhh.privacy.ledger``) and drawn in the exact mode only."""
        if self.algorithm != "optprefixtree" or self.randomizer != "ohe-rr":
            raise ConfigError(f"round_items applies to optprefixtree with the ohe-rr randomizer, "
                              f"not {self.algorithm} with {self.randomizer}")
        if self.privacy_method not in (None, "sum"):
            raise ConfigError(f"round_items is accounted by the sum method only, not "
                              f"{self.privacy_method}")
        if self.eps_local is not None:
            raise ConfigError("round_items needs the local epsilon solved by the sum method "
                              f"(no explicit eps_local), got {self.eps_local}")
        if self.single_item:
            raise ConfigError("round_items needs devices with several items (not single_item)")
        if self.per_device:
            raise ConfigError("round_items is drawn in the exact mode only (not per_device)")
        if not self.prefix_conditioning:
            raise ConfigError("round_items needs selection conditioned on the prefix list")

    def _validate_pi_rappor(self, mode: Mode) -> None:
        if mode is Mode.NETWORK:
            raise ConfigError(
                "the networked system sums reports with secure aggregation; PI-RAPPOR reports "
                "are decoded one by one and need a shuffler, which the system does not have "
                "(docs/pi-rappor.md): run PI-RAPPOR with `fedhh simulate --randomizer pi-rappor`")
        if self.algorithm != "optprefixtree":
            raise ConfigError(f"randomizer pi-rappor is a local randomizer of optprefixtree; "
                              f"{self.algorithm} has none")
        from fedhh.pirappor.accounting import accounting_method
        from fedhh.pirappor.mechanism import PiRappor

        accounting_method(self.privacy_method)
        if self.eps_local is not None:
            PiRappor(self.eps_local)

    def _validate_network(self) -> None:
        if self.algorithm != "optprefixtree":
            raise ConfigError(f"the networked system runs optprefixtree only, got "
                              f"{self.algorithm!r}")
        simulation_only = [f.name for f in fields(self) if f.metadata["mode"] is Mode.SIMULATION
                           and getattr(self, f.name) != f.default]
        if simulation_only:
            raise ConfigError(f"simulation-only settings in a networked run: "
                              f"{', '.join(simulation_only)}")
        if self.fp_ratio_finished is None:
            # (the wire's RunConfig has no "none": an unset field is the default, so a
            # networked run would quietly keep 0.1)
            raise ConfigError("fp_ratio_finished none (fp_ratio for every element, the "
                              "paper's) is simulation only: a networked run keeps a target for "
                              "the elements that finish an item; give one in (0, 1)")
        if not 3 <= self.min_devices <= self.target_devices:
            # (opening with the field lets the command line name both flags,
            # flags._name_the_flag; "need 3 <= min_devices <= ..." named neither)
            raise ConfigError(f"min_devices {self.min_devices} must be from 3 to target_devices "
                              f"({self.target_devices}): a round releases only with "
                              "min_devices of the devices it draws")
        if not self.oversubscription >= 1:
            raise ConfigError(f"oversubscription must be >= 1, got {self.oversubscription}")
        for name in ("checkin_ms", "checkin_quiet_ms", "stage_ms", "max_attempts"):
            _at_least(name, getattr(self, name), 1)
        for name in WINDOW_FIELDS:
            if getattr(self, name) is not None:
                _at_least(name, getattr(self, name), 1)
        _positive("max_eps_local", self.max_eps_local)
        # (the solved eps_local is capped at it, so a cap below the floor stored runs at an
        # eps_local that is refused when given itself)
        _tells_bits_apart(self.max_eps_local, self.randomizer, "max_eps_local")
        if self.eps_local is not None and self.eps_local > self.max_eps_local:
            raise ConfigError(f"eps_local {self.eps_local} is above max_eps_local "
                              f"{self.max_eps_local}: devices would refuse the tasks")
        for name in ("expected_dropout", "corrupt_fraction"):
            value = getattr(self, name)
            if not 0 <= value < 1:
                raise ConfigError(f"{name} must be in [0, 1), got {value}")
        if self.shard_size is not None and self.shard_size < self.min_devices:
            # Each shard's sum is seen by the aggregation service on its own: it must hide its
            # members as a whole round's would, so each shard must be able to reach n_min.
            raise ConfigError(f"shard_size must be >= min_devices ({self.min_devices}): every "
                              f"shard releases only with n_min contributors, got "
                              f"{self.shard_size}")
        self._check_secagg_parameters()

    def _check_secagg_parameters(self) -> None:
        """Refuse a run no attempt of which could ever start: SecAgg+ has no lying-server
        (k, t) for its largest cohort (a shard's size when sharded, else target_devices) at
        the expected dropout and corrupt fraction. The coordinator would otherwise open and
        abort ``max_attempts`` attempts before saying so (issue 28: ``fedhh up --devices 5``)."""
        from fedhh.secagg import DEVICES_CHECK, SecAggConfigError, Threat, choose_parameters

        cohort = self.shard_size or self.target_devices
        try:
            choose_parameters(cohort, self.expected_dropout, self.corrupt_fraction,
                              Threat.LYING, devices=DEVICES_CHECK)
        except SecAggConfigError as error:
            # (by the flags of fedhh up and fedhh admin start; the field
            # names, which this said, are no option of any)
            raise ConfigError(f"a cohort of {cohort} devices cannot run secure aggregation: "
                              f"{error}; use more devices, or a lower --expected-dropout or "
                              "--corrupt-fraction (the dropout rate and the share of corrupt "
                              "devices it is made to withstand)") from None

    # ---- views used by the library --------------------------------------------------------
    def tree(self, mode: Mode = Mode.SIMULATION) -> TreeConfig:
        """The prefix tree's round logic parameters."""
        from fedhh.server import TreeConfig

        gammas = self.round_fp_ratios()
        if self.completion():
            gammas = (gammas or (self.fp_ratio,) * self.rounds) + self.completion_fp_ratios()
        return TreeConfig(rounds=self.total_rounds, dim_limit=self.resolved_dim_limit(mode),
                          fp_ratio=self.fp_ratio, tau0=self.tau0, eta=self.eta,
                          segment_bits=self.segment_bits, fp_ratio_of=self.fp_ratio_of,
                          segment_plan=self.segment_plan,
                          fp_ratio_finished=self.fp_ratio_finished,
                          round_fp_ratios=gammas,
                          completion_rounds=self.completion(), main_bits=self.max_bits,
                          threshold_weights=self.threshold_weights,
                          selection_hint=self.selection_hint,
                          consistency=self.consistency, domain=self.domain)

    def selection_rule(self) -> Selection:
        from fedhh.device import Selection

        return Selection.parse(self.selection, self.prefix_conditioning)

    def deny_items(self) -> list[str]:
        """The deny list as items: the configured ones, then the warm-start list if asked for."""
        items = list(self.deny_list)
        if self.warm_start:
            from fedhh.data.wordlists import warm_start_list

            items.extend(warm_start_list())
        return list(dict.fromkeys(items))

    def deny_items_cut(self, mode: Mode = Mode.SIMULATION) -> list[str]:
        """The deny-list items longer than the codes (``code_bits(mode)``): a device compares
        codes, so each denies every item whose code starts with the same bits as its own
        (docs/datasets.md, "Deny lists and the code width")."""
        items = self.deny_items()
        if not items:
            return []
        from fedhh.codec import Codec

        codes = Codec.from_spec(self.codec, self.code_bits(mode)).encode_many(items)
        return [item for item, cut in zip(items, codes.truncated.tolist(), strict=True) if cut]

    # ---- persistence --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["deny_list"] = list(self.deny_list)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        """Inverse of ``to_dict``; unknown keys are an error, missing keys take defaults."""
        if not isinstance(data, dict):
            raise ConfigError(f"a run config is a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown run settings: {', '.join(unknown)}")
        values = dict(data)
        if "deny_list" in values:
            if not isinstance(values["deny_list"], list | tuple):
                raise ConfigError("deny_list must be a list of items")
            values["deny_list"] = tuple(values["deny_list"])
        config = cls(**values)
        _check_types(config)
        return config

    def overrides(self) -> dict[str, Any]:
        """The fields that differ from their defaults (a canonical, minimal form)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) != f.default}


def knobs(mode: Mode | None = None) -> list[Any]:
    """The dataclass fields of the knobs that apply in ``mode`` (every knob for None)."""
    return [f for f in fields(RunConfig)
            if mode is None or f.metadata["mode"] in (Mode.BOTH, mode)]


def field_type(f: Any) -> type:
    """The value type of a knob: bool, int, float, str, or tuple (the deny list)."""
    text = str(f.type)
    for kind in (bool, int, float, str):
        if text.startswith(kind.__name__):
            return kind
    if text.startswith("tuple"):
        return tuple
    raise TypeError(f"unsupported knob type {f.type!r}")  # pragma: no cover


def _check_types(config: RunConfig) -> None:
    for f in fields(config):
        value = getattr(config, f.name)
        kind = field_type(f)
        optional = "None" in str(f.type)
        if value is None and optional:
            continue
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            object.__setattr__(config, f.name, float(value))
            value = float(value)
        ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        if kind is tuple:
            ok = isinstance(value, tuple)
            odd = next((i for i, v in enumerate(value) if not isinstance(v, str)), None) \
                if ok else None
            if odd is not None:  # (before, "deny_list must be a tuple, got (5,)": it was one)
                raise ConfigError(f"{f.name} must hold strings only: element {odd} "
                                  f"({shown(value[odd])}) is {_a_kind(value[odd])}")
        if not ok:
            # (before, "rounds must be a int", "must be an optional int")
            raise ConfigError(f"{f.name} must be {_KIND_WORDS[kind]}"
                              f"{' or None' if optional else ''}, got {shown(value)}")
        if kind is float and not math.isfinite(value):
            raise ConfigError(f"{f.name} must be finite, got {value!r}")


_KIND_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
               tuple: "a list of strings"}


def _a_kind(value: object) -> str:
    """``value``'s type with its article: "an int", "a list", "None"."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _tells_bits_apart(eps_local: float, randomizer: str, name: str = "eps_local") -> None:
    """Refuse an explicit eps_local whose implemented randomizer sends a 0 and a 1 to 1 with
    the same probability (``fedhh.device.randomizer.a0_threshold``: P[0 -> 1] = m / 2^32, and
    P[1 -> 1] = 1 - m / 2^32): at m = 2^31, below eps_local ~9.31e-10, a report carries
    nothing, and the estimator's scale 1 / (a1 - a0) divided by zero after the first round
    (a ZeroDivisionError traceback in `fedhh simulate`, a failed run on the coordinator).

    PI-RAPPOR keeps the same floor, for its own reason: its alpha_1 is rounded down to a
    multiple of 2^-32 (``fedhh.pirappor.params``, Lemma 4.2's rates), and near the floor some
    segment lengths admit no set S with alpha_1 above the rate a of other elements (30 bits
    below 9.3132257418e-10 by bisection; 28 and 29 bits at 5e-10 too), so a round at such a
    segment ended the run in an AssertionError. Its own floor over 1 to 30 bits lies 4.3e-19
    below this one; one floor for both keeps the refusal independent of the segment plan.
    ``name``: the field refused (``max_eps_local``, the cap on a solved eps_local, too)."""
    from fedhh.device.randomizer import SCALE, a0_threshold

    if 2 * a0_threshold(eps_local) < SCALE:
        return
    if randomizer == "pi-rappor":
        why = ("PI-RAPPOR's chance of putting a device's own element in S, in steps of "
               "2^-32, is then no more than another element's at some segment lengths (at 30 "
               "bits below 9.3132257418e-10), and a round at such a segment ends the run")
    else:
        why = ("its randomized response keeps a 1 as often as it turns a 0 into one, so "
               "reports carry nothing")
    if name == "eps_local":
        instead = "or leave eps_local out to have it solved from eps_agg"
    else:
        instead = "or leave it out (10, the devices' default floor)"
    raise ConfigError(f"{name} {eps_local:g} is below what a device's coins resolve "
                      f"(2^-32): {why}; give at least 9.32e-10, {instead}")


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ConfigError(f"{name} must be > 0, got {value}")


def _at_least(name: str, value: int, low: int) -> None:
    if value < low:
        raise ConfigError(f"{name} must be >= {low}, got {_shown(value)}")


def _at_most(name: str, value: float, high: float, where: str = "") -> None:
    if value > high:
        raise ConfigError(f"{name} must be at most {high}{' ' + where if where else ''}, got "
                          f"{_shown(value)}")


def _shown(value: float) -> str:
    """A value for a refusal: an integer past 19 digits as 1e+300 (a flag's 1e300 is that
    integer, and the refusal printed all its 301 digits)."""
    if isinstance(value, int) and abs(value) >= 10 ** 19:
        try:
            return f"{float(value):.3g}"
        except OverflowError:  # (past the largest double: float() raised, a traceback)
            return "less than -1e+308" if value < 0 else "more than 1e+308"
    return str(value)


Planned = TypeVar("Planned")


def eps_agg_for_completions(config: RunConfig, count: int,
                            plan: Callable[[RunConfig], Any] | None = None) -> float | None:
    """An aggregate epsilon at which ``config``'s n_min devices budget ``count`` completion
    rounds (``with_most_completions``), for the note that says what to raise; None where no
    eps_agg does (the smallest weight's round past ``max_eps_local``, or more rounds than the
    accountants' eps_local reaches). The last round, at the smallest weight w, needs eps_local
    > -ln w (``next_completion``); the accountant's own forward bound (Zhu, Dong, Wang 2022,
    through ``aggregate_epsilon``'s PLD of the released sums) gives the eps_agg that eps_local
    spends with those rounds. Below the eps_agg that eps_local = -ln w + 1e-6 spends, a plan
    budgets them only within 1e-6 of -ln w (the solve's eps_local spends no more than its
    target; at -ln w itself the round's epsilon is 0, refused), so with ``plan`` (the
    coordinator's ``open_ledger``, raising PrivacyError where it cannot budget a config) the
    answer is the smallest figure of 3 significant digits from there up that ``plan``
    budgets: the solve lands within its relative tolerance (0.001) below its target, so the
    first or second figure does (each check 0.1 to 0.7 s). Without ``plan``, or should
    ``CHECKS`` figures fail, it is the forward bound at -ln w + 1e-6 with 1% more, rounded up
    to two decimals, which budgets them but may lie ~2% above the least: n_min 100, 1,000
    and 300 at eps_agg 1, 1 and 0.5 named 1.09, 1.82 and 0.61 where 1.08, 1.80 and 0.596
    do (before, the note named those)."""
    from fedhh.privacy.accountant import aggregate_epsilon, allocation_offsets
    from fedhh.privacy.solver import EPS_LOCAL_MAX

    grown = replace(config, completion_rounds=count)
    if not count or grown.completion() != count:
        return None
    offsets = allocation_offsets(grown.round_weights() or ())
    needed = -min(offsets) + 1e-6
    if needed > min(config.max_eps_local, EPS_LOCAL_MAX):
        return None
    least = aggregate_epsilon(needed, config.delta, len(offsets), config.min_devices,
                              offsets=offsets).eps_agg
    enough = math.ceil(least * 1.01 * 100) / 100
    if plan is None:
        return enough
    scale = 10 ** (2 - math.floor(math.log10(least)))
    first = math.ceil(least * scale)
    for steps in range(CHECKS):
        figure = (first + steps) / scale
        if figure >= enough:
            break
        try:
            plan(replace(grown, eps_agg=figure))
        except PrivacyError:
            continue
        return figure
    return enough


# The figures eps_agg_for_completions checks before it falls back on its sufficient bound.
CHECKS = 4


def with_most_completions(config: RunConfig, plan: Callable[[RunConfig], Planned],
                          eps_local_of: Callable[[Planned], float]
                          ) -> tuple[RunConfig, Planned]:
    """``(run, plan(run))`` for ``run``, ``config`` with the most of its completion rounds that
    ``plan`` can budget: ``plan`` raises PrivacyError when no local epsilon meets the target
    with every round's own epsilon, eps_local + ln(weight), positive (too few devices for the
    smallest weights). Dropping the last rounds drops the smallest weights and leaves the rest
    more, so what can be budgeted is every count up to some largest one. That count is
    bounded before any more solving: a round added only lowers eps_local, so with the
    eps_local of no completion rounds at all (``eps_local_of``), a count whose smallest weight
    w has eps_local + ln(w) <= 0 cannot be budgeted; the rest is a bisection. A run that cannot
    be budgeted even without completion rounds raises."""
    try:
        return config, plan(config)
    except PrivacyError:
        if not config.completion():
            raise
    bare = replace(config, completion_rounds=0)
    best = bare, plan(bare)
    ceiling = eps_local_of(best[1])
    weights = config.completion_weights()
    budgeted = 0
    refused = next((c for c in range(1, len(weights)) if ceiling + math.log(weights[c - 1]) <= 0),
                   len(weights))
    while refused - budgeted > 1:
        trial = replace(config, completion_rounds=(budgeted + refused) // 2)
        try:
            best = trial, plan(trial)
        except PrivacyError:
            refused = trial.completion_rounds
            continue
        budgeted = trial.completion_rounds
    return best
