"""The server side of the prefix-tree algorithms: one round's query and what follows from its sum.

This is the paper's ServerPer (Algorithm "Server side algorithm per round") wrapped in a pure
state machine. ``PrefixTree.query(state)`` gives the round's query (prefix list, deny list,
segment length); ``PrefixTree.advance(state, sums, n)`` estimates every element of the domain
``prefix list x {0,1}^s`` from the released sum of ``n`` reports, thresholds them (PruneHH or the
vote threshold), moves finished items to the discovered list (RemoveFinished), chooses the next
segment length and trims the list when it must. The simulator and the coordinator both drive
rounds through this class; ``TreeState`` is a plain value the coordinator persists.

Finished items: a kept element is complete when it holds the end-of-word symbol or all
``max_bits`` bits. Elements whose bits after the end symbol are not zero cannot come from an
honest device (items are zero padded), so they are dropped as impossible; elements equal to a
deny-listed item are dropped too (devices never report them, so only noise puts them there).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from fedhh.codec import Codec
from fedhh.errors import ConfigError
from fedhh.mechanisms import Mechanism, for_round
from fedhh.prune import validate_prune_parameters
from fedhh.segment import check_feasible, plan_segment
from fedhh.selection import RoundFilter

FP_RATIO_OF = ("kept", "discoveries")


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

    def validate(self, max_bits: int) -> None:
        validate_prune_parameters(self.fp_ratio, self.tau0, self.eta)
        if self.fp_ratio_of not in FP_RATIO_OF:
            raise ConfigError(f"fp_ratio_of must be kept or discoveries, got {self.fp_ratio_of!r}")
        if self.fp_ratio_of == "kept" and self.fp_ratio >= 1:
            raise ConfigError(
                f"fp_ratio {self.fp_ratio} relative to the kept set never raises the threshold "
                "(the kept set always holds the expected false positives): use a value below 1, "
                "or fp_ratio_of='discoveries' (--fp-ratio-of discoveries)")
        check_feasible(self.rounds, max_bits, self.dim_limit, self.segment_bits)

    @property
    def kept_fp_ratio(self) -> float:
        """gamma relative to the kept set, the form PruneHH tests."""
        if self.fp_ratio_of == "discoveries":
            return self.fp_ratio / (1 + self.fp_ratio)
        return self.fp_ratio


@dataclass(frozen=True)
class RoundQuery:
    """What every device receives for a round."""

    round: int                 # 1-based
    prefix_bits: int
    prefixes: np.ndarray       # uint64, ascending, each a prefix_bits-bit value
    segment_bits: int
    deny: np.ndarray           # uint64 left-aligned item codes, ascending
    max_bits: int

    @property
    def domain_size(self) -> int:
        return int(self.prefixes.size) << self.segment_bits

    def round_filter(self) -> RoundFilter:
        return RoundFilter(self.prefixes, self.prefix_bits, self.deny, self.max_bits)

    def domain_index(self, codes: np.ndarray, prefix_index: np.ndarray | None = None
                     ) -> np.ndarray:
        """Domain element of each code (prefix index * 2^s + segment), or -1 off the list."""
        codes = np.asarray(codes, dtype=np.uint64)
        if prefix_index is None:
            prefix_index = self.round_filter().prefix_index(codes)
        shift = np.uint64(self.max_bits - self.prefix_bits - self.segment_bits)
        segment = ((codes >> shift) & np.uint64((1 << self.segment_bits) - 1)).astype(np.int64)
        return np.where(prefix_index >= 0, (prefix_index << self.segment_bits) + segment, -1)


@dataclass(frozen=True)
class Found:
    """A discovered item: its left-aligned code, estimated count and the round that found it."""

    code: int
    estimate: float
    round: int


@dataclass(frozen=True)
class TreeState:
    """Everything the server carries from one round to the next."""

    next_round: int = 1
    prefix_bits: int = 0
    prefixes: tuple[int, ...] = (0,)
    segment_bits: int = 0
    discovered: tuple[Found, ...] = ()
    done: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> TreeState:
        return TreeState(
            next_round=int(data["next_round"]),
            prefix_bits=int(data["prefix_bits"]),
            prefixes=tuple(int(p) for p in data["prefixes"]),
            segment_bits=int(data["segment_bits"]),
            discovered=tuple(Found(int(f["code"]), float(f["estimate"]), int(f["round"]))
                             for f in data["discovered"]),
            done=bool(data["done"]),
        )


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
    finished: int
    impossible: int
    denied: int
    continuing: int
    trimmed: int
    next_segment_bits: int | None
    expected_false_positives: float
    actual_false_positives: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HeavyHitter:
    item: str
    estimate: float
    code: int
    round: int


class PrefixTree:
    """Round logic of OptPrefixTree and the baselines that share its tree (see module doc)."""

    def __init__(
        self,
        config: TreeConfig,
        codec: Codec,
        mechanism: Mechanism,
        deny_codes: np.ndarray | None = None,
    ) -> None:
        config.validate(codec.max_bits)
        self.config = config
        self.codec = codec
        self.mechanism = mechanism
        deny = np.zeros(0, np.uint64) if deny_codes is None else np.asarray(deny_codes, np.uint64)
        self.deny = np.unique(deny)

    def initial_state(self) -> TreeState:
        plan = plan_segment(1, 0, self.config.rounds, self.codec.max_bits,
                            self.config.dim_limit, self.config.segment_bits)
        return TreeState(segment_bits=plan.bits)

    def query(self, state: TreeState) -> RoundQuery:
        if state.done:
            raise ConfigError("the discovery is finished; there is no next round")
        return RoundQuery(
            round=state.next_round,
            prefix_bits=state.prefix_bits,
            prefixes=np.array(state.prefixes, dtype=np.uint64),
            segment_bits=state.segment_bits,
            deny=self.deny,
            max_bits=self.codec.max_bits,
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
        result = for_round(self.mechanism, query.segment_bits).threshold(
            sums, participants, cfg.kept_fp_ratio, cfg.tau0, cfg.eta)
        s, bits = query.segment_bits, query.prefix_bits + query.segment_bits
        kept = result.kept
        values = (query.prefixes[kept >> s] << np.uint64(s)) | (kept & ((1 << s) - 1)).astype(
            np.uint64
        )
        estimates = result.estimates[kept]
        denied_codes = set(self.deny.tolist())
        found: list[Found] = []
        continuing: list[tuple[float, int]] = []
        impossible = denied = 0
        for value, estimate in zip(values.tolist(), estimates.tolist(), strict=True):
            decoded = self.codec.decode(value, bits)
            if decoded.ended and not decoded.padding_ok:
                impossible += 1
            elif decoded.ended or bits >= r:
                if value << (r - bits) in denied_codes:
                    denied += 1
                else:
                    found.append(Found(value << (r - bits), estimate, query.round))
            else:
                continuing.append((estimate, value))
        rounds_left = cfg.rounds - query.round
        next_bits: int | None = None
        trimmed = 0
        if continuing and rounds_left > 0:
            plan = plan_segment(len(continuing), bits, rounds_left, r, cfg.dim_limit,
                                cfg.segment_bits)
            continuing.sort(key=lambda ev: (-ev[0], ev[1]))
            trimmed = max(0, len(continuing) - plan.keep_prefixes)
            continuing = continuing[: plan.keep_prefixes]
            next_bits = plan.bits
        elif continuing:  # cannot happen: the last round always completes every prefix
            raise RuntimeError("prefixes left unfinished after the last round")
        new_state = TreeState(
            next_round=query.round + 1,
            prefix_bits=bits,
            prefixes=tuple(sorted(v for _, v in continuing)),
            segment_bits=next_bits or 0,
            discovered=state.discovered + tuple(found),
            done=next_bits is None,
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
            threshold=result.threshold,
            tau=result.tau,
            sigma=result.sigma,
            kept=int(kept.size),
            finished=len(found),
            impossible=impossible,
            denied=denied,
            continuing=len(continuing),
            trimmed=trimmed,
            next_segment_bits=next_bits,
            expected_false_positives=result.expected_false_positives,
            actual_false_positives=actual_fp,
        )
        return new_state, report

    def heavy_hitters(self, state: TreeState) -> list[HeavyHitter]:
        """Discovered items, highest estimate first (deny-list items are reported separately)."""
        ordered = sorted(state.discovered, key=lambda f: (-f.estimate, f.code))
        return [HeavyHitter(self.codec.display_item(f.code), f.estimate, f.code, f.round)
                for f in ordered]
