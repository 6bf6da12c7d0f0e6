"""The server side of the prefix-tree algorithms: one round's query and what follows from its sum.

This is the paper's ServerPer (Algorithm "Server side algorithm per round") wrapped in a pure
state machine. ``PrefixTree.query(state)`` gives the round's query (prefix list, deny list,
segment length); ``PrefixTree.advance(state, sums, n)`` estimates every element of the domain
``prefix list x {0,1}^s`` from the released sum of ``n`` reports, thresholds them (PruneHH or the
vote threshold), moves finished items to the discovered list (RemoveFinished), chooses the next
segment length and trims the list when it must. The simulator and the coordinator both drive
rounds through this class; ``TreeState`` is a plain value the coordinator persists.

Impossible elements: a domain element that no honest device can hold (an unused codeword, an
invalid escape, bytes that are not UTF-8, a 1 after the end symbol: ``fedhh.codec.automaton``)
has a true count of 0 whatever the data, so it is removed before thresholding: it is never
kept, never becomes a prefix (so it takes no room in a later round's domain), and PruneHH's
expected false positives count only the possible elements. Ignoring released coordinates is
post-processing of the released sum, so privacy is unaffected.

Finished items: a kept element is complete when it holds the end symbol or all ``max_bits``
bits (a *truncated* item: it stands for every item with those bits and is shown cut). Elements
equal to a deny-listed item are dropped (devices never report them, so only noise puts them
there), and so are ended elements that are another writing of their text than the canonical one
a device sends (with tokens: ``PrefixTree._other_writings``), so that an item is listed once.

Completion rounds (``TreeConfig.completion_rounds`` C > 0; issue 27). Without them the
segments are planned to reach ``max_bits`` in the T rounds, and when a long list cannot reach it
in time the planner trims the list (on the default dataset the third round kept 76 of 5,099
prefixes so that the fourth could add the 17 bits left). With them there is no deadline: every
round takes the paper's adaptive segment, ``max{l : |prefixes| 2^l <= P}`` (capped by the bits
left), so no round trims the list, and bits are spent where items are still going (a short list
goes far past ``main_bits``). Codes are wider (``RunConfig.code_bits``: every round's
floor(log2 P) bits). An item whose code has not ended at the end of the T *main* rounds is not
output cut: its kept prefix carries on into the C completion rounds, cheaper rounds
(``RunConfig``'s budget weights) over the prefixes left unended. Few prefixes are cut at
``main_bits`` (the long items: URLs, e-mail addresses, long words), so a completion round adds
floor(log2(P / prefixes)) bits to each: close to floor(log2 P) for a handful, ~17 of 23 while
~40 are open. A prefix still unended after the last round is output *cut* at its length
(``Found.bits``), and so is one a completion round after the first kept and the next lost (its
item's count fell below that cheaper round's threshold), or one of the last main round's that the
first completion round lost, when its estimate clears a bar that holds the noise among those
listed to that round's target (``PrefixTree._lost_first``). Completion rounds are ordinary rounds
for devices and for the accountant (each is charged, at its own local epsilon: ``RunConfig``'s
budget weights); a discovery whose main rounds leave nothing cut ends without them.

Codes and prefixes of any width are arrays of ``fedhh.codec.codes``; ``TreeState`` holds them as
Python integers (JSON keeps integers of any size).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np

from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.codec.automaton import DEAD, ENDED
from fedhh.device.selection import RoundQuery
from fedhh.errors import ConfigError, shown
from fedhh.server.consistency import Adjustment, ConsistentTail, adjust
from fedhh.server.estimate import NullTail, rr_null_std, rr_variance
from fedhh.server.evidence import real_probability, weight_levels
from fedhh.server.mechanisms import (
    CentralNoise,
    LocalRandomizer,
    Mechanism,
    NullLaw,
    RoundMechanism,
    Thresholded,
    VoteThreshold,
    for_round,
)
from fedhh.server.prune import prune_hh, validate_prune_parameters
from fedhh.server.segment import (
    Capacity,
    PossibleCounts,
    check_feasible,
    completion_segment,
    deadline_warning,
    floor_log2,
    plan_segment,
)
from fedhh.server.vocabulary import DOMAINS, FP_RATIO_OF, SEGMENT_PLANS, THRESHOLD_WEIGHTS

GRID_FACTOR = 2  # a simulated round materialises the full grid: at most GRID_FACTOR * P elements


@dataclass(frozen=True)
class TreeConfig:
    """Round logic parameters.

    ``fp_ratio`` (the paper's gamma) is read per ``fp_ratio_of``: ``"kept"``, the paper's
    Algorithm as written, stops raising the threshold once expected false positives are at most
    gamma times the elements kept (so gamma must be below 1: the kept set always contains the
    expected false positives); ``"discoveries"`` compares them with the expected true
    discoveries (kept minus expected false positives), which is what the paper's appendix
    figures for gamma = 0.5..2 show (empirical false-positive shares of about
    gamma / (1 + gamma)). The two coincide at kept-gamma = gamma / (1 + gamma).
    """

    rounds: int
    dim_limit: int = 10_000_000
    fp_ratio: float = 0.5
    tau0: float = 1.0
    eta: float = 0.5
    segment_bits: int | None = None  # None: adaptive segmentation
    fp_ratio_of: str = "kept"
    segment_plan: str = "greedy"  # fedhh.server.segment.SEGMENT_PLANS
    fp_ratio_finished: float | None = None  # gamma of the elements that finish an item
    round_fp_ratios: tuple[float, ...] | None = None  # gamma per round (None: fp_ratio)
    threshold_weights: str = "uniform"  # or "parent": weighted by the parents' evidence
    selection_hint: float = 0.0  # devices weigh items by (prefix estimate)^-hint; 0: uniform
    consistency: bool = False  # single item, every device: consistent with the parents
    domain: str = "full"  # or "possible": P counts the elements some device can hold
    completion_rounds: int = 0  # the last C of ``rounds``: they extend items cut at main_bits
    main_bits: int | None = None  # bits the main rounds cover (None: the code's max_bits)

    @property
    def main_rounds(self) -> int:
        return self.rounds - self.completion_rounds

    def main_width(self, max_bits: int) -> int:
        """The bits the main rounds cover for codes of ``max_bits`` bits."""
        return max_bits if self.main_bits is None else self.main_bits

    def validate(self, max_bits: int) -> None:
        validate_prune_parameters(self.fp_ratio, self.tau0, self.eta)
        if self.fp_ratio_of not in FP_RATIO_OF:
            raise ConfigError(f"fp_ratio_of must be kept or discoveries, got {self.fp_ratio_of!r}")
        # (before the rounds' targets, which follow fp_ratio unless given: this one names it)
        if self.fp_ratio_of == "kept" and self.fp_ratio >= 1:
            raise ConfigError(
                f"fp_ratio {self.fp_ratio} relative to the kept set never raises the threshold "
                "(the kept set always holds the expected false positives): use a value below 1, "
                "or fp_ratio_of='discoveries' (--fp-ratio-of discoveries)")
        # (before the rounds' targets, which the completion rounds' derive from: this names it)
        if self.fp_ratio_finished is not None and not 0 < self.fp_ratio_finished < 1:
            raise ConfigError(f"fp_ratio_finished must be in (0, 1) (relative to the kept "
                              f"finishing elements), got {self.fp_ratio_finished}")
        if self.round_fp_ratios is not None:
            if len(self.round_fp_ratios) != self.rounds:
                raise ConfigError(f"{len(self.round_fp_ratios)} round false-positive targets "
                                  f"for {self.rounds} rounds")
            for gamma in self.round_fp_ratios:
                if not gamma > 0:
                    raise ConfigError(f"round_fp_ratio targets must be > 0, got {gamma}")
                if self.fp_ratio_of == "kept" and not gamma < 1:
                    raise ConfigError(f"round_fp_ratio target {gamma} relative to the kept set "
                                      "never raises the threshold: use values below 1")
        if self.segment_plan not in SEGMENT_PLANS:
            raise ConfigError(f"segment_plan must be one of {', '.join(SEGMENT_PLANS)}, got "
                              f"{self.segment_plan!r}")
        if self.threshold_weights not in THRESHOLD_WEIGHTS:
            raise ConfigError(f"threshold_weights must be one of {', '.join(THRESHOLD_WEIGHTS)},"
                              f" got {self.threshold_weights!r}")
        if self.domain not in DOMAINS:
            raise ConfigError(f"domain must be one of {', '.join(DOMAINS)}, got {self.domain!r}")
        if not 0 <= self.selection_hint <= 4:
            raise ConfigError(f"selection_hint must be in [0, 4], got {self.selection_hint}")
        if not 0 <= self.completion_rounds < self.rounds:
            raise ConfigError(f"completion_rounds must be in [0, rounds - 1 = {self.rounds - 1}],"
                              f" got {self.completion_rounds}")
        main = self.main_width(max_bits)
        if not 1 <= main <= max_bits:
            raise ConfigError(f"main_bits must be in [1, {max_bits}], got {main}")
        if self.completion_rounds and self.segment_bits is not None:
            raise ConfigError("completion rounds use adaptive segments: leave segment_bits unset")
        covered = self.main_rounds * floor_log2(self.dim_limit)
        if self.completion_rounds and covered < main:
            per_round = floor_log2(self.dim_limit)
            raise ConfigError(
                f"max_bits {main} is more than the {self.main_rounds} main rounds can add "
                f"({per_round} bits each at dim_limit {self.dim_limit}): run at least "
                f"{-(-main // per_round)} main rounds (--rounds), or lower max_bits to at most "
                f"{covered}; the completion rounds after the main ones finish the longer items")
        check_feasible(self.main_rounds, main, self.dim_limit, self.segment_bits)

    def deadline_warning(self, max_bits: int) -> str | None:
        """``fedhh.server.segment.deadline_warning`` for these rounds over codes of
        ``max_bits`` bits: None with completion rounds (no deadline), fixed segments (chosen)
        or the possible-element domain (whose rounds fit more than the full grid's bound)."""
        if self.completion_rounds or self.segment_bits is not None or self.domain != "full":
            return None
        return deadline_warning(self.main_rounds, self.main_width(max_bits), self.dim_limit)

    @property
    def kept_fp_ratio(self) -> float:
        """gamma relative to the kept set, the form PruneHH tests."""
        return self._kept(self.fp_ratio)

    def round_kept_fp_ratio(self, round_: int) -> float:
        """Round ``round_``'s (1-based) gamma relative to the kept set: its entry of
        ``round_fp_ratios``, else fp_ratio."""
        if self.round_fp_ratios is None:
            return self.kept_fp_ratio
        return self._kept(self.round_fp_ratios[round_ - 1])

    def _kept(self, gamma: float) -> float:
        return gamma / (1 + gamma) if self.fp_ratio_of == "discoveries" else gamma


@dataclass(frozen=True)
class Cut:
    """The thresholds a round used: the continuing elements' (all elements' with a single
    false-positive target) and the finishing elements' when they have their own target."""

    threshold: float
    tau: float
    sigma: float
    expected_false_positives: float
    finished_threshold: float | None


@dataclass(frozen=True)
class Found:
    """A discovered item: its code (an integer of max_bits bits), estimated count and the round
    that found it. ``bits``: for a prefix left unended after the last round, its length (the
    code is the prefix zero padded); 0 for an item found whole or truncated at max_bits."""

    code: int
    estimate: float
    round: int
    bits: int = 0


@dataclass(frozen=True)
class TreeState:
    """Everything the server carries from one round to the next."""

    next_round: int = 1
    prefix_bits: int = 0
    prefixes: tuple[int, ...] = (0,)
    segment_bits: int = 0
    discovered: tuple[Found, ...] = ()
    done: bool = False
    evidence: tuple[float, ...] = ()  # per prefix: the probability it is real (weighted rule)
    hints: tuple[float, ...] = ()  # per prefix: its selection weight (the selection hint)
    parent_estimates: tuple[float, ...] = ()  # per prefix: its estimate (consistency, completion)
    parent_variances: tuple[float, ...] = ()  # per prefix: that estimate's variance
    last_segment_bits: int = 0  # the bits the last round added (its prefixes' parents: _lost)
    orphans_listed: bool = False  # the next round lists the families it loses whole (_lost)
    # After the last main round: its possible elements that end no item, and its contributors
    # (the null law the first completion round's losses are listed against: _lost_first)
    listing_domain: int = 0
    listing_participants: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> TreeState:
        """Inverse of ``to_dict`` (a state written before a field was added reads it as its
        default); ValueError on a field this fedhh does not write, which would be lost."""
        _check_fields(data, TreeState, "tree state")
        for found in data.get("discovered", ()):  # (one missing is named below, in order)
            _check_fields(found, Found, "discovered item")
        return TreeState(
            next_round=int(data["next_round"]),
            prefix_bits=int(data["prefix_bits"]),
            prefixes=tuple(int(p) for p in data["prefixes"]),
            segment_bits=int(data["segment_bits"]),
            discovered=tuple(Found(int(f["code"]), float(f["estimate"]), int(f["round"]),
                                   int(f.get("bits", 0)))
                             for f in data["discovered"]),
            done=bool(data["done"]),
            evidence=tuple(float(p) for p in data.get("evidence", ())),
            hints=tuple(float(h) for h in data.get("hints", ())),
            parent_estimates=tuple(float(e) for e in data.get("parent_estimates", ())),
            parent_variances=tuple(float(v) for v in data.get("parent_variances", ())),
            last_segment_bits=int(data.get("last_segment_bits", 0)),
            orphans_listed=bool(data.get("orphans_listed", False)),
            listing_domain=int(data.get("listing_domain", 0)),
            listing_participants=int(data.get("listing_participants", 0)),
        )


def _check_fields(data: dict[str, Any], kind: type, what: str) -> None:
    unknown = sorted(set(data) - {f.name for f in fields(kind)})
    if unknown:
        raise ValueError(f"{what} fields {', '.join(map(shown, unknown))} are unknown")


@dataclass(frozen=True)
class RoundReport:
    """Per-round diagnostics (no individual report is ever part of it)."""

    round: int
    prefix_bits: int
    segment_bits: int
    prefixes: int
    domain_size: int
    participants: int
    threshold: float
    tau: float
    sigma: float
    kept: int
    finished: int  # items found (whole, or truncated at max_bits without completion rounds)
    impossible: int  # domain elements no honest device can hold, removed before thresholding
    denied: int
    continuing: int
    trimmed: int
    next_segment_bits: int | None
    expected_false_positives: float
    actual_false_positives: int | None = None
    finished_threshold: float | None = None  # with fp_ratio_finished: the finishing elements'
    cut: int = 0  # prefixes output unended (cut_prefixes): not counted in ``finished``
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HeavyHitter:
    """A discovered item as shown: ``item`` is its exact text when ``ended`` (its end symbol was
    found); otherwise it is ``truncated`` (cut: at max_bits, or after the last round or by a
    later completion round, ``PrefixTree._lost``, at its ``bits``) and ``item`` is its readable
    prefix, the bytes of a character it stops inside as ``\\xNN``, the count of bits it holds
    of a codeword it stops inside (``⟨+3 bits⟩``), then ``…`` (``Decoded.shown_cut``).
    ``note`` says why when the row stands for several cut prefixes that show the same text
    (they differ only after its last byte)."""

    item: str
    estimate: float
    code: int
    round: int
    ended: bool = True
    truncated: bool = False
    max_bits: int = 0
    note: str = ""
    bits: int = 0  # bits of the code that were found (max_bits unless cut before it)
    std: float | None = None  # the estimate's standard deviation, where told (estimate_std)
    parts: int = 1  # the cut prefixes a row stands for (``note``), its estimate their sum
    # truncated: the item's bytes the prefix holds, its first ones (its whole characters and
    # those of a character it stops inside); what follows them the run never learned
    prefix_bytes: int = 0

    @property
    def code_bytes(self) -> bytes:
        """The code as ceil(max_bits / 8) big-endian bytes (the wire form)."""
        return self.code.to_bytes(-(-self.max_bits // 8), "big")

    @property
    def code_hex(self) -> str:
        """The code as fixed-width hex (its max_bits bits, left-aligned, zero padded)."""
        return f"0x{self.code:0{max(1, -(-self.max_bits // 4))}x}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"item": self.item, "estimate": self.estimate, "round": self.round,
                               "code": self.code_hex, "ended": self.ended,
                               "truncated": self.truncated}
        if self.truncated:
            out["bits"] = self.bits
            out["prefix_bytes"] = self.prefix_bytes
        if self.note:
            out["note"] = self.note
        if self.std is not None:  # (nan, for a mechanism without one, is no JSON number)
            out["std"] = None if math.isnan(self.std) else self.std
        return out


class PrefixTree:
    """Round logic of OptPrefixTree and the baselines that share its tree (see module doc)."""

    def __init__(
        self,
        config: TreeConfig,
        codec: Codec,
        mechanism: Mechanism,
        deny_codes: np.ndarray | None = None,
        round_mechanisms: tuple[Mechanism, ...] | None = None,
    ) -> None:
        """``round_mechanisms``: one mechanism per round (a per-round budget allocation);
        None: ``mechanism`` in every round."""
        config.validate(codec.max_bits)
        if round_mechanisms is not None and len(round_mechanisms) != config.rounds:
            raise ConfigError(f"{len(round_mechanisms)} round mechanisms for {config.rounds} "
                              "rounds")
        if config.consistency and not isinstance(mechanism, LocalRandomizer):
            raise ConfigError("consistency needs the local randomizer's estimates")
        if config.threshold_weights != "uniform" and not isinstance(
                mechanism, LocalRandomizer | CentralNoise):
            raise ConfigError("weighted thresholds need a noise law (OptPrefixTree or central "
                              "DP), not vote thresholds")
        self.config = config
        self.codec = codec
        self.mechanism = mechanism
        self.round_mechanisms = round_mechanisms
        r = codec.max_bits
        deny = cw.empty(r) if deny_codes is None else cw.check_array(deny_codes, r, "deny codes")
        self.deny = np.unique(deny)
        # The counts reach no further than the longest segment a round's full grid of
        # GRID_FACTOR * P elements holds for one prefix: past it every capacity is 0 whatever
        # the counts. So a codec of more than 62 bits (completion rounds' long items) needs no
        # counts past 2^62.
        reach = min(r, floor_log2(GRID_FACTOR * config.dim_limit))
        self.possible = (PossibleCounts(codec.automaton.step, reach)
                         if config.domain == "possible" else None)

    def capacity(self, values: np.ndarray, bits: int) -> Capacity | None:
        """With ``domain="possible"``: how many of these prefixes (``bits``-bit values, top
        first) fit at each segment length (``fedhh.server.segment``); None for the full grid."""
        if self.possible is None:
            return None
        states = self.codec.automaton.run(values, bits)
        return self.possible.capacity(states, self.config.dim_limit,
                                      GRID_FACTOR * self.config.dim_limit)

    @property
    def _weighs_evidence(self) -> bool:
        """Whether the kept elements' probability of being real is needed: by the weighted
        thresholds, and by the planned segment schedules, which weigh each prefix's estimated
        count by it (a false positive's count is noise: carrying it is worth nothing). Vote
        thresholds have no noise law: their elements count as real."""
        if not isinstance(self.mechanism, LocalRandomizer | CentralNoise):
            return False
        return self.config.threshold_weights == "parent" or self.config.segment_plan != "greedy"

    def mechanism_for(self, round_: int) -> Mechanism:
        """The mechanism of round ``round_`` (1-based)."""
        if self.round_mechanisms is None:
            return self.mechanism
        return self.round_mechanisms[round_ - 1]

    def initial_state(self) -> TreeState:
        # The first round keeps the full grid's segment even when only possible elements
        # count: a longer first segment splits the first round's reports over more elements,
        # and the first round is where most heavy hitters are lost (docs/utility.md).
        cfg = self.config
        if cfg.completion_rounds:
            return TreeState(segment_bits=completion_segment(
                1, self.codec.max_bits, cfg.dim_limit).bits)
        plan = plan_segment(1, 0, cfg.rounds, self.codec.max_bits, cfg.dim_limit,
                            cfg.segment_bits, cfg.segment_plan)
        return TreeState(segment_bits=plan.bits)

    def query(self, state: TreeState) -> RoundQuery:
        if state.done:
            raise ConfigError("the discovery is finished; there is no next round")
        return RoundQuery(
            round=state.next_round,
            prefix_bits=state.prefix_bits,
            prefixes=cw.from_ints(state.prefixes, state.prefix_bits),
            segment_bits=state.segment_bits,
            deny=self.deny,
            max_bits=self.codec.max_bits,
            prefix_weights=np.array(state.hints) if state.hints else None,
        )

    def advance(
        self,
        state: TreeState,
        sums: np.ndarray,
        participants: int,
        true_counts: np.ndarray | None = None,
    ) -> tuple[TreeState, RoundReport]:
        """Consume a round's released sum over ``participants`` reports."""
        query = self.query(state)
        sums = np.asarray(sums)
        if sums.shape != (query.domain_size,):
            raise ConfigError(
                f"round {query.round} sum has shape {sums.shape}, expected ({query.domain_size},)"
            )
        if participants < 0:
            raise ConfigError(f"participants must be >= 0, got {participants}")
        cfg, r = self.config, self.codec.max_bits
        s, bits = query.segment_bits, query.prefix_bits + query.segment_bits
        last = query.round == cfg.rounds
        automaton = self.codec.automaton
        states = automaton.domain_states(automaton.run(query.prefixes, query.prefix_bits), s)
        impossible = int(np.count_nonzero(states == DEAD))
        weights = None
        if cfg.threshold_weights == "parent" and state.evidence:
            weights = np.repeat(weight_levels(np.asarray(state.evidence)), 1 << s)
        mechanism = for_round(self.mechanism_for(query.round), s)
        consistent = None
        if cfg.consistency and state.parent_estimates and participants > 0:
            assert isinstance(mechanism, LocalRandomizer)  # checked in __init__
            consistent = adjust(mechanism.estimate(sums, participants), states != DEAD, s,
                                np.asarray(state.parent_estimates),
                                np.asarray(state.parent_variances),
                                rr_null_std(participants, mechanism.randomizer) ** 2)
        # Every element finishes an item in the last round of the tree (the last main round
        # without completion rounds), or when its bits reach the code's width.
        complete_all = bits >= r or (last and not cfg.completion_rounds)
        kept, estimates, real, cut = self._threshold(mechanism, sums, participants, states,
                                                     complete_all, weights, consistent,
                                                     cfg.round_kept_fp_ratio(query.round),
                                                     query.round > cfg.main_rounds)
        values = cw.append(query.prefixes[kept >> s], query.prefix_bits,
                           kept & ((1 << s) - 1), s)
        # With completion rounds the width r is what the rounds can add, not the item's: an
        # element reaching it unended is as cut as one left unended after the last round.
        width_cut = bits >= r and bool(cfg.completion_rounds)
        ended = states[kept] == ENDED
        finished = ended | (complete_all and not width_cut)
        # After the last completion round, what is still unended is output cut at its bits.
        unended = ~finished if last or width_cut else np.zeros(finished.size, dtype=bool)
        # The last main round's null law's domain for what goes on (``_lost_first``).
        listing_domain = (int(np.count_nonzero((states != DEAD) & (states != ENDED)))
                          if query.round == cfg.main_rounds and cfg.completion_rounds else 0)
        del states
        codes = cw.widen(values[finished], bits, r)
        is_denied = np.isin(codes, self.deny)
        other = self._other_writings(codes, ended[finished] & ~is_denied)
        found = [Found(code, estimate, query.round) for code, estimate in
                 zip(cw.to_ints(codes[~is_denied & ~other]),
                     estimates[finished][~is_denied & ~other].tolist(), strict=True)]
        # An element cut at the code's whole width is an item's code as devices compare it
        # (a deny-listed item longer than the codes is denied by its first r bits), so one
        # equal to a deny code is dropped as a finished one is; a shorter cut prefix stands
        # for every item starting so, and is kept.
        cut_codes = cw.widen(values[unended], bits, r)
        cut_denied = (np.isin(cut_codes, self.deny) if bits >= r
                      else np.zeros(cut_codes.size, dtype=bool))
        denied = int(np.count_nonzero(is_denied)) + int(np.count_nonzero(cut_denied))
        found += [Found(code, estimate, query.round, bits) for code, estimate in
                  zip(cw.to_ints(cut_codes[~cut_denied]),
                      estimates[unended][~cut_denied].tolist(), strict=True)]
        if query.round - 2 >= cfg.main_rounds:
            found += self._lost(state, query, kept >> s,
                                orphans_only=query.round - 2 == cfg.main_rounds)
        elif query.round - 1 == cfg.main_rounds and cfg.completion_rounds:
            found += self._lost_first(state, query, kept >> s)
        carry = ~finished & ~unended
        continuing = list(zip(estimates[carry].tolist(), cw.to_ints(values[carry]),
                              real[carry].tolist(), strict=True))
        rounds_left = cfg.rounds - query.round
        next_bits: int | None = None
        trimmed = 0
        if continuing and rounds_left > 0:
            continuing.sort(key=lambda ev: (-ev[0], ev[1]))
            if cfg.completion_rounds:
                # No deadline: what the main rounds leave unended, the completion rounds carry
                # on, so no round trims the list to reach max_bits in time.
                plan = completion_segment(len(continuing), r - bits, cfg.dim_limit)
            else:
                plan = plan_segment(len(continuing), bits, cfg.main_rounds - query.round, r,
                                    cfg.dim_limit, cfg.segment_bits, cfg.segment_plan,
                                    masses=np.array([e * p for e, _, p in continuing]),
                                    capacity=self.capacity(
                                        cw.from_ints([v for _, v, _ in continuing], bits), bits))
            trimmed = max(0, len(continuing) - plan.keep_prefixes)
            continuing = continuing[: plan.keep_prefixes]
            next_bits = plan.bits
        elif continuing:  # cannot happen: the last round finishes or cuts every prefix
            raise RuntimeError("prefixes left unfinished after the last round")
        new_state = TreeState(
            next_round=query.round + 1,
            prefix_bits=bits,
            prefixes=tuple(v for _, v, _ in sorted(continuing, key=lambda ev: ev[1])),
            segment_bits=next_bits or 0,
            discovered=state.discovered + tuple(found),
            done=next_bits is None,
            evidence=(tuple(p for _, _, p in sorted(continuing, key=lambda ev: ev[1]))
                      if cfg.threshold_weights == "parent" else ()),
            hints=(tuple(max(e, 1.0) ** -cfg.selection_hint
                         for e, _, _ in sorted(continuing, key=lambda ev: ev[1]))
                   if cfg.selection_hint > 0 else ()),
            **self._parents(sorted(continuing, key=lambda ev: ev[1]), mechanism, participants,
                            query.round >= cfg.main_rounds and bool(cfg.completion_rounds)),
            last_segment_bits=s,
            orphans_listed=(query.round - 1 == cfg.main_rounds
                            and cut.expected_false_positives < 1),
            listing_domain=listing_domain,
            listing_participants=participants if listing_domain else 0,
        )
        actual_fp = None
        if true_counts is not None:
            actual_fp = int(np.count_nonzero(np.asarray(true_counts)[kept] == 0))
        report = RoundReport(
            round=query.round,
            prefix_bits=query.prefix_bits,
            segment_bits=s,
            prefixes=int(query.prefixes.size),
            domain_size=query.domain_size,
            participants=participants,
            threshold=cut.threshold,
            tau=cut.tau,
            sigma=cut.sigma,
            kept=int(kept.size),
            finished=sum(1 for f in found if not f.bits),
            cut=sum(1 for f in found if f.bits),
            impossible=impossible,
            denied=denied,
            continuing=len(continuing),
            trimmed=trimmed,
            next_segment_bits=next_bits,
            expected_false_positives=cut.expected_false_positives,
            actual_false_positives=actual_fp,
            finished_threshold=cut.finished_threshold,
        )
        return new_state, report

    def _other_writings(self, codes: np.ndarray, ended: np.ndarray) -> np.ndarray:
        """Which of the ended ``codes`` (r-bit items) are not their text's canonical code.

        With tokens an item can be written in several ways, and the automaton keeps every
        writing possible (``fedhh.codec.automaton``), but a device sends only the canonical
        one (``Codec.encode_many``): another writing's true count is 0, so only noise keeps
        it. Such an element is dropped, as a deny-listed one is: left in, it listed its item
        a second time beside the canonical code's row (don't, 30 and 9: the 9 all noise), and
        a deny-listed item's text through a writing the deny codes did not hold. Dropping a
        released coordinate is post-processing: privacy is unaffected."""
        other = np.zeros(codes.size, dtype=bool)
        where = np.flatnonzero(ended)
        if not where.size:
            return other
        r = self.codec.max_bits
        texts = [self.codec.decode(code, r).text for code in cw.to_ints(codes[where])]
        other[where] = self.codec.encode_many(texts).codes != codes[where]
        return other

    def _lost(self, state: TreeState, query: RoundQuery, parents: np.ndarray,
              orphans_only: bool) -> list[Found]:
        """The prefixes a completion round after the first kept and the next kept none of the
        extensions of, as cut prefixes at the bits and estimate of the round that kept them.

        A later completion round runs at a smaller share of the budget than the one before, so
        its threshold is higher than the one a long item's prefix passed: the item's count can
        fall below it (a 1,000-letter item held by 2.5% of 6,000 devices did, 269 bits in; at
        2,000 devices, items of a few Cyrillic, CJK or Devanagari characters held by 30% of
        them did, 64 bits in). Dropping its prefix would lose a heavy item without a trace; it
        is reported as cut instead, as a prefix still open after the last round is. A
        completion round holds every element it keeps to its share of the finishing target
        (``RunConfig.completion_fp_ratios``), so this adds no false positive those targets do
        not count.

        What the first completion round loses is listed by ``_lost_first``, against a bar: its
        prefixes come from the last main round, whose target is for prefixes that go on (kept
        lists there are up to half noise). Of
        what the second loses (``orphans_only``), only when the first expected under one false
        positive among all it kept (``TreeState.orphans_listed``), and then only the heaviest
        of each family (the prefixes the first completion round kept of one last-main-round
        prefix) of which nothing went on or was found. At the paper's scale the first
        completion round keeps many (~850 on the default dataset, ~30 of them expected false),
        whose noise extensions die in the second (25 such on the default dataset, all within a
        standard deviation of its threshold, as are real items' prefixes at 2,000 devices: the
        estimates do not tell them apart); a real prefix's noise siblings die beside it going
        on. From the third on a round keeps few, the long items' chains, each held to a target
        gamma / (i (i + 1)). Post-processing of released sums: privacy is unaffected."""
        if len(state.parent_estimates) != query.prefixes.size or (
                orphans_only and not state.orphans_listed):
            return []  # (a state persisted before the estimates were carried)
        lost = np.ones(query.prefixes.size, dtype=bool)
        lost[parents] = False
        index = np.flatnonzero(lost)
        r = self.codec.max_bits
        codes = cw.to_ints(cw.widen(query.prefixes, query.prefix_bits, r))
        if orphans_only:
            family_shift = r - (query.prefix_bits - state.last_segment_bits)
            alive = {codes[i] >> family_shift for i in np.flatnonzero(~lost).tolist()}
            alive |= {f.code >> family_shift for f in state.discovered
                      if f.round == query.round - 1}
            heaviest: dict[int, int] = {}
            for i in index.tolist():
                family = codes[i] >> family_shift
                if family not in alive and (family not in heaviest or state.parent_estimates[i]
                                            > state.parent_estimates[heaviest[family]]):
                    heaviest[family] = i
            index = np.array(sorted(heaviest.values()), dtype=np.int64)
        return [Found(codes[i], state.parent_estimates[i], query.round - 1, query.prefix_bits)
                for i in index.tolist()]

    def _lost_first(self, state: TreeState, query: RoundQuery,
                    parents: np.ndarray) -> list[Found]:
        """The last main round's prefixes the first completion round kept no extension of,
        listed cut (at the bits and estimate of the main round) when they clear a bar that
        holds the noise among them to the first completion round's own target (its share of
        ``fp_ratio_finished``, ``RunConfig.completion_fp_ratios``: 0.05 at the defaults):
        PruneHH with that gamma over the lost prefixes' estimates, against the main round's
        null law over its whole domain of elements that end no item
        (``TreeState.listing_domain``). A noise element of that round above the bar is counted
        whether it was kept or not, so the expected noise among those listed is at most gamma
        times their number.

        The first completion round runs at a small share of the budget (2% of a main round):
        its threshold is many times the last main round's, and at a few thousand devices it can
        lose every long item at once (11 items of URLs, phone numbers, CJK, Devanagari and
        Thai held by 35% of 2,000 devices each: all lost 52 bits in, nothing listed; a run
        said only that round 5 kept no prefix). The last main round's kept list is up to half
        noise, which is why these were not listed at all: the bar lists only the prefixes
        whose estimates noise is unlikely to reach. Only with a null law (not vote
        thresholds), the finishing target set and without consistency. Post-processing of
        released sums: privacy is unaffected."""
        cfg = self.config
        if (not state.listing_domain or cfg.fp_ratio_finished is None or cfg.consistency
                or len(state.parent_estimates) != query.prefixes.size):
            return []  # (consistency: adjusted estimates follow another null law)
        mechanism = for_round(self.mechanism_for(query.round - 1), state.last_segment_bits)
        if not isinstance(mechanism, NullLaw | CentralNoise):
            return []
        lost = np.ones(query.prefixes.size, dtype=bool)
        lost[parents] = False
        index = np.flatnonzero(lost)
        if not index.size:
            return []
        estimates = np.asarray(state.parent_estimates, dtype=np.float64)[index]
        listed = prune_hh(estimates, _null_tail(mechanism, state.listing_participants),
                          cfg.round_kept_fp_ratio(query.round), cfg.tau0, cfg.eta,
                          domain_size=max(state.listing_domain, int(index.size)))
        r = self.codec.max_bits
        codes = cw.to_ints(cw.widen(query.prefixes[index[listed.kept]], query.prefix_bits, r))
        return [Found(code, float(estimate), query.round - 1, query.prefix_bits)
                for code, estimate in zip(codes, estimates[listed.kept].tolist(), strict=True)]

    def _parents(self, carried: list[tuple[float, int, float]], mechanism: RoundMechanism,
                 participants: int, completing: bool) -> dict[str, tuple[float, ...]]:
        """The carried prefixes' estimates and variances, for the next round's consistency;
        the estimates alone after a completion round (``_lost``)."""
        estimates = tuple(e for e, _, _ in carried)
        if not self.config.consistency or not isinstance(mechanism, LocalRandomizer):
            return {"parent_estimates": estimates} if completing else {}
        rr = mechanism.randomizer
        variances = tuple(float(rr_variance(min(max(e, 0.0), participants), participants, rr))
                          for e in estimates)
        return {"parent_estimates": estimates, "parent_variances": variances}

    def _threshold(self, mechanism: RoundMechanism, sums: np.ndarray, participants: int,
                   states: np.ndarray, last_round: bool, weights: np.ndarray | None,
                   consistent: Adjustment | None = None, gamma: float | None = None,
                   completion: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, Cut]:
        """Domain elements kept (ascending), their estimates, the probability that each is
        real (``fedhh.server.evidence``; ones unless the thresholds are weighted), and the
        thresholds.

        Impossible elements never take part (module docstring). With ``fp_ratio_finished``
        the elements that finish an item (they hold the end symbol, or every element of the
        last round) are thresholded on their own with that target, the others with
        ``fp_ratio``: the class of an element is a property of its bits, fixed before the
        sum is seen, so each class's PruneHH bounds its own expected false positives by its
        own target, against the same null law. ``weights`` (per domain element) weigh the
        thresholds of each class (``fedhh.server.prune``). ``consistent``: the estimates
        adjusted for consistency with the parents (``fedhh.server.consistency``), thresholded
        against the law of an adjusted zero-count estimate. ``gamma``: the round's target
        for the elements that do not finish (``round_fp_ratios``; default fp_ratio). A
        per-round target is fixed before the round's sum is seen, so each round's PruneHH
        still bounds its own expected false positives by its own target. ``completion``: a
        completion round, whose ``gamma`` is its share of the finishing target
        (``RunConfig.completion_fp_ratios``) and holds every element, ending or not.
        """
        cfg = self.config
        if gamma is None:
            gamma = cfg.kept_fp_ratio
        possible = states != DEAD
        classes: list[tuple[np.ndarray, float]] = []
        if cfg.fp_ratio_finished is None or completion:
            classes.append((possible, gamma))
        elif last_round:
            classes.append((possible, cfg.fp_ratio_finished))
        else:
            ends = states == ENDED
            classes += [(possible & ~ends, gamma), (ends, cfg.fp_ratio_finished)]
        consistent_tail: ConsistentTail | None = None
        if consistent is not None:
            consistent_tail = ConsistentTail(_null_tail(mechanism, participants),
                                             consistent.shrink, consistent.spread)
        kept_parts, estimate_parts, real_parts, results = [], [], [], []
        for member, target in classes:
            index = np.flatnonzero(member) if not np.all(member) else None
            part = sums if index is None else sums[index]
            part_weights = None if weights is None else (
                weights if index is None else weights[index])
            if consistent is None or consistent_tail is None:
                result = mechanism.threshold(part, participants, target, cfg.tau0, cfg.eta,
                                             weights=part_weights)
            else:
                values = consistent.estimates if index is None else consistent.estimates[index]
                pruned = prune_hh(values, consistent_tail, target, cfg.tau0, cfg.eta,
                                  weights=part_weights)
                result = Thresholded(pruned.kept, values, pruned.threshold, pruned.tau,
                                     consistent_tail.sigma, pruned.expected_false_positives)
            kept_parts.append(result.kept if index is None else index[result.kept])
            kept_estimates = result.estimates[result.kept]
            estimate_parts.append(kept_estimates)
            if self._weighs_evidence and kept_estimates.size:
                real_parts.append(real_probability(
                    kept_estimates, consistent_tail or _null_tail(mechanism, participants),
                    part.size, result.threshold))
            else:
                real_parts.append(np.ones(kept_estimates.size))
            results.append(result)
        kept = np.concatenate(kept_parts)
        order = np.argsort(kept, kind="stable")
        main = results[0]
        finished = results[1].threshold if len(results) > 1 else (
            main.threshold if cfg.fp_ratio_finished is not None else None)
        cut = Cut(main.threshold, main.tau, main.sigma,
                  sum(r.expected_false_positives for r in results), finished)
        return (kept[order], np.concatenate(estimate_parts)[order],
                np.concatenate(real_parts)[order], cut)



    def heavy_hitters(self, state: TreeState) -> list[HeavyHitter]:
        """Discovered items by round, then highest estimate first (``shown_items``): items
        found whole, and items truncated at the code's max_bits (the paper's items are their
        first r bits). Deny-list items and cut prefixes are reported separately."""
        return shown_items(self.codec, [f for f in state.discovered if not f.bits])

    def cut_prefixes(self, state: TreeState) -> list[HeavyHitter]:
        """Prefixes still unended after the last completion round, or whose every extension a
        completion round lost (``_lost``, ``_lost_first``): heavy, but the rounds could not
        complete the items behind them. Not items: listed apart from the heavy hitters, the
        latest round first (the longest prefixes, of the items the rounds carried furthest),
        then by estimate. Listed from the first round, the last main round's losses, tens or
        hundreds of short prefixes of a population's rare tail, came before the heaviest
        items of a run (a URL held by 30% of the devices, cut in round 20, was the 123rd row,
        below the console's --top)."""
        return shown_items(self.codec, [f for f in state.discovered if f.bits],
                           latest_first=True)


def _null_tail(mechanism: RoundMechanism, participants: int) -> NullTail:
    if isinstance(mechanism, CentralNoise):
        return mechanism.null_tail()
    if isinstance(mechanism, VoteThreshold):
        raise ConfigError("vote thresholds have no null law")  # refused in PrefixTree.__init__
    if not isinstance(mechanism, NullLaw):
        raise ConfigError(f"{type(mechanism).__name__} has no null law")
    return mechanism.null_tail(participants)  # the local randomizers: OHE+RR, PI-RAPPOR


def shown_items(codec: Codec, found: list[Found],
                latest_first: bool = False) -> list[HeavyHitter]:
    """Heavy hitters for discovered items, each with its text and flags, one row per shown text.

    Order: by the round that found the item, then by estimate. Estimates of different rounds
    are not comparable: a round's estimate counts the devices that *chose* the item that round,
    and a device chooses among its items on the round's prefix list, a list that narrows round
    by round, so the same item would be counted higher in a later round ("the" can show 8,917
    in round 2 and a rarer word 50,273 in round 4). Within a round they are. ``latest_first``:
    the rounds in the other order (cut prefixes: ``PrefixTree.cut_prefixes``).

    Cut items (truncated at max_bits, or unended after the last round) that show the same text
    (they differ only after its last whole byte) are one row: their estimates summed, the
    round of the first listed, and a note; the row is placed by its sum (before, by its first
    part's estimate, so that ``(555⟨+15 bits⟩…``, two parts summing 1,672, was listed after a
    row of 1,661 in its round)."""
    r = codec.max_bits
    ordered = sorted(found, key=lambda f: (-f.round if latest_first else f.round,
                                           -f.estimate, f.code))
    rows: list[HeavyHitter] = []
    merged: dict[str, int] = {}
    for f in ordered:
        bits = f.bits or r
        prefix = f.code >> (r - bits)
        decoded = codec.decode(prefix, bits)
        ended = decoded.ended
        text = decoded.text if ended else codec.display(prefix, bits)
        hitter = HeavyHitter(text, f.estimate, f.code, f.round, ended, not ended, r, bits=bits,
                             prefix_bytes=0 if ended else decoded.known_bytes)
        where = merged.get(text)
        if ended or where is None:
            if not ended:
                merged[text] = len(rows)
            rows.append(hitter)
            continue
        first = rows[where]
        count = int(first.note.split(" ", 1)[0]) + 1 if first.note else 2
        rows[where] = replace(first, estimate=first.estimate + f.estimate, parts=count, note=(
            f"{count} cut prefixes show this text (they differ only after its last byte); "
            "the estimate is their sum"))
    if len(rows) == len(ordered):
        return rows
    return sorted(rows, key=lambda h: (-h.round if latest_first else h.round, -h.estimate,
                                       h.code))
