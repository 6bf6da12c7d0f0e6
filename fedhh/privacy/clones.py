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

Floating point is charged too (``weight_error``). A point's log-weight (bin mass of C, then
the binomial H(k)) is a difference of log-gamma values of size ~ n log n, so in float64 it is
off by up to ~ 2^-52 n log n absolutely (at n = 10^9 about 1e-5), far more than the divergences
themselves (~ 1/n). P and Q share that weight at every point, so every computed sum of
P^a Q^(1-a) or of (P - e^eps Q)_+ is within a factor e^r, r = ``weight_error``, of the exact one:
the log-moments are raised by r and the hockey-stick masses multiplied by e^r. (Uncharged,
n = 10^9 at eps0 = 2 gave an RDP curve of exact zeros, i.e. a claimed aggregate epsilon of 0.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

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


# Relative accuracy assumed of each log-gamma, logarithm and product (16 ulps: scipy's gammaln
# is accurate to a few ulps), and of each float64 addition.
TERM_ERROR = 2.0**-48
SUM_ERROR = 2.0**-52


def weight_error(n: int, log_p: float, log_q: float, points: int) -> float:
    """Bound r on the absolute error of every computed log-weight and log-sum (module docstring).

    A log-weight is the sum of a C-bin's log mass (``_log_binom_pmf`` over at most n trials:
    three log-gammas of at most gammaln(n + 1) and k |log p| + (n - k) |log q|) and the log of
    H(k) (three log-gammas and m log 2, m <= n + 1); each term is computed to TERM_ERROR
    relative, so the error is at most TERM_ERROR times the sum of their magnitudes (1 added for
    the small ones). Summing ``points`` positive masses adds at most points * SUM_ERROR relative.
    """
    big = math.lgamma(n + 2.0)
    magnitude = 6.0 * big + (n + 1.0) * (abs(log_p) + abs(log_q) + math.log(2.0)) + 16.0
    return TERM_ERROR * magnitude + SUM_ERROR * (points + 16.0)


def clone_log_probabilities(eps0: float, variant: str) -> tuple[float, float]:
    """(log p, log(1 - p)) for the clone probability p = e^{-eps0} (FMT21 Section 3) or
    2 / (e^eps0 + 1) (FMT23 Lemma 3.5).

    Both come from forms accurate at every eps0 > 0. FMT21: 1 - p = -expm1(-eps0). FMT23:
    e^eps0 + 1 = 2 e^{eps0/2} cosh(eps0/2), so log p = -eps0/2 - log cosh(eps0/2) and
    1 - p = (1 - e^-eps0) e^{eps0/2} / (2 cosh(eps0/2)). Formed in floating point, 1 - p is 0
    once p rounds to 1 (eps0 below ~1.1e-16), and its log fails; log 2 - log(e^eps0 + 1)
    cancels to 0 there."""
    log_q21 = math.log(-math.expm1(-eps0))
    if variant == FMT21:
        return -eps0, log_q21
    if variant == FMT23:
        log_cosh = math.log(math.cosh(0.5 * eps0))
        return -0.5 * eps0 - log_cosh, log_q21 + 0.5 * eps0 - math.log(2.0) - log_cosh
    raise ValueError(f"unknown clone variant {variant!r}")


def _log_binom_pmf(k: np.ndarray, n: int, log_p: float, log_q: float) -> np.ndarray:
    """log Binomial(n, p) pmf at k, from log p and log q = log(1 - p)."""
    # (scipy.special on first use, here and below: a selector imports the ledger's modules and
    # computes no bound; the import took longer than the rest of its start-up.)
    from scipy.special import gammaln

    k = np.asarray(k, dtype=float)
    return (
        gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)
        + k * log_p + (n - k) * log_q
    )  # fmt: skip


def _log_geometric_tail(log_pmf: float, log_r: float) -> float:
    """log(pmf / (1 - r)), r = e^log_r: the tail from a point on, when each further pmf value
    is at most r times the previous one; 0 (the trivial P <= 1) when r >= 1.

    r is kept as a log: with eps0 ~ 1e-300 the binomial's odds p / (1 - p) exceed a double."""
    if log_r >= 0.0:
        return 0.0
    return log_pmf - math.log(-math.expm1(log_r))


def _log_lower_tail(k0: int, n: int, log_p: float, log_q: float) -> float:
    """Upper bound on log P(C <= k0) for k0 below the mode, C ~ Binomial(n, p): below the mode
    pmf(k - 1) / pmf(k) = k (1 - p) / ((n - k + 1) p) falls as k falls, at most its value r at
    k0."""
    if k0 < 0:
        return -math.inf
    log_r = math.log(k0) - math.log(n - k0 + 1.0) + log_q - log_p if k0 > 0 else -math.inf
    return _log_geometric_tail(float(_log_binom_pmf(np.array([k0]), n, log_p, log_q)[0]), log_r)


def _log_upper_tail(k1: int, n: int, log_p: float, log_q: float) -> float:
    """Upper bound on log P(C >= k1) for k1 above the mode, C ~ Binomial(n, p): above the mode
    pmf(k + 1) / pmf(k) = (n - k) p / ((k + 1) (1 - p)) falls as k grows, at most its value r
    at k1."""
    if k1 > n:
        return -math.inf
    log_r = math.log(n - k1) - math.log(k1 + 1.0) + log_p - log_q if k1 < n else -math.inf
    return _log_geometric_tail(float(_log_binom_pmf(np.array([k1]), n, log_p, log_q)[0]), log_r)


@dataclass(frozen=True)
class _Slice:
    """One charged slice: its log weight and the privacy-loss distribution of its pair.

    The pair is ``P(k) = H(k) (1 - pi + 2 pi g(k/m))``, ``Q(k) = H(k) (1 - pi + 2 pi g(1 - k/m))``
    with H = Binomial(m, 1/2): the clones' pair (P_c, Q_c), m = c + 1, when pi = 1, and with
    Poisson sampling the pair given the number of clones (see ``CloneReduction``).
    """

    log_weight: float
    m: int  # K ~ Binomial(m, 1/2) under H
    log_p: np.ndarray  # log P(k) over the K-window
    log_q: np.ndarray  # log Q(k) over the K-window
    loss: np.ndarray  # log(P / Q)(k), increasing in k
    s_tail: float  # distance from m/2 to the first excluded k on either side; inf if none


class CloneReduction:
    """Divergences of the (P, Q) pair for given eps0, n and clone variant (upper bounds).

    ``max_order`` sizes the truncation windows: results for orders above it remain valid upper
    bounds but may be loose.

    Poisson sampling (``participants`` = m < n, the count observed in the round, which does not
    depend on the data). Given m, the participants are a uniform m-subset of the n devices and
    the target is among them with probability eta = m / n. Running the clone decomposition on
    the participants: with T the number of participants that are clones or the target,
    T ~ Binomial(m, p) when the target is absent (and then K | T ~ Binomial(T, 1/2) on both
    sides), T - 1 ~ Binomial(m - 1, p) and K | T ~ P_{T-1} / Q_{T-1} when it is present. The
    shuffled output is the same post-processing of (T, K) in both cases (the m - T other
    participants are a uniform subset of the other devices either way), so it is bounded by

        P'(t, k) = (1 - eta) B_m(t) H_t(k) + eta B_{m-1}(t - 1) P_{t-1}(k)
                 = W_t H_t(k) (1 - pi_t + 2 pi_t g(k / t)),   Q' mirrored,

    with W_t = (1 - eta) B_m(t) + eta B_{m-1}(t - 1) and pi_t = eta B_{m-1}(t-1) / W_t
    (= x / (1 - eta + x), x = t / (n p)), increasing in t. Binning in t is valid because the
    slice at t is the slice at t0 <= t plus t - t0 fair coins (post-processing) and a larger
    pi only mixes in less of the common part H (joint convexity): a bin [t0, t1) is charged
    the slice (t0, pi_{t1-1}). With m = n this is the unsampled reduction.
    """

    def __init__(self, eps0: float, n: int, variant: str = FMT21, max_order: float = 256.0,
                 participants: int | None = None):
        self.eps0 = check_eps(eps0, "eps_local")
        self.n = check_devices(n)
        self.participants = self.n if participants is None else check_devices(
            participants, "participants")
        if self.participants > self.n:
            raise ValueError(
                f"participants must be at most n={self.n}, got {self.participants}")
        self.variant = variant
        self.log_p, self.log_q = clone_log_probabilities(self.eps0, variant)
        self.w = math.exp(self.eps0) / (math.exp(self.eps0) + 1.0)
        # 1 - w in its own right: as a difference it is 0 in floating point above eps0 ~ 37,
        # where the least likely outcome would then get probability 0 (and a divergence inf)
        self.w_bar = 1.0 / (math.exp(self.eps0) + 1.0)
        self.max_order = float(max_order)
        self._build()

    # ---- construction -------------------------------------------------------------------
    def _budget(self) -> float:
        """Log-mass below which truncated pieces are negligible even at ``max_order``."""
        return (self.max_order - 1.0) * self.eps0 + TAIL_MARGIN

    def _bin_edges(self, trials: int) -> tuple[list[int], int, int]:
        """Bin starts over the window of Binomial(trials, p) (and the window's ends).

        Bins have relative width BIN_NEAR up to 8 standard deviations above the mean and
        BIN_FAR beyond: the divergence of a slice falls like 1/c, so a bin charged at its
        smallest c overstates it by about its relative width, which matters below the mean
        (large divergences, weighted heavily at high orders) and not above it.
        """
        logs = self.log_p, self.log_q
        mu = trials * math.exp(self.log_p)
        sigma = math.sqrt(max(mu * math.exp(self.log_q), 1e-300))
        t = math.sqrt(2.0 * self._budget())
        c_lo = max(0, math.floor(mu - t * sigma - 1))
        c_hi = min(trials, math.ceil(mu + t * sigma + 1))
        if trials <= FULL_K_LIMIT:
            c_lo, c_hi = 0, trials
        # The upper tail of a binomial with a small mean is heavier than the Gaussian's.
        while c_hi < trials and _log_upper_tail(c_hi + 1, trials, *logs) > -self._budget():
            c_hi = min(trials, c_hi + max(1, c_hi // 4))
        near_hi = min(c_hi, math.ceil(mu + 8.0 * sigma))
        starts: list[int] = []
        c = c_lo
        while c <= c_hi:
            starts.append(c)
            width = BIN_NEAR if c <= near_hi else BIN_FAR
            c += max(1, int(width * c))
        return [*starts, c_hi + 1], c_lo, c_hi

    def _k_halfwidth(self, m: int) -> float:
        """Half-width s of the K-window: the upper tail bound at ``max_order`` is negligible.

        Solves ``2 s^2 - 2 B s - m L >= 0`` with ``B = (max_order - 1) eps0`` (see
        ``_log_upper_k_tail``) and ``L = TAIL_MARGIN``.
        """
        b = (self.max_order - 1.0) * self.eps0
        return 0.5 * (b + math.sqrt(b * b + 2.0 * m * TAIL_MARGIN))

    def _slice(self, m: int, log_weight: float, pi: float = 1.0) -> _Slice:
        w, w_bar = self.w, self.w_bar
        half = 0.5 * m
        s_needed = self._k_halfwidth(m)
        if m <= FULL_K_LIMIT + 1 or s_needed >= half:
            k_lo, k_hi = 0, m
            s_tail = math.inf
        else:
            k_lo = max(0, math.floor(half - s_needed))
            k_hi = min(m, math.ceil(half + s_needed))
            s_tail = min(k_hi + 1 - half, half - (k_lo - 1))
        k = np.arange(k_lo, k_hi + 1, dtype=float)
        from scipy.special import gammaln

        log_h = gammaln(m + 1.0) - gammaln(k + 1.0) - gammaln(m - k + 1.0) - m * math.log(2.0)
        u = k / m
        if pi == 1.0:
            lg_p = math.log(2.0) + np.log(w_bar + (2.0 * w - 1.0) * u)
            lg_q = math.log(2.0) + np.log(w_bar + (2.0 * w - 1.0) * (1.0 - u))
        else:
            lg_p = np.log((1.0 - pi) + 2.0 * pi * (w_bar + (2.0 * w - 1.0) * u))
            lg_q = np.log((1.0 - pi) + 2.0 * pi * (w_bar + (2.0 * w - 1.0) * (1.0 - u)))
        return _Slice(log_weight, m, log_h + lg_p, log_h + lg_q, lg_p - lg_q, s_tail)

    @staticmethod
    def _bin_masses(log_pmf: np.ndarray, edges: list[int]) -> np.ndarray:
        """log of the summed mass of each bin (edges relative to the first)."""
        starts = np.asarray(edges[:-1]) - edges[0]
        shift = float(np.max(log_pmf))
        mass = np.add.reduceat(np.exp(log_pmf - shift), starts)
        with np.errstate(divide="ignore"):
            return np.log(mass) + shift

    def _unsampled_slices(self) -> list[_Slice]:
        """C ~ Binomial(n - 1, p); bins charged at their smallest c (monotone in c)."""
        big_n, logs = self.n - 1, (self.log_p, self.log_q)
        edges, c_lo, c_hi = self._bin_edges(big_n)
        log_low = _log_lower_tail(c_lo - 1, big_n, *logs) if c_lo > 0 else -math.inf
        log_high = _log_upper_tail(c_hi + 1, big_n, *logs) if c_hi < big_n else -math.inf
        log_mass = self._bin_masses(
            _log_binom_pmf(np.arange(c_lo, c_hi + 1), big_n, *logs), edges)
        slices = []
        if log_low > -math.inf:
            slices.append(self._slice(1, log_low))  # charged at c = 0, the largest divergence
        for j, c0 in enumerate(edges[:-1]):
            lm = float(log_mass[j])
            if j == len(edges) - 2 and log_high > -math.inf:
                lm = float(np.logaddexp(lm, log_high))
            if lm > -math.inf:
                slices.append(self._slice(int(c0) + 1, lm))
        return slices

    def _sampled_slices(self) -> list[_Slice]:
        """T over the participants (see the class docstring).

        Below the window T is charged at the largest divergence (c = 0); above it at the
        window's end with pi = 1 (heavier than Gaussian there when the mean is small).
        """
        m, logs = self.participants, (self.log_p, self.log_q)
        eta = m / self.n
        edges, t_lo, t_hi = self._bin_edges(m)
        t = np.arange(t_lo, t_hi + 1)
        absent = np.log1p(-eta) + _log_binom_pmf(t, m, *logs)
        present = np.full(t.shape, -np.inf)
        ok = t >= 1
        present[ok] = math.log(eta) + _log_binom_pmf(t[ok] - 1, m - 1, *logs)
        log_w = np.logaddexp(absent, present)
        log_pi = present - log_w  # non-decreasing in t
        log_low = -math.inf
        if t_lo > 0:
            log_low = float(np.logaddexp(
                math.log1p(-eta) + _log_lower_tail(t_lo - 1, m, *logs),
                math.log(eta) + _log_lower_tail(t_lo - 2, m - 1, *logs)))
        log_high = -math.inf
        if t_hi < m:
            log_high = float(np.logaddexp(
                math.log1p(-eta) + _log_upper_tail(t_hi + 1, m, *logs),
                math.log(eta) + _log_upper_tail(t_hi, m - 1, *logs)))
        log_mass = self._bin_masses(log_w, edges)
        slices = []
        if log_low > -math.inf:
            slices.append(self._slice(1, log_low))  # the largest divergence (c = 0, pi = 1)
        if log_high > -math.inf:
            # every t > t_hi: slice (t, pi_t) is dominated by (t_hi + 1, 1)
            slices.append(self._slice(t_hi + 1, log_high))
        for j, t0 in enumerate(edges[:-1]):
            lm = float(log_mass[j])
            if lm == -math.inf:
                continue
            last = edges[j + 1] - 1 - t_lo
            pi = min(1.0, math.exp(float(np.max(log_pi[: last + 1]))))
            slices.append(self._slice(max(1, int(t0)), lm, pi))
        return slices

    def _build(self) -> None:
        sampled = self.participants < self.n
        slices = self._sampled_slices() if sampled else self._unsampled_slices()
        self.num_slices = len(slices)
        # Flat privacy-loss distribution: every (bin, k) point with its weighted masses.
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
        # Floating-point charge (module docstring): every mass times e^r, every log-moment + r.
        self.weight_error = weight_error(self.n, self.log_p, self.log_q, len(self._loss))
        self._delta_tail *= math.exp(self.weight_error)
        order = np.argsort(self._loss, kind="stable")
        loss_sorted = self._loss[order]
        pw = np.exp(self._log_pw[order] + self.weight_error)
        qw = np.exp(log_qw[order] + self.weight_error)
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
            from scipy.special import logsumexp

            total = np.logaddexp(total, logsumexp(tails, axis=1))
        return np.asarray(total) + self.weight_error

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
def reduction(eps0: float, n: int, variant: str, max_order: float = 256.0,
              participants: int | None = None) -> CloneReduction:
    """Cached ``CloneReduction`` (solves, tables and the ledger revisit the same points)."""
    return CloneReduction(eps0, n, variant, max_order, participants)
