"""The local randomizer: exact eps-LDP of the implemented probabilities, and its bit rates.

The LDP test enumerates, for a small domain, every output set and every pair of inputs
(including "nothing to report") and checks the likelihood ratio bound in exact rational
arithmetic. Rate tests are two-sided binomial tests at significance 1e-7 (false failure at most
1e-7 per test).
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from fedhh.device import NumpySource, SecureSource
from fedhh.device.randomizer import SCALE, RandomizedResponse, a0_threshold
from fedhh.errors import ConfigError

EPSILONS = [0.1, 0.5, 1.0, 2.0, 4.0, 8.0, 12.0, 20.0]


@pytest.mark.parametrize("eps", EPSILONS)
def test_threshold_rounds_a0_up(eps: float) -> None:
    m = a0_threshold(eps)
    with localcontext() as ctx:
        ctx.prec = 100
        exact = 1 / (Decimal(eps).exp() + 1)
        assert Decimal(m) / SCALE >= exact
        assert Decimal(m - 1) / SCALE < exact  # the smallest such threshold


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("dim", [1, 2, 3])
def test_exact_ldp_ratio_over_all_outputs(eps: float, dim: int) -> None:
    rr = RandomizedResponse(eps)
    a0 = Fraction(rr.threshold0, SCALE)
    a1 = Fraction(rr.threshold1, SCALE)
    inputs = [None, *range(dim)]
    bound = Fraction(Decimal(eps).exp())  # e^eps rounded to the nearest float, then exact

    def probability(index: int | None, output: tuple[int, ...]) -> Fraction:
        p = Fraction(1)
        for j, bit in enumerate(output):
            q = a1 if j == index else a0
            p *= q if bit else 1 - q
        return p

    worst = Fraction(0)
    for output in itertools.product((0, 1), repeat=dim):
        probs = [probability(i, output) for i in inputs]
        worst = max(worst, max(probs) / min(probs))
    assert worst <= bound * (1 + Fraction(1, 10**12))
    if dim >= 2:  # two inputs differing in two coordinates attain the bound exactly
        assert worst == Fraction(SCALE - rr.threshold0, rr.threshold0)
    assert math.log(worst) <= eps + 1e-12


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_empirical_bit_rates(eps: float) -> None:
    rr = RandomizedResponse(eps)
    rng = np.random.default_rng(5)
    dim, reps = 1000, 400
    ones_true = 0
    ones_false = 0
    for _ in range(reps):
        out = rr.randomize(7, dim, rng)
        ones_true += int(7 in out)
        ones_false += out.size - int(7 in out)
    assert stats.binomtest(ones_true, reps, rr.a1).pvalue > 1e-7
    assert stats.binomtest(ones_false, reps * (dim - 1), rr.a0).pvalue > 1e-7


def test_nothing_to_report_flips_zeros_only() -> None:
    rr = RandomizedResponse(2.0)
    out = rr.randomize(None, 50_000, NumpySource(np.random.default_rng(0)))
    assert stats.binomtest(out.size, 50_000, rr.a0).pvalue > 1e-7


def test_secure_source_produces_uniform_words() -> None:
    source = SecureSource()
    words = source.uint32(100_000)
    assert words.dtype == np.uint32 and words.size == 100_000
    # Top bit is fair: binomial test at 1e-7.
    assert stats.binomtest(int((words >> 31).sum()), words.size, 0.5).pvalue > 1e-7
    assert not np.array_equal(words, SecureSource().uint32(100_000))


def test_bad_inputs_rejected() -> None:
    rr = RandomizedResponse(1.0)
    with pytest.raises(ConfigError):
        rr.randomize(5, 5, np.random.default_rng(0))
    with pytest.raises(ConfigError):
        rr.randomize(None, 0, np.random.default_rng(0))
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError):
            RandomizedResponse(bad)
