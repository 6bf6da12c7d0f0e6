"""Per-round bounds of amplification by shuffling, one set per shuffle method.

Methods (see ``methods``):

``"clones"``
    The FMT21 reduction (clone probability e^{-eps0}; Hiding Among the Clones, Section 3), which
    holds for any eps0-DP adaptive randomizers under replacement; ``randomizer_class`` checks
    that ours is one. Per-round RDP = the Renyi divergence of (P, Q) computed numerically
    (``clones``); per-round (eps, delta) = their hockey-stick divergence computed numerically.
    With Poisson sampling the reduction is taken given the round's participant count m
    (``clones.CloneReduction``, ``participants``).
``"paper"``
    The accounting of the heavy-hitters paper (Algorithm "Privacy Analysis"): RDP of shuffling
    from FMT23 (arXiv 2208.04591), "Theorem 3.2". We read that theorem as the numerically
    evaluated Renyi divergence of the pair of its Lemma 3.5, i.e. the same (P, Q) with clone
    probability 2/(e^eps0 + 1); the approximate-DP side uses the hockey-stick divergence of the
    same pair (FMT23 Section 4). The errata restricts Lemma 3.5 to a class of randomizers that
    ours is not shown to belong to (``randomizer_class.covered_by_fmt23`` is False), so results
    of this method are flagged ``conditions_verified=False``: a reproduction, not a guarantee.
    With sampling it stacks Zhu-Wang subsampling on the shuffle at q n, as the paper does.
``"closed-form"``
    FMT21 closed form (its main theorem, Theorem 3.1 of arXiv 2012.12803; the authors' code
    ``closedformanalysis`` computes a slightly different variant, 0.5377 vs our 0.5346 on the
    published example n = 1e5, eps0 = 4, delta = 1e-6, both within the published 0.538):
    ``eps = log(1 + (e^eps0 - 1)/(e^eps0 + 1) (8 sqrt(e^eps0 log(4/delta)) / sqrt(n)
    + 8 e^eps0 / n))`` for ``eps0 <= log(n / (16 log(2/delta)))``, else eps = eps0 (no
    amplification claimed), composed with advanced composition only. Conservative and cheap.
"""

from __future__ import annotations

import math

import numpy as np

from fedhh.privacy.clones import FMT21, FMT23, reduction

_VARIANT = {"clones": FMT21, "paper": FMT23}


def has_rdp(method: str) -> bool:
    """Whether the method has a per-round RDP curve (the closed form has none)."""
    return method in _VARIANT


def round_rdp(
    eps0: float, n: int, method: str, orders: np.ndarray, max_order: float = 256.0,
    participants: int | None = None,
) -> np.ndarray:
    """Per-round RDP of shuffling n reports of an eps0-LDP randomizer (upper bound); with
    ``participants`` < n, of a Poisson-sampled round with that many participants."""
    red = reduction(float(eps0), int(n), _VARIANT[method], float(max_order), participants)
    return red.rdp(np.asarray(orders, dtype=float))


def closed_form_epsilon(eps0: float, n: int, delta: float) -> float:
    """FMT21 Theorem 3.1 (arXiv 2012.12803 v4), the closed-form amplified epsilon.

    Valid for ``eps0 <= log(n / (16 log(2/delta)))``; outside that regime the shuffled output is
    still eps0-DP (post-processing of eps0-LDP reports), which is returned. So it is for
    ``delta`` = 0, where the regime is empty (a per-round share of a delta near the smallest
    float rounds to 0). The logarithms of ``c/delta`` are taken as ``log c - log delta``:
    ``2/delta`` overflows to infinity for delta below ~1.1e-308, and the regime's bound was then
    log(0), a ValueError that a coordinator answered as INTERNAL.
    """
    if delta <= 0.0:
        return eps0
    log_of = math.log(delta)
    if eps0 > math.log(n / (16.0 * (math.log(2.0) - log_of))):
        return eps0
    e = math.exp(eps0)
    inner = 8.0 * math.sqrt(e * (math.log(4.0) - log_of)) / math.sqrt(n) + 8.0 * e / n
    return min(eps0, math.log1p((e - 1.0) / (e + 1.0) * inner))


def round_epsilon(
    eps0: float, n: int, method: str, delta: float, max_order: float = 256.0,
    participants: int | None = None,
) -> float:
    """Per-round (eps, delta) of shuffling: the smallest eps for the given delta."""
    if method == "closed-form":
        return closed_form_epsilon(eps0, n if participants is None else participants, delta)
    red = reduction(float(eps0), int(n), _VARIANT[method], float(max_order), participants)
    return red.epsilon(delta)
