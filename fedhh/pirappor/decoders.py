"""PI-RAPPOR's server side: for every element w of the round's domain, the number of reports
with v(w) in S, by four exact decoders that return identical counts.

What is computed. C_w = #{reports v : v(w) in S}. For the reports of n devices, c_w of which
hold w, C_w ~ Bin(c_w, alpha_1) + Bin(n - c_w, |S|/q) (Algorithm 3's rates; Feldman and Talwar
2021, Lemma 4.2), the same law as coordinate w of the sum of n one-hot + randomized response
reports with those rates, so the estimate (C_w - n a0) / (a1 - a0), its variance and PruneHH's
thresholds are those of ``fedhh.server.estimate`` with PI-RAPPOR's rates. The counts come from the
reports one by one: they cannot be formed by summing reports (secure aggregation), only by a
server that holds every report, unlinked from its sender (a shuffler; docs/pi-rappor.md).

Decoders (the OptPrefixTree appendix "PI-RAPPOR": Algorithms 4 and 5 of the source give the same
estimate at different costs, and the prefix speed-up applies to both). Domain: |P| prefixes
times W_s = 2^s completions; d - 1 prefix coordinates (``layout``).

- ``direct`` (Algorithm 4): evaluate every report at every element: n |P| 2^s evaluations.
- ``histogram`` (Algorithm 5): work from the histogram of reports instead of the reports. The
  reports are grouped by their linear part (v_1, ..., v_d); within a group only v_0 varies, and
  v(w) is in S exactly when v_0 is in S - l(w), l(w) = sum_j v_j w_j. For a prime field S - l
  is a cyclic interval of residues, counted from the group's cumulative counts of v_0 (two
  lookups; for an extension field or |S| <= 2, one count per element of S), or by binary
  searches in the sorted reports when the per-group tables would be too large. Cost: grouping,
  then G |P| 2^s lookups for G distinct linear parts, G <= min(n, q^d): cheaper than ``direct``
  when many reports share their linear part (n much larger than q^d).
- ``direct+prefix`` (Algorithm 4 with the appendix's speed-up): instead of testing all 2^s
  completions of prefix h, compute b = v_0 + sum_{j<d} v_j h_j once and, for each g in S, the
  one completion t = v_d^{-1} (g - b) with v(h, t) = g; count it when t < 2^s (a code of 2^s
  or more is not a completion). A report with v_d = 0 has the same value b at every completion
  of h: all of them or none are counted. Inverses are computed once per report. Cost:
  n |P| |S| field operations instead of n |P| 2^s.
- ``histogram+prefix`` (Algorithm 5 with the speed-up): the same on the distinct reports, each
  counted with its multiplicity.

The cost rule (``costs``, ``choose``). The appendix compares the decoders by their operation
counts: scanning costs (reports or report groups) x |P| q, the speed-up c |P| log(q) per report
("linear in c|P|log(q) instead of linear in |P|q"), and the source's histogram decoder pays n
once to group the reports. We count the same operations for our decoders: a scan covers the 2^s
completions, not all q field elements (the appendix allows restricting the decoders to a subset
of the domain, at a cost linear in its size), and each report's inverse v_d^{-1} is computed
once (log q multiplications) instead of looked up per hit, so a hit costs a constant. The
histogram decoders work on G = q^d (1 - (1 - q^-d)^n) expected distinct linear parts (linear
parts are uniform whatever the data, Algorithm 3) or at most min(n, q^(d+1)) distinct reports.
The operations differ in cost (an add and a compare; a table lookup; a scattered increment), so
each count is weighted by its measured time per operation (the NS_ constants below): the
appendix's counts alone would, for instance, prefer the histogram decoder whenever G < n,
although a lookup costs several times a scan step. ``decode(..., "auto")`` runs the decoder of
least expected time.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum

import numpy as np

from fedhh.errors import ConfigError
from fedhh.pirappor.field import Field, PrimeField
from fedhh.pirappor.layout import RoundLayout
from fedhh.pirappor.params import RoundParameters

CELLS = 1 << 22  # elements per intermediate array (a few tens of MB)
BATCH = 1 << 24  # indices per bincount call of the prime speed-up
TABLE_CELLS = 1 << 25  # largest per-group histogram table of Algorithm 5 (int64 entries)
WORKERS = min(2, os.cpu_count() or 1)
# Starting and joining a thread pool costs about a millisecond, more than the whole decode of a
# few hundred reports: the prime speed-up uses its threads only when each gets at least this
# many (report, prefix, element of S) hits to count.
PARALLEL_HITS = 1 << 20
# Per-operation costs (ns) of this implementation, from bench/bench_pirappor.py and decodes of
# 200 to 200,000 reports at eps 8 on the 2-core development machine (rounded; the cost rule
# only has to tell apart costs that differ by large factors).
NS_STEP = 7.0           # v_d t for one report and completion (int64 multiply and reduce)
NS_SCAN = 1.5           # one report at one element: a uint32 add mod q, a compare, a count
NS_LOOKUP = 6.0         # Algorithm 5: one group at one element, from its table of counts
NS_SEARCH = 50.0        # ... by binary searches, when the tables would be too large
NS_SORT = 150.0         # grouping one report (integer key, sort)
NS_ROW = 1.0            # speed-up: one report and prefix (its start value, one batch slot)
NS_HIT = 2.5            # speed-up: one completion found and counted
NS_HIT_WEIGHTED = 8.0   # ... counted with a multiplicity


class Decoder(StrEnum):
    DIRECT = "direct"                      # Algorithm 4
    HISTOGRAM = "histogram"                # Algorithm 5
    DIRECT_PREFIX = "direct+prefix"        # Algorithm 4 with the prefix speed-up
    HISTOGRAM_PREFIX = "histogram+prefix"  # Algorithm 5 with the prefix speed-up


AUTO = "auto"
DECODERS = (AUTO, *(d.value for d in Decoder))


def costs(params: RoundParameters, layout: RoundLayout, n: int) -> dict[Decoder, float]:
    """Expected decoding time in nanoseconds of each decoder for n reports (module docstring):
    the appendix's operation counts, each weighted by its measured cost."""
    q, d, m = float(params.q), layout.dimension, params.set_size
    prefixes, width = layout.prefixes, layout.completions
    linear_parts = q**d
    groups = -math.expm1(n * math.log1p(-1.0 / linear_parts)) * linear_parts
    distinct = min(float(n), q ** (d + 1))
    lookup = NS_LOOKUP if groups * (q + 1) <= TABLE_CELLS else NS_SEARCH
    return {
        Decoder.DIRECT: n * width * (NS_STEP + prefixes * NS_SCAN),
        Decoder.HISTOGRAM: n * NS_SORT + groups * width * (NS_STEP + prefixes * lookup),
        Decoder.DIRECT_PREFIX: n * prefixes * (NS_ROW + m * NS_HIT),
        Decoder.HISTOGRAM_PREFIX: n * NS_SORT + distinct * prefixes * (NS_ROW
                                                                       + m * NS_HIT_WEIGHTED),
    }


def choose(params: RoundParameters, layout: RoundLayout, n: int) -> Decoder:
    """The decoder of least cost (ties go to the earlier one in ``Decoder``'s order)."""
    cost = costs(params, layout, n)
    return min(Decoder, key=lambda decoder: cost[decoder])


def decode(params: RoundParameters, layout: RoundLayout, reports: np.ndarray,
           decoder: str = AUTO) -> np.ndarray:
    """C_w for every element of the domain (int64, length |P| 2^s) from (n, d + 1) reports."""
    if layout.q != params.q:
        raise ConfigError(f"layout over GF({layout.q}) does not match parameters over "
                          f"GF({params.q})")
    reports = np.asarray(reports, dtype=np.int64)
    if reports.ndim != 2 or reports.shape[1] != layout.report_length:
        raise ConfigError(f"reports must have shape (n, {layout.report_length}), got "
                          f"{reports.shape}")
    if reports.size and (reports.min() < 0 or reports.max() >= params.q):
        raise ConfigError(f"report entries must be field elements in [0, {params.q})")
    if decoder not in DECODERS:
        raise ConfigError(f"decoder must be one of {', '.join(DECODERS)}, got {decoder!r}")
    chosen = choose(params, layout, len(reports)) if decoder == AUTO else Decoder(decoder)
    if chosen is Decoder.DIRECT:
        return _direct(params, layout, reports)
    if chosen is Decoder.HISTOGRAM:
        return _histogram(params, layout, reports)
    if chosen is Decoder.DIRECT_PREFIX:
        return _prefix(params, layout, reports, None)
    unique, _, multiplicity = _unique_rows(reports, params.q)
    return _prefix(params, layout, unique, multiplicity)


def _unique_rows(rows: np.ndarray, q: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows of field elements, each row's index among them, and their multiplicities
    (one integer key per row when q^columns fits an int64: far faster than sorting rows)."""
    columns = rows.shape[1]
    if columns * math.log2(q) < 62:
        keys = (rows * q ** np.arange(columns, dtype=np.int64)).sum(axis=1)
        unique, inverse, multiplicity = np.unique(keys, return_inverse=True, return_counts=True)
        distinct = (unique[:, None] // q ** np.arange(columns, dtype=np.int64)) % q
        return distinct, inverse.ravel(), multiplicity
    distinct, inverse, multiplicity = np.unique(rows, axis=0, return_inverse=True,
                                                return_counts=True)
    return distinct, inverse.ravel(), multiplicity


def _prefix_values(gf: Field, reports: np.ndarray, layout: RoundLayout) -> np.ndarray:
    """b = v_0 + sum_{j < d} v_j h_j for every report and prefix: (n, |P|)."""
    h = layout.prefix_points
    value = np.broadcast_to(reports[:, :1], (reports.shape[0], layout.prefixes))
    if not layout.prefix_digits:
        return value.copy()
    for j in range(layout.prefix_digits):
        value = gf.add(value, gf.mul(reports[:, j + 1 : j + 2], h[None, :, j]))
    return value


def _addmod(a: np.ndarray, b: np.ndarray | np.uint32, q: np.uint32) -> np.ndarray:
    """(a + b) mod q for uint32 residues (q < 2^31, so a + b does not wrap): when a + b < q,
    a + b - q wraps around to a larger value and the minimum keeps a + b."""
    total = a + b
    return np.minimum(total, total - q, out=total)


def _digit_carries(h: int, q: int) -> int:
    """The number of base-q digits of h - 1 equal to q - 1 at its low end (= the largest j with
    q^j dividing h): the digit that h's increment changes."""
    j = 0
    while h % q == 0:
        h //= q
        j += 1
    return j


def _direct(params: RoundParameters, layout: RoundLayout, reports: np.ndarray) -> np.ndarray:
    gf, m = params.field, params.set_size
    completions = np.arange(layout.completions, dtype=np.int64)
    counts = np.zeros(layout.size, dtype=np.int64)
    width = layout.completions
    block = max(1, CELLS // max(width, layout.prefixes))
    for lo in range(0, len(reports), block):
        chunk = reports[lo : lo + block]
        base = _prefix_values(gf, chunk, layout)
        step = gf.mul(chunk[:, -1:], completions[None, :])  # v_d t
        if isinstance(gf, PrimeField):
            q = np.uint32(params.q)
            step32, base32 = step.astype(np.uint32), base.astype(np.uint32)
            for h in range(layout.prefixes):
                values = _addmod(step32, base32[:, h : h + 1], q)
                counts[h * width : (h + 1) * width] += np.count_nonzero(values < m, axis=0)
        else:
            for h in range(layout.prefixes):
                values = gf.add(step, base[:, h : h + 1])
                counts[h * width : (h + 1) * width] += np.count_nonzero(values < m, axis=0)
    return counts


def _histogram(params: RoundParameters, layout: RoundLayout, reports: np.ndarray
               ) -> np.ndarray:
    gf, q, width = params.field, params.q, layout.completions
    counts = np.zeros(layout.size, dtype=np.int64)
    if not len(reports):
        return counts
    linear, group, _ = _unique_rows(reports[:, 1:], q)
    lookup = _GroupCounts(group, reports[:, 0], len(linear), params)
    completions = np.arange(width, dtype=np.int64)
    block = max(1, CELLS // max(width, layout.prefixes))
    for lo in range(0, len(linear), block):
        part = linear[lo : lo + block]
        ids = np.arange(lo, lo + len(part), dtype=np.int64)[:, None]
        # l(h, t) = sum_{j<d} v_j h_j + v_d t: the prefix part once, then each prefix's row.
        base = _prefix_values(gf, np.concatenate([np.zeros_like(part[:, :1]), part], axis=1),
                              layout)
        step = gf.mul(part[:, -1:], completions[None, :])
        prime = isinstance(gf, PrimeField)
        if prime:
            step, base = step.astype(np.uint32), base.astype(np.uint32)
        for h in range(layout.prefixes):
            level = (_addmod(step, base[:, h : h + 1], np.uint32(q)) if prime
                     else gf.add(step, base[:, h : h + 1]))
            counts[h * width : (h + 1) * width] += lookup.count(ids, level).sum(axis=0)
    return counts


class _GroupCounts:
    """Per group of reports (one linear part), how many have v_0 + l in S, for any l."""

    def __init__(self, group: np.ndarray, v0: np.ndarray, groups: int,
                 params: RoundParameters) -> None:
        self.params = params
        q, m = params.q, params.set_size
        self.table = groups * (q + 1) <= TABLE_CELLS
        # Over GF(p) the values of v_0 that count form one cyclic interval: two lookups in
        # cumulative counts (or two binary searches) instead of |S| exact ones.
        self.interval = isinstance(params.field, PrimeField) and m > 2
        self.cumulative = self.table and self.interval
        if self.cumulative:
            # below[g (q + 1) + x] = reports of group g with v_0 < x.
            at = np.bincount(group * q + v0, minlength=groups * q).reshape(groups, q)
            below = np.zeros((groups, q + 1), dtype=np.int64)
            np.cumsum(at, axis=1, out=below[:, 1:])
            self.below = below.ravel()
        elif self.table:
            self.at = np.bincount(group * q + v0, minlength=groups * q)  # [g q + x]: v_0 = x
        else:
            order = np.lexsort((v0, group))
            self.keys = group[order] * q + v0[order]  # sorted: group major, then v_0

    def count(self, ids: np.ndarray, level: np.ndarray) -> np.ndarray:
        gf, q, m = self.params.field, self.params.q, self.params.set_size
        if self.interval:
            # v_0 + l in S = {0..m-1}  <=>  v_0 in the cyclic interval [-l, -l + m) mod q.
            start = (q - level.astype(np.int64)) % q
            stop = start + m
            wrap = stop > q
            rest = np.where(wrap, stop - q, 0)
            if self.cumulative:
                row = ids * (q + 1)
                return (self.below[row + np.minimum(stop, q)] - self.below[row + start]
                        + np.where(wrap, self.below[row + rest], 0))
            row = ids * q
            return (np.searchsorted(self.keys, row + np.minimum(stop, q))
                    - np.searchsorted(self.keys, row + start)
                    + np.where(wrap, np.searchsorted(self.keys, row + rest)
                               - np.searchsorted(self.keys, row), 0))
        found = np.zeros(level.shape, dtype=np.int64)
        for g in range(m):
            if isinstance(gf, PrimeField):  # uint32 residues: g - l = g + (q - l) mod q
                negated = np.uint32(q) - level
                target = np.minimum(negated, negated - np.uint32(q)).astype(np.int64)
                if g:
                    target = (target + g) % q
            else:
                target = gf.sub(np.full(1, g, dtype=np.int64), level)
            if self.table:
                found += self.at[ids * q + target]
            else:
                key = ids * q + target
                found += (np.searchsorted(self.keys, key, side="right")
                          - np.searchsorted(self.keys, key, side="left"))
        return found


def _prefix(params: RoundParameters, layout: RoundLayout, reports: np.ndarray,
            multiplicity: np.ndarray | None) -> np.ndarray:
    gf, m, width = params.field, params.set_size, layout.completions
    counts = np.zeros(layout.size, dtype=np.int64)
    flat = reports[:, -1] == 0
    if flat.any():  # v_d = 0: v(h, t) = b for every t; all completions of h or none
        hit = _prefix_values(gf, reports[flat], layout) < m
        per_prefix = (hit.sum(axis=0) if multiplicity is None
                      else (hit * multiplicity[flat][:, None]).sum(axis=0))
        counts += np.repeat(per_prefix, width)
    live = reports[~flat]
    weight = None if multiplicity is None else multiplicity[~flat].astype(np.float64)
    if not len(live):
        return counts
    if isinstance(gf, PrimeField):
        _prefix_prime(params, layout, live, weight, counts)
        return counts
    overflow = layout.size  # the bin of codes >= 2^s (not completions)
    padded = np.zeros(layout.size + 1, dtype=np.int64)
    rows = np.arange(layout.prefixes, dtype=np.int64)[None, :] * width
    block = max(1, CELLS // layout.prefixes)
    for lo in range(0, len(live), block):
        chunk = live[lo : lo + block]
        base = _prefix_values(gf, chunk, layout)
        slope_inv = gf.inv(chunk[:, -1])[:, None]
        w = None if weight is None else np.repeat(weight[lo : lo + block], layout.prefixes)
        for g in range(m):
            t = gf.mul(slope_inv, gf.sub(np.full(1, g, dtype=np.int64), base))
            index = np.where(t < width, rows + t, overflow).ravel()
            padded += np.bincount(index, weights=w, minlength=padded.size).astype(np.int64)
    counts += padded[:-1]
    return counts


def _prefix_prime(params: RoundParameters, layout: RoundLayout, live: np.ndarray,
                  weight: np.ndarray | None, counts: np.ndarray) -> None:
    """The speed-up over GF(p) for reports with v_d != 0, prefix by prefix.

    With u_h = -v_d^{-1} b_h, the hits of prefix h are t_g = u_h + g v_d^{-1} (g in S). Over
    the prefixes in increasing order u_h changes by a per-report constant: h -> h + 1 raises
    base-q digit j by one and resets the j digits below it from q - 1 to 0, so u grows by
    r_j + sum_{i<j} r_i with r_i = -v_d^{-1} v_i (and -(q - 1) = 1 mod q). Everything is
    uint32 residue arithmetic; hits go through bincount in batches of several g, on
    ``WORKERS`` threads over disjoint blocks of reports (numpy releases the GIL in them) once
    there are ``PARALLEL_HITS`` hits to count.
    """
    q, digits = params.q, layout.prefix_digits
    inv = params.field.inv(live[:, -1])
    neg_inv = (q - inv) % q
    start = ((neg_inv * live[:, 0]) % q).astype(np.uint32)
    r = [(neg_inv * live[:, 1 + j]) % q for j in range(digits)]
    steps = np.array([sum(r[: j + 1]) % q for j in range(digits)], dtype=np.uint32)
    steps = steps.reshape(digits, len(live))
    inv32 = inv.astype(np.uint32)
    hits = len(live) * layout.prefixes * params.set_size
    bounds = np.linspace(0, len(live), max(1, min(WORKERS, hits // PARALLEL_HITS)) + 1
                         ).astype(int)

    def part(lo: int, hi: int) -> np.ndarray:
        return _prefix_prime_block(params, layout, start[lo:hi], steps[:, lo:hi], inv32[lo:hi],
                                   None if weight is None else weight[lo:hi])

    if len(bounds) > 2:
        with ThreadPoolExecutor(len(bounds) - 1) as pool:
            parts = list(pool.map(part, bounds[:-1], bounds[1:]))
    else:
        parts = [part(0, len(live))]
    for found in parts:
        counts += found


def _prefix_prime_block(params: RoundParameters, layout: RoundLayout, start: np.ndarray,
                        steps: np.ndarray, step_inv: np.ndarray, weight: np.ndarray | None
                        ) -> np.ndarray:
    q, m, width = params.q, params.set_size, layout.completions
    q32, cap = np.uint32(q), np.uint32(width)
    counts = np.zeros(layout.size, dtype=np.int64)
    per_batch = max(1, min(m, BATCH // max(len(start), 1)))
    index = np.empty((per_batch, len(start)), dtype=np.int64)
    u = start
    for h in range(layout.prefixes):
        if h:
            u = _addmod(u, steps[_digit_carries(h, q)], q32)
        row = counts[h * width : (h + 1) * width]
        t = u
        for g0 in range(0, m, per_batch):
            k = min(per_batch, m - g0)
            for i in range(k):
                if g0 or i:
                    t = _addmod(t, step_inv, q32)
                np.minimum(t, cap, out=index[i])  # codes >= 2^s land in the spare bin
            weights = None if weight is None else np.tile(weight, k)
            found = np.bincount(index[:k].ravel(), weights=weights, minlength=width + 1)
            row += found[:width].astype(np.int64, copy=False)
    return counts
