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
bits (a *truncated* item: it stands for every item with those bits and is shown with an
ellipsis). Elements equal to a deny-listed item are dropped (devices never report them, so only
noise puts them there).

Codes and prefixes of any width are arrays of ``fedhh.codec.codes``; ``TreeState`` holds them as
Python integers (JSON keeps integers of any size).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from fedhh.codec import ELLIPSIS, Codec
from fedhh.codec import codes as cw
from fedhh.codec.automaton import DEAD, ENDED
from fedhh.device.selection import RoundFilter
from fedhh.errors import ConfigError
from fedhh.server.mechanisms import Mechanism, for_round
from fedhh.server.prune import validate_prune_parameters
from fedhh.server.segment import check_feasible, plan_segment

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
    prefixes: np.ndarray       # ascending prefix_bits-bit values (fedhh.codec.codes arrays)
    segment_bits: int
    deny: np.ndarray           # ascending item codes (max_bits-bit values)
    max_bits: int

    @property
    def domain_size(self) -> int:
        return int(self.prefixes.size) << self.segment_bits

    def round_filter(self) -> RoundFilter:
        return RoundFilter(self.prefixes, self.prefix_bits, self.deny, self.max_bits)

    def domain_index(self, codes: np.ndarray, prefix_index: np.ndarray | None = None
                     ) -> np.ndarray:
        """Domain element of each code (prefix index * 2^s + segment), or -1 off the list."""
        codes = cw.check_array(codes, self.max_bits)
        if prefix_index is None:
            prefix_index = self.round_filter().prefix_index(codes)
        segment = cw.field(codes, self.max_bits, self.prefix_bits, self.segment_bits)
        return np.where(prefix_index >= 0, (prefix_index << self.segment_bits) + segment, -1)


@dataclass(frozen=True)
class Found:
    """A discovered item: its code (an integer of max_bits bits), estimated count and the round
    that found it."""

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
    impossible: int  # domain elements no honest device can hold, removed before thresholding
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
    """A discovered item as shown: ``item`` is its exact text when ``ended`` (its end symbol was
    found); otherwise it was ``truncated`` at ``max_bits`` bits and ``item`` is the text of its
    whole characters followed by an ellipsis. ``note`` says why when another entry shows the
    same text (two truncated items that differ only inside their last, cut character)."""

    item: str
    estimate: float
    code: int
    round: int
    ended: bool = True
    truncated: bool = False
    max_bits: int = 0
    note: str = ""

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
        if self.note:
            out["note"] = self.note
        return out


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
        r = codec.max_bits
        deny = cw.empty(r) if deny_codes is None else cw.check_array(deny_codes, r, "deny codes")
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
            prefixes=cw.from_ints(state.prefixes, state.prefix_bits),
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
        s, bits = query.segment_bits, query.prefix_bits + query.segment_bits
        automaton = self.codec.automaton
        states = automaton.domain_states(automaton.run(query.prefixes, query.prefix_bits), s)
        possible = states != DEAD
        impossible = int(possible.size - np.count_nonzero(possible))
        mechanism = for_round(self.mechanism, s)
        if impossible:
            candidates = np.flatnonzero(possible)
            result = mechanism.threshold(sums[candidates], participants, cfg.kept_fp_ratio,
                                         cfg.tau0, cfg.eta)
            kept = candidates[result.kept]
            del candidates
        else:
            result = mechanism.threshold(sums, participants, cfg.kept_fp_ratio, cfg.tau0,
                                         cfg.eta)
            kept = result.kept
        estimates = result.estimates[result.kept]
        del possible
        values = cw.append(query.prefixes[kept >> s], query.prefix_bits,
                           kept & ((1 << s) - 1), s)
        finished = (states[kept] == ENDED) | (bits >= r)
        del states
        codes = cw.widen(values[finished], bits, r)
        is_denied = np.isin(codes, self.deny)
        denied = int(np.count_nonzero(is_denied))
        found = [Found(code, estimate, query.round) for code, estimate in
                 zip(cw.to_ints(codes[~is_denied]), estimates[finished][~is_denied].tolist(),
                     strict=True)]
        continuing = list(zip(estimates[~finished].tolist(), cw.to_ints(values[~finished]),
                              strict=True))
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
        return shown_items(self.codec, [(f.code, f.estimate, f.round) for f in ordered])


def shown_items(codec: Codec, found: list[tuple[int, float, int]]) -> list[HeavyHitter]:
    """Heavy hitters for (code, estimate, round) triples, each with its text and flags, and a
    note on every entry whose text another entry shares."""
    r = codec.max_bits
    out: list[HeavyHitter] = []
    trailing: list[int] = []
    for code, estimate, found_round in found:
        decoded = codec.decode(code, r)
        text = decoded.text if decoded.ended else decoded.text + ELLIPSIS
        out.append(HeavyHitter(text, estimate, code, found_round, decoded.ended,
                               not decoded.ended, r))
        trailing.append(decoded.trailing_bits)
    by_text: dict[str, list[int]] = {}
    for i, hitter in enumerate(out):
        by_text.setdefault(hitter.item, []).append(i)
    for indices in by_text.values():
        if len(indices) < 2:
            continue
        for i in indices:
            bits = format(out[i].code, f"0{r}b")[r - trailing[i] :] if trailing[i] else ""
            others = len(indices) - 1
            out[i] = replace(out[i], note=(
                f"{others + 1} items show this text: each was truncated at {r} bits inside "
                f"its last character; this one's last {trailing[i]} bits are {bits or '-'}"))
    return out
