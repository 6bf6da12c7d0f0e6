"""PI-RAPPOR's randomizer (Algorithm 3): the law of its reports, enumerated exactly over small
fields, is the stated one and eps-DP; reports are in the field and reproducible from a seed."""

from __future__ import annotations

import itertools
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from fedhh.errors import ConfigError
from fedhh.pirappor.layout import RoundLayout
from fedhh.pirappor.params import SCALE, PiRapporVariant, round_parameters
from fedhh.pirappor.randomizer import evaluate, randomize, randomize_many


class ReportLaw:
    """The law of Algorithm 3's report for every input, enumerated over all of GF(q)^(d+1):
    z = v(x) is in S w.p. alpha_1 (uniform in S), else uniform outside S; v_1..v_d uniform, so
    P[v | x] is ``inside`` when v(x) is in S and ``outside`` otherwise."""

    def __init__(self, eps: float, s: int, prefixes: int,
                 variant: PiRapporVariant = PiRapporVariant.REPLACEMENT) -> None:
        self.params = params = round_parameters(eps, s, variant)
        self.layout = layout = RoundLayout(params.q, prefixes, s)
        q, m, d = params.q, params.set_size, layout.dimension
        a1 = Fraction(params.threshold1, SCALE)
        self.inside = a1 / m / q**d
        self.outside = (1 - a1) / (q - m) / q**d
        self.reports = np.array(list(itertools.product(range(q), repeat=d + 1)))
        self.inputs = list(range(-1, layout.size))
        self.hits = evaluate(params, self.reports, layout.points(np.array(self.inputs))) < m

    def hit(self, x: int) -> np.ndarray:
        return self.hits[:, self.inputs.index(x)]

    def probability(self, x: int, event: np.ndarray) -> Fraction:
        """P[event | x] for a boolean event over the reports."""
        hx = self.hit(x)
        return (int(np.count_nonzero(event & hx)) * self.inside
                + int(np.count_nonzero(event & ~hx)) * self.outside)


@pytest.mark.parametrize("eps, s, prefixes", [(math.log(1.5), 2, 2), (2.0, 3, 2),
                                              (1.0, 1, 3), (math.log(7.5), 4, 1)])
@pytest.mark.parametrize("variant", list(PiRapporVariant))
def test_enumerated_law_is_eps_dp(eps: float, s: int, prefixes: int,
                                  variant: PiRapporVariant) -> None:
    law = ReportLaw(eps, s, prefixes, variant)
    everything = np.ones(len(law.reports), dtype=bool)
    for x in law.inputs:
        assert law.probability(x, everything) == 1
    # Every report has probability inside or outside under each input; the worst ratio is
    # inside / outside (replacement), or against the uniform report 1 / q^(d+1) (deletion).
    uniform = Fraction(1, len(law.reports))
    worst = (law.inside / law.outside if variant is PiRapporVariant.REPLACEMENT
             else max(law.inside / uniform, uniform / law.outside))
    with localcontext() as ctx:
        ctx.prec = 50
        assert Decimal(worst.numerator) / Decimal(worst.denominator) <= Decimal(eps).exp()


def test_pairwise_rates_from_the_law() -> None:
    """For inputs x != w: P[v(x) in S] = alpha_1, P[v(w) in S] = |S|/q, and the two events are
    independent (pairwise independence), computed exactly from the enumerated law."""
    law = ReportLaw(2.0, 3, 2)  # GF(9)
    a0 = Fraction(law.params.set_size, law.params.q)
    a1 = Fraction(law.params.threshold1, SCALE)
    for x in (-1, 0, 5, 15):
        for w in (0, 3, 9, 15):
            if w == x:
                continue
            assert law.probability(x, law.hit(w)) == a0
            if x >= 0:
                assert law.probability(x, law.hit(x) & law.hit(w)) == a1 * a0
        if x >= 0:
            assert law.probability(x, law.hit(x)) == a1


def test_correlation_along_a_prefix_line_is_exact() -> None:
    """Two completions w, w' of the device's own prefix: with |S| = 1 only v_d = 0 puts both
    in S, so P[both] = alpha_1 / q and their counts are correlated; completions of another
    prefix, or any two points for "nothing to report", are independent."""
    law = ReportLaw(4.0, 4, 2)  # q = 59, |S| = 1
    q = law.params.q
    assert law.params.set_size == 1
    a0, a1 = Fraction(1, q), Fraction(law.params.threshold1, SCALE)
    assert law.probability(5, law.hit(3) & law.hit(9)) == a1 / q
    assert law.probability(5, law.hit(16 + 3) & law.hit(16 + 9)) == a0 * a0
    assert law.probability(-1, law.hit(3) & law.hit(9)) == a0 * a0


def test_reports_are_field_vectors_and_reproducible() -> None:
    params = round_parameters(8.0, 10)
    layout = RoundLayout(params.q, 977, 10)
    indices = np.random.default_rng(0).integers(-1, layout.size, 1000)
    one = randomize_many(params, layout, indices, np.random.default_rng(7))
    two = randomize_many(params, layout, indices, np.random.default_rng(7))
    assert one.shape == (1000, 3) and np.array_equal(one, two)
    assert one.min() >= 0 and one.max() < params.q
    single = randomize(params, layout, 5, np.random.default_rng(1))
    assert single.shape == (3,)
    assert randomize(params, layout, None, np.random.default_rng(1)).shape == (3,)


def test_bad_inputs_are_refused() -> None:
    params = round_parameters(8.0, 10)
    layout = RoundLayout(params.q, 3, 10)
    with pytest.raises(ConfigError):
        randomize(params, layout, layout.size, np.random.default_rng(0))
    with pytest.raises(ConfigError):
        randomize(params, layout, -1, np.random.default_rng(0))
    with pytest.raises(ConfigError):
        randomize_many(params, RoundLayout(4099, 3, 10), np.zeros(2, np.int64),
                       np.random.default_rng(0))

