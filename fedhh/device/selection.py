"""Data selection: which one of its items a device reports in a round.

Rules (paper, Section "Device Algorithm"):

- ``weighted``: sample from the device's empirical distribution (probability proportional to the
  item's count);
- ``uniform``: sample uniformly from the device's distinct items.

Each rule is either *conditioned* on the round's prefix list (only items whose prefix is on the
list are eligible) or not (the item is drawn from all items; if its prefix is not on the list the
device has nothing to report). Items on the deny list are never eligible. A device with no
eligible item reports nothing (the all-zeros vector).

A device may report *several items* in a round (issue 15, ``RunConfig.round_items``, simulation
only): ``select_many`` draws up to k distinct entries per user, one ``select_block`` draw after
another with the entries already drawn excluded (successive sampling without replacement by
the same rule, conditioned on the prefix list); a user with fewer than k eligible items draws
all of them.

A round may carry *prefix weights* (issue 15's selection hint, simulation only): with prefix
conditioning an item's chance is then also proportional to the weight of its prefix (each
weight rounded to an integer multiple of 2^-12 of the largest, at least one, so draws stay
exact integer draws); an unconditioned draw ignores them.

The functions work on a CSR block of users so that one code path serves a single device (a block
of one user) and the population simulator (blocks of a hundred thousand users).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from fedhh.codec import codes as cw
from fedhh.device.randomness import RandomSource, as_source
from fedhh.errors import ConfigError

NOTHING = -1
WEIGHT_SCALE = 1 << 12


class SelectionRule(StrEnum):
    UNIFORM = "uniform"
    WEIGHTED = "weighted"


@dataclass(frozen=True)
class Selection:
    rule: SelectionRule = SelectionRule.UNIFORM
    prefix_conditioning: bool = True

    @staticmethod
    def parse(rule: str, prefix_conditioning: bool = True) -> Selection:
        try:
            return Selection(SelectionRule(rule), prefix_conditioning)
        except ValueError:
            choices = ", ".join(r.value for r in SelectionRule)
            raise ConfigError(f"selection must be one of {choices}, got {rule!r}") from None


@dataclass(frozen=True)
class RoundFilter:
    """The round's query as seen by selection: prefix list (sorted values of ``prefix_bits``
    bits), deny list (sorted item codes) and the codes' width ``max_bits``; arrays as in
    ``fedhh.codec.codes``."""

    prefixes: np.ndarray
    prefix_bits: int
    deny: np.ndarray
    max_bits: int
    prefix_weights: np.ndarray | None = None  # one per prefix (the selection hint), or None

    def prefix_index(self, codes: np.ndarray) -> np.ndarray:
        """Index of each code's prefix in the prefix list, or -1 when it is not on the list."""
        codes = cw.check_array(codes, self.max_bits)
        if self.prefix_bits == 0:
            return np.zeros(codes.shape, dtype=np.int64)
        heads = cw.leading(codes, self.max_bits, self.prefix_bits)
        return cw.index_in(self.prefixes, heads)

    def denied(self, codes: np.ndarray) -> np.ndarray:
        codes = cw.check_array(codes, self.max_bits)
        if self.deny.size == 0:
            return np.zeros(codes.shape, dtype=bool)
        return cw.index_in(self.deny, codes) >= 0


@dataclass(frozen=True)
class RoundQuery:
    """What every device receives for a round (the prefix tree, ``fedhh.server``, writes
    it; a device reads it: it lives on the device side, so that the device process loads
    none of the server's code)."""

    round: int                 # 1-based
    prefix_bits: int
    prefixes: np.ndarray       # ascending prefix_bits-bit values (fedhh.codec.codes arrays)
    segment_bits: int
    deny: np.ndarray           # ascending item codes (max_bits-bit values)
    max_bits: int
    prefix_weights: np.ndarray | None = None  # the selection hint, one per prefix (simulation)

    @property
    def domain_size(self) -> int:
        return int(self.prefixes.size) << self.segment_bits

    def round_filter(self) -> RoundFilter:
        return RoundFilter(self.prefixes, self.prefix_bits, self.deny, self.max_bits,
                           self.prefix_weights)

    def domain_index(self, codes: np.ndarray, prefix_index: np.ndarray | None = None
                     ) -> np.ndarray:
        """Domain element of each code (prefix index * 2^s + segment), or -1 off the list."""
        codes = cw.check_array(codes, self.max_bits)
        if prefix_index is None:
            prefix_index = self.round_filter().prefix_index(codes)
        segment = cw.field(codes, self.max_bits, self.prefix_bits, self.segment_bits)
        return np.where(prefix_index >= 0, (prefix_index << self.segment_bits) + segment, -1)


@dataclass(frozen=True)
class Eligibility:
    """Per item (indexed by item id): may it be selected this round?

    ``prefix_index``: the index of its prefix on the list, or -1 when off the list or denied;
    ``on_list``: ``prefix_index >= 0`` (conditioned selection draws among these);
    ``allowed``: it is not denied (unconditioned selection draws among these);
    ``weight``: with prefix weights, each item's integer weight (0 off the list), else None.
    """

    prefix_index: np.ndarray
    on_list: np.ndarray
    allowed: np.ndarray
    weight: np.ndarray | None = None

    @staticmethod
    def of(item_codes: np.ndarray, round_filter: RoundFilter) -> Eligibility:
        allowed = ~round_filter.denied(item_codes)
        index = np.where(allowed, round_filter.prefix_index(item_codes), -1)
        weight = None
        if round_filter.prefix_weights is not None:
            w = np.asarray(round_filter.prefix_weights, dtype=np.float64)
            if w.shape != (round_filter.prefixes.size,):
                raise ConfigError(f"{w.size} prefix weights for {round_filter.prefixes.size} "
                                  "prefixes")
            if not np.all(np.isfinite(w) & (w > 0)):
                raise ConfigError("prefix weights must be positive and finite")
            scaled = np.maximum(np.round(w / w.max() * WEIGHT_SCALE), 1).astype(np.int64)
            weight = np.where(index >= 0, scaled[np.maximum(index, 0)], 0)
        return Eligibility(index, index >= 0, allowed, weight)

    @staticmethod
    def everything(num_items: int) -> Eligibility:
        """Every item eligible (the single-item draw)."""
        ones = np.ones(num_items, dtype=bool)
        return Eligibility(np.zeros(num_items, dtype=np.int64), ones, ones)


def select_block(
    indptr: np.ndarray,
    item_ids: np.ndarray,
    counts: np.ndarray,
    eligibility: Eligibility,
    selection: Selection,
    rng: RandomSource | np.random.Generator,
    exclude: np.ndarray | None = None,
) -> np.ndarray:
    """Select one entry per user of a CSR block; returns entry positions or NOTHING (-1).

    ``indptr`` holds the block's user boundaries relative to ``item_ids``/``counts``; item ids
    index the arrays of ``eligibility``. Returns int64 positions into the block's entries.
    ``exclude`` (one bool per entry): entries that may not be drawn (drawn already); only
    with prefix conditioning, where every drawable entry is on the list.
    """
    on_list = eligibility.on_list[item_ids]
    if exclude is not None:
        if not selection.prefix_conditioning:
            raise ConfigError("excluding entries needs selection conditioned on the prefix list")
        on_list = on_list & ~exclude
    if eligibility.weight is not None and selection.prefix_conditioning:
        weight = eligibility.weight[item_ids]
        if selection.rule is SelectionRule.WEIGHTED:
            weight = weight * np.asarray(counts, dtype=np.int64)
        return _sample(indptr, weight, on_list, SelectionRule.WEIGHTED, rng)
    if selection.prefix_conditioning:
        return _sample(indptr, counts, on_list, selection.rule, rng)
    chosen = _sample(indptr, counts, eligibility.allowed[item_ids], selection.rule, rng)
    picked = chosen >= 0
    keep = np.zeros(chosen.size, dtype=bool)
    keep[picked] = on_list[chosen[picked]]
    return np.where(keep, chosen, NOTHING)


def select_domain_index(
    query: RoundQuery,
    item_ids: np.ndarray,
    counts: np.ndarray,
    item_codes: np.ndarray,
    eligibility: Eligibility,
    selection: Selection,
    rng: RandomSource | np.random.Generator,
) -> int:
    """One device's item for a round, as the round's domain element (NOTHING when it has
    none to report): ``select_block`` over its items (``item_ids``, with their ``counts``,
    indexing ``item_codes`` and ``eligibility``), drawn from ``rng``, the device's stream,
    before its randomizer draws from it. The networked device (``fedhh_device.report``:
    its own items, ``item_ids`` 0..k-1) and the simulator's per-device mode
    (``fedhh.simulation.rounds``: the dataset's vocabulary) both draw here, so a networked
    run reproduces the simulation (before, each kept a copy of these lines)."""
    chosen = select_block(np.array([0, item_ids.size]), item_ids, counts, eligibility,
                          selection, rng)
    if chosen[0] < 0:
        return NOTHING
    item = int(item_ids[chosen[0]])
    prefix_index = eligibility.prefix_index[item : item + 1]
    if prefix_index[0] < 0:
        return NOTHING
    return int(query.domain_index(item_codes[item : item + 1], prefix_index)[0])


def select_many(
    indptr: np.ndarray,
    item_ids: np.ndarray,
    counts: np.ndarray,
    eligibility: Eligibility,
    selection: Selection,
    rng: RandomSource | np.random.Generator,
    k: int,
) -> np.ndarray:
    """Up to ``k`` distinct entries per user (module docstring): an int64 array of shape
    (users, k), draw j in column j, NOTHING where a user had nothing left to draw. Its first
    column is ``select_block``'s draw with the same randomness."""
    if k < 1:
        raise ConfigError(f"a device reports at least one item, got k={k}")
    if k > 1 and not selection.prefix_conditioning:
        # An unconditioned draw off the list reports nothing, and would be drawn again.
        raise ConfigError("several items per report need selection conditioned on the prefix "
                          "list")
    users = indptr.size - 1
    chosen = np.full((users, k), NOTHING, dtype=np.int64)
    drawn = np.zeros(item_ids.size, dtype=bool)
    for j in range(k):
        column = select_block(indptr, item_ids, counts, eligibility, selection, rng,
                              drawn if j else None)
        chosen[:, j] = column
        hit = column[column >= 0]
        if hit.size == 0:
            break
        drawn[hit] = True
    return chosen


SPARSE_SHARE = 0.25  # below this share of allowed entries, draw over the allowed ones only


def _sample(
    indptr: np.ndarray,
    counts: np.ndarray,
    allowed: np.ndarray,
    rule: SelectionRule,
    rng: RandomSource | np.random.Generator,
) -> np.ndarray:
    """Per user, an allowed entry drawn by ``rule``, or NOTHING when none is allowed.

    Two ways to the same draw: over every entry, or, when few are allowed (a later round's
    short prefix list; ``SPARSE_SHARE``), over the allowed entries only. Both ask the random
    source for the same draws (one below each user's total, users in order) and map each to
    the same entry, so the result does not depend on the way."""
    allowed_count = int(np.count_nonzero(allowed))
    if allowed_count < SPARSE_SHARE * allowed.size:
        return _sample_allowed(indptr, counts, allowed, allowed_count, rule, rng)
    cum = np.zeros(allowed.size + 1, dtype=np.int64)
    if rule is SelectionRule.WEIGHTED:
        np.cumsum(np.where(allowed, counts, 0), out=cum[1:])
    else:
        np.cumsum(allowed, out=cum[1:])
    totals = cum[indptr[1:]] - cum[indptr[:-1]]
    chosen = np.full(indptr.size - 1, NOTHING, dtype=np.int64)
    has = totals > 0
    if not np.any(has):
        return chosen
    draws = as_source(rng).below(totals[has])
    targets = cum[indptr[:-1][has]] + draws
    # The entry whose cumulative weight interval [cum[i], cum[i+1]) holds the target.
    chosen[has] = np.searchsorted(cum, targets, side="right") - 1
    return chosen


def _sample_allowed(
    indptr: np.ndarray,
    counts: np.ndarray,
    allowed: np.ndarray,
    allowed_count: int,
    rule: SelectionRule,
    rng: RandomSource | np.random.Generator,
) -> np.ndarray:
    """``_sample`` over the allowed entries only (compacted: their positions ``where``)."""
    users = indptr.size - 1
    chosen = np.full(users, NOTHING, dtype=np.int64)
    if allowed_count == 0:
        return chosen
    where = np.flatnonzero(allowed)
    # Allowed entries per user: positions are sorted, so each user's are one run of ``where``.
    first = np.searchsorted(where, indptr[:-1], side="left")
    last = np.searchsorted(where, indptr[1:], side="left")
    weight = (np.asarray(counts, dtype=np.int64)[where] if rule is SelectionRule.WEIGHTED
              else np.ones(where.size, dtype=np.int64))
    cum = np.zeros(where.size + 1, dtype=np.int64)
    np.cumsum(weight, out=cum[1:])
    totals = cum[last] - cum[first]
    has = totals > 0
    if not np.any(has):
        return chosen
    draws = as_source(rng).below(totals[has])
    targets = cum[first[has]] + draws
    chosen[has] = where[np.searchsorted(cum, targets, side="right") - 1]
    return chosen
