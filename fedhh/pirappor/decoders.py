"""PI-RAPPOR's server side: for every element w of the round's domain, the number of reports
with v(w) in S, by four exact decoders that return identical counts.

What is computed. C_w = #{reports v : v(w) in S}. For the reports of n devices, c_w of which
hold w, C_w ~ Bin(c_w, alpha_1) + Bin(n - c_w, |S|/q) (Algorithm 3's rates; Feldman and Talwar
2021, Lemma 4.2), the same law as coordinate w of the sum of n one-hot + randomized response
reports with those rates, so the estimate (C_w - n a0) / (a1 - a0), its variance and PruneHH's
thresholds are those of ``fedhh.estimate`` with PI-RAPPOR's rates. The counts come from the
reports one by one: they cannot be formed by summing reports (secure aggregation), only by a
server that holds every report, unlinked from its sender (a shuffler; docs/pi-rappor.md).

Decoders (the OptPrefixTree appendix "PI-RAPPOR": Algorithms 4 and 5 of the source give the same
estimate at different costs, and the prefix speed-up applies to both). Domain: |P| prefixes
times W_s = 2^s completions; d - 1 prefix coordinates (``layout``).

- ``direct`` (Algorithm 4): evaluate every report at every element: n |P| 2^s evaluations.
- ``histogram`` (Algorithm 5): work from the histogram of reports instead of the reports. The
  reports are grouped by their linear part (v_1, ..., v_d); within a group only v_0 varies, and
  v(w) is in S exactly when v_0 is in S - l(w), l(w) = sum_j v_j w_j. For a prime field S - l
  is a cyclic interval of residues, counted by two binary searches in the group's sorted v_0
  (for an extension field, one exact-match search per element of S). Cost: sorting, then
  G |P| 2^s lookups for G distinct linear parts, G <= min(n, q^d): cheaper than ``direct`` when
  many reports share their linear part (n much larger than q^d).
- ``direct+prefix`` (Algorithm 4 with the appendix's speed-up): instead of testing all 2^s
  completions of prefix h, compute b = v_0 + sum_{j<d} v_j h_j once and, for each g in S, the
  one completion t = v_d^{-1} (g - b) with v(h, t) = g; count it when t < 2^s (a code of 2^s
  or more is not a completion). A report with v_d = 0 has the same value b at every completion
  of h: all of them or none are counted. Inverses are computed once per report. Cost:
  n |P| |S| field operations instead of n |P| 2^s.
- ``histogram+prefix`` (Algorithm 5 with the speed-up): the same on the distinct reports, each
  counted with its multiplicity.

The cost rule (``costs``, ``choose``) takes the appendix's figures: scanning costs
(number of reports or groups) x |P| 2^s; the speed-up costs |S| |P| log(q) per report (the
appendix: "linear in c|P|log(q) instead of linear in |P|q"; our scan covers only the 2^s
completions, not all q field elements, which the appendix allows for a subset of the domain);
a histogram costs n to build, over G = q^d (1 - (1 - q^-d)^n) expected distinct linear parts
(linear parts are uniform whatever the data, Algorithm 3) or at most min(n, q^(d+1)) distinct
reports. ``decode(..., "auto")`` runs the cheapest.
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


class Decoder(StrEnum):
    DIRECT = "direct"                      # Algorithm 4
    HISTOGRAM = "histogram"                # Algorithm 5
    DIRECT_PREFIX = "direct+prefix"        # Algorithm 4 with the prefix speed-up
    HISTOGRAM_PREFIX = "histogram+prefix"  # Algorithm 5 with the prefix speed-up


AUTO = "auto"
DECODERS = (AUTO, *(d.value for d in Decoder))


def costs(params: RoundParameters, layout: RoundLayout, n: int) -> dict[Decoder, float]:
    """The appendix's operation counts of each decoder for n reports (module docstring)."""
    q, d, m = float(params.q), layout.dimension, params.set_size
    scan = float(layout.size)
    prefix = layout.prefixes * m * math.log(q)
    linear_parts = q**d
    groups = -math.expm1(n * math.log1p(-1.0 / linear_parts)) * linear_parts
    distinct = min(float(n), q ** (d + 1))
    return {
        Decoder.DIRECT: n * scan,
        Decoder.HISTOGRAM: n + groups * scan,
        Decoder.DIRECT_PREFIX: n * prefix,
        Decoder.HISTOGRAM_PREFIX: n + distinct * prefix,
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
    unique, multiplicity = np.unique(reports, axis=0, return_counts=True)
    return _prefix(params, layout, unique, multiplicity)


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
    gf, q, m = params.field, params.q, params.set_size
    counts = np.zeros(layout.size, dtype=np.int64)
    if not len(reports):
        return counts
    linear, group = np.unique(reports[:, 1:], axis=0, return_inverse=True)
    group = group.ravel()
    groups = len(linear)
    table = groups * (q + 1) <= TABLE_CELLS
    if table:
        # below[g, x] = reports of group g with v_0 < x; for extension fields, at[g, x] = with
        # v_0 = x.
        at = np.bincount(group * q + reports[:, 0], minlength=groups * q).reshape(groups, q)
        below = np.zeros((groups, q + 1), dtype=np.int64)
        np.cumsum(at, axis=1, out=below[:, 1:])
    else:
        order = np.lexsort((reports[:, 0], group))
        keys = group[order] * q + reports[order, 0]  # sorted: group major, then v_0
    points = np.concatenate(
        [np.repeat(layout.prefix_points, layout.completions, axis=0),
         np.tile(np.arange(layout.completions, dtype=np.int64), layout.prefixes)[:, None]],
        axis=1)  # (|P| 2^s, d), in element order
    block = max(1, CELLS // layout.size)
    for lo in range(0, groups, block):
        part = linear[lo : lo + block]
        ids = np.arange(lo, lo + len(part), dtype=np.int64)[:, None]
        level = np.zeros((len(part), layout.size), dtype=np.int64)
        for j in range(layout.dimension):
            level = gf.add(level, gf.mul(part[:, j : j + 1], points[None, :, j]))
        if isinstance(gf, PrimeField):
            # v_0 + l in S = {0..m-1}  <=>  v_0 in the cyclic interval [-l, -l + m) mod q.
            start = (q - level) % q
            stop = start + m
            wrap = stop > q
            if table:
                found = (below[ids, np.minimum(stop, q)] - below[ids, start]
                         + np.where(wrap, below[ids, np.where(wrap, stop - q, 0)], 0))
            else:
                offset = ids * q
                wrapped = np.searchsorted(keys, offset + np.where(wrap, stop - q, 0))
                found = (np.searchsorted(keys, offset + np.minimum(stop, q))
                         - np.searchsorted(keys, offset + start)
                         + np.where(wrap, wrapped - np.searchsorted(keys, offset), 0))
        else:
            found = np.zeros(level.shape, dtype=np.int64)
            for g in range(m):
                target = gf.sub(np.full(1, g, dtype=np.int64), level)
                if table:
                    found += at[ids, target]
                else:
                    key = ids * q + target
                    found += (np.searchsorted(keys, key, side="right")
                              - np.searchsorted(keys, key, side="left"))
        counts += found.sum(axis=0)
    return counts


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
    ``WORKERS`` threads over disjoint blocks of reports (numpy releases the GIL in them).
    """
    q, digits = params.q, layout.prefix_digits
    inv = params.field.inv(live[:, -1])
    neg_inv = (q - inv) % q
    start = ((neg_inv * live[:, 0]) % q).astype(np.uint32)
    r = [(neg_inv * live[:, 1 + j]) % q for j in range(digits)]
    steps = np.array([sum(r[: j + 1]) % q for j in range(digits)], dtype=np.uint32)
    steps = steps.reshape(digits, len(live))
    inv32 = inv.astype(np.uint32)
    bounds = np.linspace(0, len(live), min(WORKERS, len(live)) + 1).astype(int)

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
