"""The exact privacy of what a round releases: per-coordinate sums of one-hot + asymmetric RR.

The coordinator never sees a report, only each round's per-coordinate sums over the n
contributors (secure aggregation). Every report coordinate is an independent coin: 1 with
probability a1 = 1/2 at the device's element, a0 = 1/(e^eps + 1) elsewhere (the implemented
dyadic rationals of ``fedhh.device.randomizer``). So the sum at coordinate j is
``Bin(f_j, a1) + Bin(n - f_j, a0)`` (f_j = number of contributors holding j), independently
across coordinates.

Replacement neighbours (device 1 holds v instead of w) change two coordinates: at v the sum is
``U = N_v + Bern(a1)`` against ``V = N_v + Bern(a0)``, at w the mirror ``(V, U)`` with its own
N_w, where ``N = Bin(f, 1/2) + Bin(n - 1 - f, a0)`` is the other devices' part. The coordinates
are independent (disjoint coins), so the round's pair is the product of the two coordinate
pairs and its privacy loss the sum of two independent losses; "v against nothing" changes one
coordinate (a marginal of the product, hence dominated by it).

The worst case over the other devices' data is taken, not assumed: f = 0 is *not* the worst
case for every (eps, delta) (at n = 2, f = 1 has the larger hockey-stick divergence near
eps_local - ln 2; see docs/privacy.md), so each coordinate is charged a pair that dominates the
whole family f = 0..n-1:

* holders are grouped in blocks [f0, f1); for f in the block, N_f is
  ``Bin(f0, 1/2) + Bin(n - f1, a0)`` plus an independent remainder, and adding independent
  noise to the count is a post-processing applied to both hypotheses, so the block's pair
  dominates every f in it. Blocks are {0}, then 25% wide, up to ``cap = 16 (n-1) a0 + 64``;
  every f >= cap is dominated by ``Bin(cap, 1/2)`` alone;
* the hockey-stick curves delta(eps) of the blocks (both directions) are maximised pointwise on
  a grid of eps ("dots"), and connect-the-dots (``dots``; Doroshenko, Ghazi, Kamath, Kumar,
  Manurangsi 2022, Algorithm 1) turns the maxima into a privacy loss distribution. The
  pointwise maximum of privacy profiles is the profile of a pair (the convex hull of the
  minimum of the trade-off functions), it is convex in e^eps, so linear interpolation in e^eps
  between the dots -- the connect-the-dots PLD -- dominates it everywhere.

Numerical charges, all counted as delta or as a margin, never dropped:

* each binomial is kept on a window whose excluded mass is bounded by the geometric-ratio bound
  of its pmf (never as 1 - sum); the excluded mass tau of a block joins delta
  (joint convexity: delta <= delta_kept + tau);
* floating point: pmfs come from scipy's binomial pmf (Boost, relative error <= 1e-12,
  tested); with r = ``float_margin(k)`` bounding the relative error of every value and partial
  sum, ``profile_bound`` bounds the true curve from above in two ways (suffix and prefix sums)
  and keeps the smaller, so the rounding of sums close to 1 is never amplified;
* the dots stop after the first whose value is <= ``DELTA_FLOOR``: the rest of the distribution
  goes to +infinity, i.e. counts fully in delta.

Rounds compose adaptively (Zhu, Dong, Wang 2022, Theorem 10: the product of dominating pairs
dominates the adaptive composition) with each round charged at its real contributor count.

A retried round re-sends the same report (a device answers every attempt of a round with the
same report), so its sums are no fresh rounds: the same coins seen through two sums leak more
than two independent rounds at some (eps, delta) (at n = 10, eps_local = 6, one coordinate:
delta 0.47 against 0.26 at eps 2.35). What every attempt of a round releases is a function of
the device's one report and of the other devices' coins, which do not depend on its data: a
post-processing of the report. ``report_pld`` is the exact pair of that report alone, the
charge of a round with several charged attempts (``fedhh.privacy.ledger``); in the counts of
``composed_pld`` it is the count ``REPORT`` = 1.

Poisson sampling: conditioned on the number m of participants (independent of the data) the
participants are a uniform m-subset of the N devices, the round is f-DP on them with f the
trade-off function of the round pair at m, and sampling m of N without replacement gives
``C_p(f) = min(f_p, f_p^-1)**`` with p = m/N, f_p = p f + (1 - p) Id (Dong, Roth, Su 2022,
"Gaussian differential privacy", Theorem 4.2). Its profile is the maximum of the hockey-stick
curves of (pA + (1-p)B, B) and (B, pA + (1-p)B), computed from the round's PLD and turned into
a symmetric PLD by connect-the-dots again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from fedhh.device.randomizer import A1_THRESHOLD, SCALE, a0_threshold
from fedhh.privacy import dots
from fedhh.privacy._checks import check_delta, check_devices, check_eps
from fedhh.privacy.composition import sum_up
from fedhh.privacy.randomizer_class import at_most_exp

if TYPE_CHECKING:
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

DISCRETIZATION = 5e-4  # dp-accounting's value_discretization_interval (nats)
TAIL_MASS = 1e-30  # excluded binomial mass per block, charged as delta
FLOAT_MARGIN = 1e-11  # bound on every relative floating-point error of U, V (<= 1e-12, tested)
COMPOSE_TRUNCATION = 1e-15  # dp-accounting moves truncated tail mass to +infinity (pessimistic)
DELTA_FLOOR = 1e-20  # dots stop where the profile falls below this; the rest goes to +infinity
SAMPLED_MARGIN = 1e-10  # relative rounding of dp-accounting's delta sums (<= 1e5 masses)
BLOCK_GROWTH = 0.25  # relative width of the holder blocks after f = 0
HOLDER_CAP_SCALE = 16.0  # f >= 16 (n-1) a0 + 64 holders: charged by Bin(cap, 1/2) alone
HOLDER_CAP_EXTRA = 64
WINDOW_Z = 14.0  # first try for a binomial window: mean +- 14 standard deviations
# Above this expected count of set coins among the others, (n - 1) a0, a round is accounted as
# if it had only 1 + LAMBDA_MAX / a0 contributors: fewer contributors are a valid (dominating)
# charge, and the pmfs stay short (only small eps_local with many devices gets there).
LAMBDA_MAX = 50_000.0
# The count that stands for one device's report released alone (module docstring): never a
# sum, never sampled.
REPORT = 1



def import_accountant_libraries() -> None:
    """Import now what this module imports on first use (dp_accounting's PLD modules, scipy's
    special functions and distributions). A command imports them only if it accounts; a
    long-lived service calls this at start, so its first round does not pay about a second
    of imports (measured inside the round, it was ~1 ms per device of a 1,000-device round's
    coordinator CPU)."""
    import dp_accounting.pld.pld_pmf
    import dp_accounting.pld.privacy_loss_distribution  # noqa: F401
    import scipy.special
    import scipy.stats  # noqa: F401

@dataclass(frozen=True)
class Rates:
    """The implemented coin probabilities: a1 at the device's element, a0 elsewhere."""

    a1: float
    a0: float

    @property
    def max_loss(self) -> float:
        """log(a1 / a0): the largest privacy loss of one coordinate (all coins set)."""
        return math.log(self.a1 / self.a0)

    @property
    def min_loss(self) -> float:
        """log((1 - a1) / (1 - a0)): the smallest one (all coins clear)."""
        return math.log((1.0 - self.a1) / (1.0 - self.a0))

    @property
    def effective_epsilon(self) -> float:
        """Largest privacy loss of a round (both coordinates): the randomizer's own epsilon,
        log((a1 / a0) (1 - a0) / (1 - a1)), rounded up (``log_up``)."""
        return log_up(self.a1, self.a0)


@lru_cache(maxsize=256)
def log_up(a1: float, a0: float) -> float:
    """The smallest double L found with (a1 / a0) (1 - a0) / (1 - a1) <= e^L, decided exactly.

    The ratio of the coins is a rational (a0, a1 are dyadic); ``at_most_exp`` compares it with
    e^L exactly (Hermite-Lindemann; an undecided case reads False and moves L up). The float
    difference of the two logs, used before, fell below the true log in about 60% of epsilons
    (by a few ulps), and as the basic-composition cap of ``sum_epsilon`` the reported epsilon
    could then be below what the coins guarantee. A ratio of at most 1 (a0 = a1) gives 0."""
    ratio = (Fraction(a1) / Fraction(a0)) * ((1 - Fraction(a0)) / (1 - Fraction(a1)))
    if ratio <= 1:
        return 0.0
    value = math.log1p(float(ratio - 1))  # (ratio - 1 exact: within an ulp or two near 1)
    while not at_most_exp(ratio, value):
        value = math.nextafter(value, math.inf)
    return value


def rates(eps_local: float) -> Rates:
    """a1 = 1/2 and a0 = ceil(2^32 / (e^eps + 1)) / 2^32, exactly as ``fedhh.device.randomizer``."""
    return Rates(A1_THRESHOLD / SCALE, a0_threshold(check_eps(eps_local, "eps_local")) / SCALE)


# ---- the other devices' count --------------------------------------------------------------
def _log_pmf_bound(k: int, n: int, p: float) -> float:
    """log Bin(n, p)(k) rounded up (by more than the rounding of the log-gamma difference)."""
    from scipy.special import gammaln

    big = float(gammaln(n + 1.0))
    value = (big - gammaln(k + 1.0) - gammaln(n - k + 1.0)
             + k * math.log(p) + (n - k) * math.log1p(-p))  # fmt: skip
    return float(value) + 1e-6 + 1e-14 * big  # covers the cancellation of the large terms


def _lower_tail(j: int, n: int, p: float) -> float:
    """Upper bound on P(X <= j) for j below the mode: pmf(j) / (1 - r), r = pmf(j-1)/pmf(j)."""
    if j < 0:
        return 0.0
    r = j * (1.0 - p) / ((n - j + 1.0) * p)
    if r >= 1.0:
        return 1.0
    return math.exp(_log_pmf_bound(j, n, p)) / (1.0 - r)


def _upper_tail(j: int, n: int, p: float) -> float:
    """Upper bound on P(X >= j) for j above the mode: pmf(j) / (1 - r), r = pmf(j+1)/pmf(j)."""
    if j > n:
        return 0.0
    r = (n - j) * p / ((j + 1.0) * (1.0 - p))
    if r >= 1.0:
        return 1.0
    return math.exp(_log_pmf_bound(j, n, p)) / (1.0 - r)


def binomial_window(n: int, p: float, tail: float) -> tuple[int, np.ndarray, float]:
    """Bin(n, p) on a window [lo, lo + len): (lo, pmf, bound on the mass outside, <= tail).

    The window starts at mean +- 14 standard deviations and widens until the geometric-ratio
    bounds of both tails are below tail / 2.
    """
    if n == 0:
        return 0, np.ones(1), 0.0
    from scipy.stats import binom

    mean, sd = n * p, math.sqrt(n * p * (1.0 - p))
    half = WINDOW_Z * sd + 2.0
    lo, hi = max(0, math.floor(mean - half)), min(n, math.ceil(mean + half))
    for _ in range(64):
        low = _lower_tail(lo - 1, n, p) if lo > 0 else 0.0
        high = _upper_tail(hi + 1, n, p) if hi < n else 0.0
        if low <= tail / 2 and high <= tail / 2:
            break
        if low > tail / 2:
            lo = max(0, lo - max(1, (math.ceil(mean) - lo) // 2 + 1))
        if high > tail / 2:
            hi = min(n, hi + max(1, (hi - math.floor(mean)) // 2 + 1))
    else:  # the window grows by half each time: 64 steps reach both ends for any n
        raise RuntimeError(f"no binomial window for n={n}, p={p}")
    pmf = binom.pmf(np.arange(lo, hi + 1), n, p)
    return lo, np.asarray(pmf, dtype=float), low + high


def holder_blocks(n: int, a0: float) -> list[tuple[int, int]]:
    """(fair, biased) coin counts whose pairs together dominate every f = 0..n-1 holders.

    Block [f0, f1) is charged ``N = Bin(f0, 1/2) + Bin(n - f1, a0)``; the last block, every
    f >= cap, ``Bin(cap, 1/2)`` (exact when cap = n - 1).
    """
    cap = min(n - 1, math.ceil(HOLDER_CAP_SCALE * (n - 1) * a0) + HOLDER_CAP_EXTRA)
    blocks = [(0, n - 1)]
    f0 = 1
    while f0 < cap:
        f1 = min(cap, f0 + max(1, math.floor(f0 * BLOCK_GROWTH)))
        blocks.append((f0, n - f1))
        f0 = f1
    blocks.append((cap, 0))
    return blocks


def count_pmf(fair: int, biased: int, a0: float) -> tuple[int, np.ndarray, float]:
    """``Bin(fair, 1/2) + Bin(biased, a0)`` on a window: (offset, pmf, excluded-mass bound)."""
    lo_f, pmf_f, tail_f = binomial_window(fair, 0.5, TAIL_MASS / 2)
    lo_b, pmf_b, tail_b = binomial_window(biased, a0, TAIL_MASS / 2)
    return lo_f + lo_b, np.convolve(pmf_f, pmf_b), tail_f + tail_b


def coordinate_pair(count: np.ndarray, r: Rates) -> tuple[np.ndarray, np.ndarray]:
    """(U, V) over s = offset .. offset + len(count): U = N + Bern(a1), V = N + Bern(a0)."""
    shifted = np.concatenate([[0.0], count])  # N(s - 1)
    same = np.concatenate([count, [0.0]])  # N(s)
    return r.a1 * shifted + (1.0 - r.a1) * same, r.a0 * shifted + (1.0 - r.a0) * same


def profile_bound(upper: np.ndarray, lower: np.ndarray, eps: np.ndarray, rel: float,
                  tail: float) -> np.ndarray:
    """Upper bound on the profile of the true pair at each eps, from computed pmfs.

    ``upper``/``lower`` are the computed pmfs of two probability distributions on a window,
    each value and each partial sum within relative error ``rel`` of the truth, and ``tail``
    bounds each distribution's mass outside the window. With x = e^eps and
    rho = log((1 + rel) / (1 - rel)), the minimum of two bounds:

    * A = (1 + rel) SU - (1 - rel) x SL + tail, sums over the computed losses > eps - rho:
      delta = sum (u - x l)_+, and only those points can have u (1+rel) > x l (1-rel);
    * B = (1 - x) + (1 + rel) x PL - (1 - rel) PU + x tail, sums over losses < eps + rho:
      delta = (1 - x) + sum (x l - u)_+ since both distributions have mass 1.

    A is tight where delta is small, B where it is close to 1 - x (the rounding of a sum near
    1 is not amplified there).
    """
    keep = (upper > 0) & (lower > 0)  # both vanish together (N(s-1) = N(s) = 0) or neither
    upper, lower = upper[keep], lower[keep]
    loss = np.log(upper) - np.log(lower)
    order = np.argsort(loss, kind="stable")
    loss = loss[order]
    u, low = upper[order], lower[order]
    x = np.exp(eps)
    rho = math.log1p(rel) - math.log1p(-rel)
    # suffix sums from the largest loss down and prefix sums from the smallest: small first
    su = np.append(np.cumsum(u[::-1])[::-1], 0.0)
    sl = np.append(np.cumsum(low[::-1])[::-1], 0.0)
    pu = np.concatenate([[0.0], np.cumsum(u)])
    pl = np.concatenate([[0.0], np.cumsum(low)])
    above = np.searchsorted(loss, eps - rho, side="right")
    below = np.searchsorted(loss, eps + rho, side="left")
    a = (1.0 + rel) * su[above] - (1.0 - rel) * x * sl[above] + tail
    b = (1.0 - x) + (1.0 + rel) * x * pl[below] - (1.0 - rel) * pu[below] + x * tail
    return np.clip(np.minimum(a, b), 0.0, 1.0)


def float_margin(points: int) -> float:
    """Relative error bound for pmfs of ``points`` values and their partial sums:
    FLOAT_MARGIN (the pmfs) plus the rounding of a sum of that many positive terms."""
    return FLOAT_MARGIN + 2.0 * points * 2.0**-53


@dataclass(frozen=True)
class CoordinateProfile:
    """Pointwise maxima of the blocks' hockey-stick curves on the dots, both directions."""

    forward_dots: np.ndarray  # integer multiples of DISCRETIZATION
    forward: np.ndarray  # delta of (U || V): device holds v against w (or nothing)
    reverse_dots: np.ndarray
    reverse: np.ndarray  # delta of (V || U)
    blocks: int


def _loss_scale(n: int, r: Rates) -> float:
    """Rough standard deviation of one coordinate's privacy loss (sets the dot spacing)."""
    noise = max(1.0, (n - 1) * r.a0 * (1.0 - r.a0))
    return (r.a1 - r.a0) / math.sqrt(noise)


def accounted_contributors(eps_local: float, n: int) -> int:
    """The count a round of n contributors is accounted at: n, or fewer (``LAMBDA_MAX``)."""
    a0 = rates(eps_local).a0
    return min(check_devices(n, "contributors"), 1 + math.floor(LAMBDA_MAX / a0))


@lru_cache(maxsize=256)
def coordinate_profile(eps_local: float, n: int) -> CoordinateProfile:
    """Profiles of one coordinate dominating every data of the n - 1 other contributors.

    More contributors only add independent coins to the count, so the profiles at
    ``accounted_contributors`` (<= n) dominate those at n.
    """
    r = rates(eps_local)
    n = accounted_contributors(eps_local, n)
    step = min(1e-3, max(DISCRETIZATION, _loss_scale(n, r) / 64.0))
    fwd_dots = dots.grid(r.min_loss, r.max_loss, step, DISCRETIZATION)
    rev_dots = dots.grid(-r.max_loss, -r.min_loss, step, DISCRETIZATION)
    d = DISCRETIZATION
    forward = np.zeros(len(fwd_dots))
    reverse = np.zeros(len(rev_dots))
    blocks = holder_blocks(n, r.a0)
    for fair, biased in blocks:
        _, count, tail = count_pmf(fair, biased, r.a0)
        u, v = coordinate_pair(count, r)
        rel = float_margin(len(u))
        fwd = profile_bound(u, v, fwd_dots * d, rel, tail)
        rev = profile_bound(v, u, rev_dots * d, rel, tail)
        forward, reverse = np.maximum(forward, fwd), np.maximum(reverse, rev)
    fwd_dots, forward = _cut(fwd_dots, forward)
    rev_dots, reverse = _cut(rev_dots, reverse)
    return CoordinateProfile(fwd_dots, forward, rev_dots, reverse, len(blocks))


def _cut(grid: np.ndarray, profile: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop the dots after the first one whose profile is below DELTA_FLOOR.

    Connect-the-dots puts the profile of the last dot at +infinity, so the dropped part of the
    loss distribution is charged as delta <= DELTA_FLOOR: pessimistic, and it keeps the arrays
    (and every composition) short.
    """
    below = np.nonzero(profile <= DELTA_FLOOR)[0]
    end = int(below[0]) + 1 if below.size else len(grid)
    return grid[:end], np.minimum(profile[:end], 1.0)


# ---- privacy loss distributions ------------------------------------------------------------
@lru_cache(maxsize=256)
def round_pld(eps_local: float, contributors: int) -> PrivacyLossDistribution:
    """Dominating PLD of one round released as a sum over ``contributors`` devices."""
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

    prof = coordinate_profile(eps_local, contributors)
    forward = dots.connect_dots(prof.forward_dots, prof.forward, DISCRETIZATION)
    reverse = dots.connect_dots(prof.reverse_dots, prof.reverse, DISCRETIZATION)
    # (U_v x V_w || V_v x U_w): the losses of the two coordinates add. Swapping v and w swaps
    # the two distributions, so one (symmetric) PLD covers both orders of the neighbours.
    return PrivacyLossDistribution(pld_pmf.compose_pmfs(forward, reverse, COMPOSE_TRUNCATION))


@lru_cache(maxsize=64)
def report_pld(eps_local: float) -> PrivacyLossDistribution:
    """PLD of one device's report released alone (the randomizer's own guarantee).

    A change of element from w to v changes the coins at two coordinates only:
    ``Bern(a1) x Bern(a0)`` against ``Bern(a0) x Bern(a1)`` (every other coordinate is
    Bern(a0) on both sides and is dropped; a change to or from "nothing" is a marginal of this
    pair). The pair has four outcomes and is given to dp-accounting exactly, with pessimistic
    discretization (every loss rounded up); swapping v and w swaps its two distributions, so
    the PLD is symmetric. Its largest loss is ``Rates.effective_epsilon``, the report's
    eps_local (pure eps_local-DP)."""
    from dp_accounting.pld.privacy_loss_distribution import from_two_probability_mass_functions

    r = rates(eps_local)
    one = {1: math.log(r.a1), 0: math.log1p(-r.a1)}
    zero = {1: math.log(r.a0), 0: math.log1p(-r.a0)}
    upper = {(x, y): one[x] + zero[y] for x in (0, 1) for y in (0, 1)}
    lower = {(x, y): zero[x] + one[y] for x in (0, 1) for y in (0, 1)}
    return from_two_probability_mass_functions(
        upper, lower, pessimistic_estimate=True, value_discretization_interval=DISCRETIZATION,
        symmetric=True)


def sampled_profile(base: PrivacyLossDistribution, p: float, eps: np.ndarray) -> np.ndarray:
    """Upper bound on the profile of C_p(f) at eps (Dong, Roth, Su 2022, Theorem 4.2), f the
    trade-off function of ``base`` (the pair (A, B) of a round given its participants).

    With a = e^eps:
    H_a(pA + (1-p)B || B) = p H_{(a-1+p)/p}(A || B) for a > 1 - p, else 1 - a;
    H_a(B || pA + (1-p)B) = 1 - a + a p H_{1/g}(A || B), g = a p / (1 - a (1 - p)), when
    a (1 - p) < 1 (else 0), from H_g(B || A) = 1 - g + g H_{1/g}(A || B).
    The base's delta(eps) is dp-accounting's float sum over its masses: each H is taken as
    (1 + 2r) H(eps - 4r) with r = ``SAMPLED_MARGIN`` (>= that rounding, relative), which covers
    it also where the sum cancels (the argument of ``profile_bound``); the affine parts are
    exact.
    """
    r = SAMPLED_MARGIN
    a = np.exp(eps)
    first_arg = np.full(a.shape, -np.inf)
    above = a > 1.0 - p
    first_arg[above] = np.log((a[above] - (1.0 - p)) / p)
    c = 1.0 - a * (1.0 - p)
    second = c > 0
    second_arg = np.full(a.shape, -np.inf)
    second_arg[second] = np.log(c[second] / (a[second] * p))
    args = np.concatenate([first_arg, second_arg]) - 4.0 * r
    order = np.argsort(args)
    values = np.empty_like(args)
    finite = np.isfinite(args[order])
    values[order[~finite]] = 1.0
    values[order[finite]] = base.get_delta_for_epsilon(args[order][finite])
    values = np.minimum((1.0 + 2.0 * r) * values, 1.0)
    h_first, h_second = values[: len(a)], values[len(a):]
    first = np.where(above, p * h_first, 1.0 - a)
    second_val = np.where(second, 1.0 - a + a * p * h_second, 0.0)
    return np.clip(np.maximum(first, second_val), 0.0, 1.0)


@lru_cache(maxsize=256)
def sampled_round_pld(eps_local: float, participants: int, population: int
                      ) -> PrivacyLossDistribution:
    """Dominating PLD of a Poisson-sampled round, given its ``participants`` of ``population``."""
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

    if participants >= population:
        return round_pld(eps_local, participants)
    base = round_pld(eps_local, participants)
    p = participants / population
    r = rates(eps_local)
    prof = coordinate_profile(eps_local, participants)
    # the base's largest finite loss (its dots are rounded outwards) maps to the mixture's
    base_top = float(prof.forward_dots[-1] + prof.reverse_dots[-1]) * DISCRETIZATION
    top = math.log1p(p * math.expm1(base_top)) + 4.0 * SAMPLED_MARGIN
    step = min(1e-3, max(DISCRETIZATION, _loss_scale(participants, r) / 32.0 * p))
    points = dots.grid(-top, top, step, DISCRETIZATION)
    points, profile = _cut(points, sampled_profile(base, p, points * DISCRETIZATION))
    return PrivacyLossDistribution(dots.connect_dots(points, profile, DISCRETIZATION))


# ---- composition ---------------------------------------------------------------------------
def _round(eps_local: float, contributors: int, population: int | None
           ) -> PrivacyLossDistribution:
    if contributors == REPORT:
        return report_pld(eps_local)
    if population is None or contributors >= population:
        return round_pld(eps_local, contributors)
    return sampled_round_pld(eps_local, contributors, population)


def composed_pld(eps_local: float | Sequence[float], counts: Sequence[int],
                 population: int | None = None) -> PrivacyLossDistribution:
    """PLD of the adaptive composition of rounds with these contributor counts (``REPORT``: a
    report released alone); ``eps_local`` is every round's local epsilon, or one per round (a
    per-round allocation)."""
    per_round = ([float(eps_local)] * len(counts) if isinstance(eps_local, int | float)
                 else [float(e) for e in eps_local])
    if len(per_round) != len(counts):
        raise ValueError(f"{len(per_round)} local epsilons for {len(counts)} rounds")
    groups: dict[tuple[float, int], int] = {}
    for eps, count in zip(per_round, counts, strict=True):
        key = (check_eps(eps, "eps_local"),
               count if count == REPORT else check_devices(count, "contributors"))
        groups[key] = groups.get(key, 0) + 1
    if not groups:
        raise ValueError("no rounds to compose")
    parts = []
    for (eps, count), times in sorted(groups.items()):
        single = _round(eps, count, population)
        parts.append(single if times == 1 else single.self_compose(times, COMPOSE_TRUNCATION))
    total = parts[0]
    for part in parts[1:]:
        total = total.compose(part, COMPOSE_TRUNCATION)
    return total


def sum_epsilon(eps_local: float | Sequence[float], delta: float, counts: Sequence[int],
                population: int | None = None) -> float:
    """Aggregate epsilon at ``delta`` of rounds released as sums (capped by basic composition:
    each round is also eps_local-DP, being a post-processing of eps_local-LDP reports);
    ``eps_local`` as in ``composed_pld``."""
    delta = check_delta(delta)
    if not counts:
        return 0.0
    per_round = ([float(eps_local)] * len(counts) if isinstance(eps_local, int | float)
                 else [float(e) for e in eps_local])
    eps = float(composed_pld(per_round, counts, population).get_epsilon_for_delta(delta))
    effective = {e: rates(e).effective_epsilon for e in set(per_round)}
    return min(eps, sum_up(effective[e] for e in per_round))  # (rounded up, not below)
