"""The two-distribution reduction of shuffling, and its divergences computed exactly.

Feldman, McMillan, Talwar 2021, "Hiding Among the Clones" (FMT21, arXiv 2012.12803), Section 3:
for n reports of eps0-DP (adaptive) local randomizers, the shuffled output on neighbouring
datasets is a post-processing of a sample of P versus Q, where

    C ~ Binomial(n - 1, p),  A ~ Binomial(C, 1/2),  Delta ~ Bernoulli(e^eps0 / (e^eps0 + 1)),
    P = (A + Delta, C - A + 1 - Delta),   Q = (A + 1 - Delta, C - A + Delta),

with clone probability p = e^{-eps0} (FMT21). Feldman, McMillan, Talwar 2023, "Stronger Privacy
Amplification by Shuffling for Renyi and Approximate DP" (FMT23, arXiv 2208.04591), Lemma 3.5,
raises p to 2 / (e^eps0 + 1); its errata restricts that to a class of randomizers (see
``randomizer_class``). Every divergence obeying data processing, Renyi divergence and the
hockey-stick divergence included, is therefore bounded by that of (P, Q).

Computation. Given C = c, write K = first coordinate (K determines the pair) and u = K / (c + 1).
With H = Binomial(c + 1, 1/2) and g(u) = (1 - w) + (2w - 1) u, w = e^eps0 / (e^eps0 + 1):

    P_c(k) = 2 H(k) g(u),   Q_c(k) = 2 H(k) g(1 - u),   log(P_c / Q_c)(k) = log g(u) - log g(1-u).

(Check: B_c(k - 1) = H(k) 2k / (c + 1) and B_c(k) = H(k) 2(c + 1 - k) / (c + 1).) Then
``(a - 1) D_a(P || Q) = log E_C[M_c(a)]`` with ``M_c(a) = sum_k P_c^a Q_c^{1-a}``, and the
hockey-stick ``delta(eps) = E_C[sum_k (P_c - e^eps Q_c)_+]`` (P and Q are mirror images, so both
directions are equal).

Every truncation is charged as an upper bound:

* Monotonicity in c. (P_{c+1}, Q_{c+1}) is (P_c, Q_c) with one more clone added to either
  coordinate with probability 1/2, the same Markov kernel for both; by data processing M_c(a)
  and the hockey-stick divergence are non-increasing in c. So values of c are grouped in bins
  and each bin is charged the divergence of its smallest c.
* C outside the window: the lower tail [0, c_lo) is charged at c = 0 (the largest divergence,
  that of Bernoulli(w) vs Bernoulli(1 - w)); the upper tail joins the last bin. Tail masses are
  bounded explicitly with the geometric-ratio bound of the binomial pmf, never as ``1 - sum``.
* K outside its window (only for large c): below the window the likelihood ratio is < 1 and the
  mass is bounded by Hoeffding, P(K - (c+1)/2 <= -s) <= exp(-2 s^2 / (c + 1)); above it the
  privacy loss is bounded by its chord (it is convex there) and the moment by a Chernoff bound
  (``_log_upper_k_tail``); for the hockey-stick the whole upper-tail P-mass is charged.

All sums are log-sum-exp in float64; probabilities come from log-gamma.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import gammaln, logsumexp

from fedhh.privacy._checks import check_devices, check_eps

FMT21 = "fmt21"
FMT23 = "fmt23"

# Relative width of the c-bins near the mean (charging a bin at its smallest c overstates the
# per-bin divergence by at most this relative amount, as the divergence scales like 1/c) and
# away from it (negligible mass).
BIN_NEAR = 0.005
BIN_FAR = 0.05
# Tail budget: truncated mass times its charge is below exp(-TAIL_MARGIN) for the largest order.
TAIL_MARGIN = 40.0
FULL_K_LIMIT = 600  # below this c every k is summed, no K-window


def clone_probability(eps0: float, variant: str) -> float:
    """p of the reduction: e^{-eps0} (FMT21 Section 3) or 2 / (e^eps0 + 1) (FMT23 Lemma 3.5)."""
    if variant == FMT21:
        return math.exp(-eps0)
    if variant == FMT23:
        return 2.0 / (math.exp(eps0) + 1.0)
    raise ValueError(f"unknown clone variant {variant!r}")


def _log_binom_pmf(k: np.ndarray, n: int, p: float) -> np.ndarray:
    k = np.asarray(k, dtype=float)
    return (
        gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)
        + k * math.log(p) + (n - k) * math.log1p(-p)
    )  # fmt: skip


def _log_lower_tail(k0: int, n: int, p: float) -> float:
    """Upper bound on log P(C <= k0) for k0 below the mode: pmf(k0) / (1 - r)."""
    if k0 < 0:
        return -math.inf
    r = k0 * (1.0 - p) / ((n - k0 + 1.0) * p)
    if r >= 1.0:
        return 0.0
    return float(_log_binom_pmf(np.array([k0]), n, p)[0]) - math.log1p(-r)


def _log_upper_tail(k1: int, n: int, p: float) -> float:
    """Upper bound on log P(C >= k1) for k1 above the mode: pmf(k1) / (1 - r)."""
    if k1 > n:
        return -math.inf
    r = (n - k1) * p / ((k1 + 1.0) * (1.0 - p))
    if r >= 1.0:
        return 0.0
    return float(_log_binom_pmf(np.array([k1]), n, p)[0]) - math.log1p(-r)


@dataclass(frozen=True)
class _Slice:
    """One charged value of c: its log weight and the privacy-loss distribution of (P_c, Q_c)."""

    log_weight: float
    m: int  # c + 1: K ~ Binomial(m, 1/2) under H
    log_p: np.ndarray  # log P_c(k) over the K-window
    log_q: np.ndarray  # log Q_c(k) over the K-window
    loss: np.ndarray  # log(P_c / Q_c)(k), increasing in k
    s_tail: float  # distance from m/2 to the first excluded k on either side; inf if none


class CloneReduction:
    """Divergences of the (P, Q) pair for given eps0, n and clone variant (upper bounds).

    ``max_order`` sizes the truncation windows: results for orders above it remain valid upper
    bounds but may be loose.
    """

    def __init__(self, eps0: float, n: int, variant: str = FMT21, max_order: float = 256.0):
        self.eps0 = check_eps("eps_local", eps0)
        self.n = check_devices(n)
        self.variant = variant
        self.p = clone_probability(self.eps0, variant)
        self.w = math.exp(self.eps0) / (math.exp(self.eps0) + 1.0)
        self.max_order = float(max_order)
        self._build()

    # ---- construction -------------------------------------------------------------------
    def _budget(self) -> float:
        """Log-mass below which truncated pieces are negligible even at ``max_order``."""
        return (self.max_order - 1.0) * self.eps0 + TAIL_MARGIN

    def _bin_starts(self) -> tuple[list[int], float, float]:
        """Bin starts over the c-window and log masses of the tails outside it.

        Three regions: fine bins (relative width BIN_NEAR) within 8 standard deviations of the
        mean, coarse bins (BIN_FAR) outside, never stepping over the fine region.
        """
        big_n, p = self.n - 1, self.p
        mu = big_n * p
        sigma = math.sqrt(max(mu * (1.0 - p), 1e-300))
        t = math.sqrt(2.0 * self._budget())
        c_lo = max(0, math.floor(mu - t * sigma - 1))
        c_hi = min(big_n, math.ceil(mu + t * sigma + 1))
        if big_n <= FULL_K_LIMIT:
            c_lo, c_hi = 0, big_n
        near_lo = max(c_lo, math.floor(mu - 8.0 * sigma))
        near_hi = min(c_hi, math.ceil(mu + 8.0 * sigma))
        starts: list[int] = []
        c = c_lo
        while c <= c_hi:
            starts.append(c)
            if near_lo <= c <= near_hi:
                step = max(1, int(BIN_NEAR * c))
            else:
                step = max(1, int(BIN_FAR * c))
                if c < near_lo:
                    step = min(step, near_lo - c)
            c += step
        log_low = _log_lower_tail(c_lo - 1, big_n, p) if c_lo > 0 else -math.inf
        log_high = _log_upper_tail(c_hi + 1, big_n, p) if c_hi < big_n else -math.inf
        return [*starts, c_hi + 1], log_low, log_high

    def _k_halfwidth(self, m: int) -> float:
        """Half-width s of the K-window: the upper tail bound at ``max_order`` is negligible.

        Solves ``2 s^2 - 2 B s - m L >= 0`` with ``B = (max_order - 1) eps0`` (see
        ``_log_upper_k_tail``) and ``L = TAIL_MARGIN``.
        """
        b = (self.max_order - 1.0) * self.eps0
        return 0.5 * (b + math.sqrt(b * b + 2.0 * m * TAIL_MARGIN))

    def _slice(self, c: int, log_weight: float) -> _Slice:
        w = self.w
        m = c + 1  # K ranges over 0..m
        half = 0.5 * m
        s_needed = self._k_halfwidth(m)
        if c <= FULL_K_LIMIT or s_needed >= half:
            k_lo, k_hi = 0, m
            s_tail = math.inf
        else:
            k_lo = max(0, math.floor(half - s_needed))
            k_hi = min(m, math.ceil(half + s_needed))
            s_tail = min(k_hi + 1 - half, half - (k_lo - 1))
        k = np.arange(k_lo, k_hi + 1, dtype=float)
        log_h = gammaln(m + 1.0) - gammaln(k + 1.0) - gammaln(m - k + 1.0) - m * math.log(2.0)
        u = k / m
        lg_p = np.log((1.0 - w) + (2.0 * w - 1.0) * u)
        lg_q = np.log((1.0 - w) + (2.0 * w - 1.0) * (1.0 - u))
        log_p = math.log(2.0) + log_h + lg_p
        log_q = math.log(2.0) + log_h + lg_q
        return _Slice(log_weight, m, log_p, log_q, lg_p - lg_q, s_tail)

    def _build(self) -> None:
        big_n, p = self.n - 1, self.p
        edges, log_low, log_high = self._bin_starts()
        c_first, c_last = edges[0], edges[-1] - 1
        cs = np.arange(c_first, c_last + 1)
        log_pmf = _log_binom_pmf(cs, big_n, p)
        starts = np.asarray(edges[:-1]) - c_first
        shift = float(np.max(log_pmf))
        mass = np.add.reduceat(np.exp(log_pmf - shift), starts)
        with np.errstate(divide="ignore"):
            log_mass = np.log(mass) + shift
        slices = []
        if log_low > -math.inf:
            slices.append(self._slice(0, log_low))
        for j, c0 in enumerate(edges[:-1]):
            lm = float(log_mass[j])
            if j == len(edges) - 2 and log_high > -math.inf:
                lm = float(np.logaddexp(lm, log_high))
            if lm == -math.inf:
                continue
            slices.append(self._slice(int(c0), lm))
        self.num_slices = len(slices)
        # Flat privacy-loss distribution: every (c-bin, k) point with its weighted masses.
        lw = np.concatenate([np.full(len(sl.loss), sl.log_weight) for sl in slices])
        self._loss = np.concatenate([sl.loss for sl in slices])
        self._log_pw = np.concatenate([sl.log_p for sl in slices]) + lw
        log_qw = np.concatenate([sl.log_q for sl in slices]) + lw
        # Per-slice tail data (only slices with a K-window).
        tails = [sl for sl in slices if math.isfinite(sl.s_tail)]
        self._tail_lw = np.array([sl.log_weight for sl in tails])
        self._tail_s = np.array([sl.s_tail for sl in tails])
        self._tail_m = np.array([float(sl.m) for sl in tails])
        # Hockey-stick: all upper-tail P-mass beyond the K-windows is charged (Hoeffding).
        self._delta_tail = float(
            np.sum(2.0 * self.w * np.exp(self._tail_lw - 2.0 * self._tail_s**2 / self._tail_m))
        )
        order = np.argsort(self._loss, kind="stable")
        loss_sorted = self._loss[order]
        pw = np.exp(self._log_pw[order])
        qw = np.exp(log_qw[order])
        self._hs_loss = loss_sorted
        self._hs_sp = np.append(np.cumsum(pw[::-1])[::-1], 0.0)  # sum over indices >= i
        self._hs_sq = np.append(np.cumsum(qw[::-1])[::-1], 0.0)
        self._at_break: np.ndarray | None = None

    # ---- Renyi divergence ---------------------------------------------------------------
    def _log_upper_k_tail(self, sl: _Slice, a: np.ndarray) -> np.ndarray:
        """Bound on log sum_{k beyond the window, upper side} P_c^a Q_c^{1-a}.

        On u >= 1/2 the privacy loss l(u) is convex with l(1/2) = 0 and l(1) = eps0, so
        l(u) <= 2 eps0 (u - 1/2) (the chord). With P_c <= 2 w H and K ~ Binomial(m, 1/2),
        a Chernoff bound with E exp(t (K - m/2)) <= exp(m t^2 / 8) gives, for
        beta = 2 (a - 1) eps0 / m and s the distance of the first excluded k from m/2,
        sum_{k >= m/2 + s} H(k) exp(beta (k - m/2)) <= exp(-2 s^2 / m + beta s) when
        4 s / m >= beta, and <= exp(m beta^2 / 8) otherwise.
        """
        s, m = sl.s_tail, sl.m
        beta = 2.0 * (a - 1.0) * self.eps0 / m
        chernoff = np.where(4.0 * s / m >= beta, -2.0 * s * s / m + beta * s, m * beta**2 / 8.0)
        return math.log(2.0 * self.w) + chernoff

    def log_moments(self, orders: np.ndarray) -> np.ndarray:
        """Upper bounds on log E_Q[(P/Q)^a] = (a - 1) D_a(P || Q), one per order a > 1."""
        a = np.asarray(orders, dtype=float)
        total = np.empty(a.shape)
        for i, order in enumerate(a):  # row by row: bounded memory, no temporaries
            row = self._loss * (order - 1.0)
            row += self._log_pw
            top = float(row.max())
            row -= top
            np.exp(row, out=row)
            total[i] = top + math.log(float(row.sum()))
        if self._tail_lw.size:
            s, m = self._tail_s[None, :], self._tail_m[None, :]
            beta = 2.0 * (a[:, None] - 1.0) * self.eps0 / m
            chernoff = np.where(4.0 * s / m >= beta, -2.0 * s * s / m + beta * s, m * beta**2 / 8.0)
            upper = math.log(2.0 * self.w) + chernoff  # see _log_upper_k_tail
            lower = np.broadcast_to(-2.0 * s * s / m, upper.shape)  # Hoeffding; ratio < 1
            tails = self._tail_lw[None, :] + np.logaddexp(upper, lower)
            total = np.logaddexp(total, logsumexp(tails, axis=1))
        return np.asarray(total)

    def rdp(self, orders: np.ndarray) -> np.ndarray:
        """Renyi divergence D_a(P || Q) per order (upper bound), clipped to [0, eps0]."""
        a = np.asarray(orders, dtype=float)
        values = self.log_moments(a) / (a - 1.0)
        return np.clip(values, 0.0, self.eps0)

    # ---- hockey-stick divergence --------------------------------------------------------
    def delta(self, eps: float) -> float:
        """Upper bound on sup_E P(E) - e^eps Q(E) (equal in both directions by symmetry).

        Sum of (P - e^eps Q) over the points with privacy loss above eps (exactly the positive
        part), plus the charged tails.
        """
        if eps >= self.eps0:
            return 0.0
        i = int(np.searchsorted(self._hs_loss, eps, side="right"))
        body = float(self._hs_sp[i] - math.exp(eps) * self._hs_sq[i])
        return min(1.0, max(body, 0.0) + self._delta_tail)

    def _breakpoint_deltas(self) -> np.ndarray:
        """delta(eps) at each eps = privacy-loss value (points strictly above it), cached."""
        if self._at_break is None:
            loss = self._hs_loss
            idx_above = np.searchsorted(loss, loss, side="right")
            self._at_break = (
                self._delta_tail + self._hs_sp[idx_above] - np.exp(loss) * self._hs_sq[idx_above]
            )
        return self._at_break

    def epsilon(self, delta: float) -> float:
        """Smallest eps with delta(eps) <= delta (exact on the piecewise form, rounded up).

        Between consecutive privacy-loss values delta(eps) = tail + SP_i - e^eps SQ_i, so the
        crossing is solved in closed form on the first segment where delta falls below target.
        """
        loss, sp, sq, tail = self._hs_loss, self._hs_sp, self._hs_sq, self._delta_tail
        if delta <= tail:
            return self.eps0
        at_break = self._breakpoint_deltas()
        # at_break is non-increasing: first index where it is <= delta
        ok = np.nonzero(at_break <= delta)[0]
        if ok.size == 0:
            return self.eps0
        j = int(ok[0])
        lo_eps = float(loss[j - 1]) if j > 0 else -math.inf
        i = int(np.searchsorted(loss, lo_eps, side="right")) if j > 0 else 0
        num = tail + float(sp[i]) - delta
        eps = lo_eps if num <= 0 or sq[i] <= 0 else math.log(num / float(sq[i]))
        eps = min(max(eps, lo_eps), float(loss[j]))
        return float(min(self.eps0, max(0.0, eps) + 1e-12))


@lru_cache(maxsize=512)
def reduction(eps0: float, n: int, variant: str, max_order: float = 256.0) -> CloneReduction:
    """Cached ``CloneReduction`` (solves, tables and the ledger revisit the same points)."""
    return CloneReduction(eps0, n, variant, max_order)
