"""PI-RAPPOR's local randomizer (Feldman and Talwar 2021, Algorithm 3), exact and vectorised.

For the device's point x in GF(q)^d (``layout``): with probability alpha_1 draw z uniformly
from S, otherwise uniformly from GF(q) minus S; draw v_1, ..., v_d uniformly from GF(q); set
v_0 = z - sum_j v_j x_j. The report v = (v_0, ..., v_d) is uniform among the vectors with
v(x) = z, so

    P[v | x] = alpha_1 / (|S| q^d)               if v(x) is in S,
             = (1 - alpha_1) / ((q - |S|) q^d)   otherwise,

and for any other point w, v(w) = z + sum_j v_j (w_j - x_j) is uniform on GF(q) whatever z is
(w != x, and the v_j are uniform and independent of z): v(w) is in S with probability exactly
|S| / q, independently of v(x) (pairwise independence). The privacy of these probabilities is
in ``params``.

Randomness comes from a ``fedhh.device.randomness.RandomSource``: ``SecureSource`` (AES-CTR under an
OS-random key) on a device, a seeded ``NumpySource`` only in simulation and tests. The alpha_1
coin is the exact integer comparison of a uniform 32-bit word with ``threshold1``; the uniform
field elements are exact uniform integers (``RandomSource.below``).
"""

from __future__ import annotations

import numpy as np

from fedhh.device import RandomSource, as_source
from fedhh.errors import ConfigError
from fedhh.pirappor.layout import RoundLayout
from fedhh.pirappor.params import RoundParameters


def randomize_many(params: RoundParameters, layout: RoundLayout, indices: np.ndarray,
                   rng: RandomSource | np.random.Generator) -> np.ndarray:
    """One independent report per domain index (-1: nothing to report): (n, d + 1) int64."""
    if layout.q != params.q:
        raise ConfigError(f"layout over GF({layout.q}) does not match parameters over "
                          f"GF({params.q})")
    points = layout.points(indices)
    n, d = points.shape
    source = as_source(rng)
    in_set = source.uint32(n) < np.uint32(params.threshold1)
    m, q = params.set_size, params.q
    z = source.below(np.where(in_set, m, q - m)) + np.where(in_set, 0, m)
    linear = source.below(np.full(n * d, q, dtype=np.int64)).reshape(n, d)
    gf = params.field
    v0 = np.asarray(z, dtype=np.int64)
    for j in range(d):
        v0 = gf.sub(v0, gf.mul(linear[:, j], points[:, j]))
    return np.concatenate([v0[:, None], linear], axis=1)


def randomize(params: RoundParameters, layout: RoundLayout, index: int | None,
              rng: RandomSource | np.random.Generator) -> np.ndarray:
    """One device's report for its domain element ``index`` (None: nothing to report)."""
    if index is not None and not 0 <= index < layout.size:
        raise ConfigError(f"selected index {index} is outside the domain [0, {layout.size})")
    chosen = np.array([-1 if index is None else index], dtype=np.int64)
    return randomize_many(params, layout, chosen, rng)[0]


def evaluate(params: RoundParameters, reports: np.ndarray, points: np.ndarray) -> np.ndarray:
    """v(w) for every report and point: (n, m) int64 (a reference for tests and decoders)."""
    gf = params.field
    reports = np.asarray(reports, dtype=np.int64)
    points = np.asarray(points, dtype=np.int64)
    value = np.broadcast_to(reports[:, :1], (reports.shape[0], points.shape[0])).copy()
    for j in range(points.shape[1]):
        value = gf.add(value, gf.mul(reports[:, j + 1 : j + 2], points[None, :, j]))
    return value
