"""RDP amplification by Poisson subsampling: Zhu & Wang 2019, Theorem 5.

Zhu, Wang, "Poisson Subsampled Renyi Differential Privacy" (ICML 2019), Theorem 5: if M obeys
(a, eps(a))-RDP for all integer a >= 2, then M applied to a Poisson subsample with rate g obeys,
for every integer a >= 2,

    eps'(a) <= 1/(a-1) log( (1-g)^{a-1} (a g - g + 1)
                             + C(a,2) g^2 (1-g)^{a-2} e^{eps(2)}
                             + 3 sum_{l=3}^{a} C(a,l) (1-g)^{a-l} g^l e^{(l-1) eps(l)} ).

The base curve is only known on a grid of orders; Renyi divergence is non-decreasing in the
order (van Erven & Harremoes 2014, Theorem 3), so eps(l) is replaced by its value at the
smallest grid order >= l, an upper bound. Only integer orders of the grid get a subsampled value.

Caveat recorded in every result that uses it: the theorem is stated for the add/remove
neighbouring relation of the subsampled dataset, and the heavy-hitters paper applies it to the
shuffle RDP at the expected number of participants q*n. We follow the paper; the conditions are
not verified for our setting (replacement, random participant count).
"""

from __future__ import annotations

import math

import numpy as np


def _envelope(orders: np.ndarray, rdp: np.ndarray, ell: int) -> float:
    """RDP at the smallest grid order >= ell (an upper bound by monotonicity in the order)."""
    idx = int(np.searchsorted(orders, ell - 1e-12, side="left"))
    if idx >= len(orders):
        return math.inf
    return float(np.max(rdp[: idx + 1]))  # running max guards non-monotone numerical noise


def subsampled_rdp(orders: np.ndarray, rdp: np.ndarray, rate: float) -> np.ndarray:
    """Zhu-Wang Theorem 5 on the integer orders of the grid; inf at non-integer orders."""
    # (scipy.special on first use: a selector imports the ledger's modules and computes no
    # bound; the import took longer than the rest of its start-up.)
    from scipy.special import gammaln, logsumexp

    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    out = np.full(orders.shape, math.inf)
    if rate >= 1.0:
        return rdp.copy()
    lg, l1g = math.log(rate), math.log1p(-rate)
    for i, a_float in enumerate(orders):
        if a_float < 2 or a_float != int(a_float):
            continue
        a = int(a_float)
        terms = [(a - 1) * l1g + math.log(a * rate - rate + 1.0)]
        e2 = _envelope(orders, rdp, 2)
        log_c2 = gammaln(a + 1) - gammaln(3) - gammaln(a - 1)
        terms.append(log_c2 + 2 * lg + (a - 2) * l1g + e2)
        for ell in range(3, a + 1):
            e_l = _envelope(orders, rdp, ell)
            log_c = gammaln(a + 1) - gammaln(ell + 1) - gammaln(a - ell + 1)
            terms.append(math.log(3.0) + log_c + (a - ell) * l1g + ell * lg + (ell - 1) * e_l)
        out[i] = float(logsumexp(terms)) / (a - 1)
    return out
