"""PI-RAPPOR against its closed forms.

- The randomizer's reports follow Algorithm 3's law exactly: a chi-square goodness-of-fit test
  over every possible report (GF(5) and GF(9)), from a seeded generator and from the CSPRNG.
- Every decoder's counts follow Bin(c_w, alpha_1) + Bin(n - c_w, |S|/q) (Lemma 4.2 of Feldman
  and Talwar 2021): goodness of fit to that exact pmf, a z-test of the estimate's mean
  (unbiased) and a chi-square test of its variance against the variance formula of one-hot +
  randomized response with the same rates; the four decoders return identical counts on every
  sample. Elements with and without devices, in the devices' prefix and in another, are tested.
- At an eps where alpha_0 q is an integer the rates are one-hot + randomized response's, and
  PI-RAPPOR's estimates have the same variance as that randomizer's, by an F-test.
- The simulator's vectorised and per-device PI-RAPPOR paths give the same law of counts
  (chi-square test of homogeneity).

Each check has a false-failure probability of at most 2e-8 (goodness of fit and homogeneity:
p-value > 2e-8; z-tests |z| < 5.73; chi-square and F variance tests 1e-8 in each tail); no
test function makes more than 40 checks, so each fails falsely with probability below 1e-6.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedhh.codec import Codec
from fedhh.data.dataset import from_user_counts
from fedhh.device import SecureSource, Selection, SelectionRule
from fedhh.pirappor.decoders import Decoder, decode
from fedhh.pirappor.layout import RoundLayout
from fedhh.pirappor.mechanism import PiRappor
from fedhh.pirappor.params import round_parameters
from fedhh.pirappor.randomizer import evaluate, randomize_many
from fedhh.server import LocalRandomizer, PrefixTree, TreeConfig, rr_estimate, rr_variance
from fedhh.simulation.participation import Participation
from fedhh.simulation.population import Population
from fedhh.simulation.rounds import SimulatedRounds, draw_sums

P_MIN = 2e-8
Z = 5.73
TAIL = 1e-8


def goodness_of_fit(observed: np.ndarray, expected: np.ndarray) -> float:
    """Chi-square p-value, pooling cells with expected count below 5 into one."""
    small = expected < 5
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    return float(stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()
                                 ).pvalue)


@pytest.mark.parametrize("eps, s, source", [(1.0, 2, "numpy"), (2.0, 3, "numpy"),
                                            (2.0, 3, "secure")])
def test_reports_follow_algorithm_3(eps: float, s: int, source: str) -> None:
    params = round_parameters(eps, s)  # GF(5) and GF(9), one prefix: reports in GF(q)^3
    layout = RoundLayout(params.q, 1, s)
    q, m, d = params.q, params.set_size, layout.dimension
    draws = 120_000 if source == "numpy" else 40_000
    rng = np.random.default_rng(17) if source == "numpy" else SecureSource()
    for x in (-1, 2):
        reports = randomize_many(params, layout, np.full(draws, x), rng)
        codes = (reports * q ** np.arange(d + 1)).sum(axis=1)
        observed = np.bincount(codes, minlength=q ** (d + 1))
        every = np.array(np.unravel_index(np.arange(q ** (d + 1)), (q,) * (d + 1),
                                          order="F")).T
        inside = evaluate(params, every, layout.points(np.array([x])))[:, 0] < m
        law = np.where(inside, params.a1 / m, (1 - params.a1) / (q - m)) / q**d
        assert law.sum() == pytest.approx(1.0)
        assert goodness_of_fit(observed, law * draws) > P_MIN


def binomial_sum_pmf(c: int, a1: float, n_other: int, a0: float) -> np.ndarray:
    """pmf of Bin(c, a1) + Bin(n_other, a0) on 0..c + n_other."""
    return np.convolve(stats.binom.pmf(np.arange(c + 1), c, a1),
                       stats.binom.pmf(np.arange(n_other + 1), n_other, a0))


@pytest.mark.parametrize("eps, s", [(4.0, 4), (2.0, 3)])  # GF(59) with |S| = 1; GF(9), |S| = 1
def test_every_decoder_counts_with_the_closed_form_law(eps: float, s: int) -> None:
    params = round_parameters(eps, s)
    layout = RoundLayout(params.q, 3, s)
    width = layout.completions
    n = 400
    # 80 devices at w1 and 40 at w2 (prefix 0), 60 spread over prefix 1, the rest nothing.
    w1, w2 = 1, 2
    spread = width + np.arange(60) % (width - 2)
    indices = np.concatenate([np.full(80, w1), np.full(40, w2), spread, np.full(220, -1)])
    tracked = {w1: 80, w2: 40, 5: 0, 2 * width + 3: 0, width + width - 1: 0}
    trials = 3000
    rng = np.random.default_rng(23)
    counts = np.empty((trials, len(tracked)), dtype=np.int64)
    columns = list(tracked)
    for k in range(trials):
        reports = randomize_many(params, layout, indices, rng)
        decoded = [decode(params, layout, reports, decoder.value) for decoder in Decoder]
        for other in decoded[1:]:
            assert np.array_equal(other, decoded[0])
        counts[k] = decoded[0][columns]
    for j, (w, c) in enumerate(tracked.items()):
        pmf = binomial_sum_pmf(c, params.a1, n - c, params.a0)
        observed = np.bincount(counts[:, j], minlength=pmf.size)
        assert goodness_of_fit(observed[: pmf.size], pmf * trials) > P_MIN, w
        estimates = rr_estimate(counts[:, j], n, params)
        variance = float(rr_variance(c, n, params))  # one-hot + RR's formula, these rates
        assert abs(estimates.mean() - c) < Z * math.sqrt(variance / trials), w
        sample = estimates.var(ddof=1)
        assert (stats.chi2.ppf(TAIL, trials - 1) * variance / (trials - 1) < sample
                < stats.chi2.isf(TAIL, trials - 1) * variance / (trials - 1)), w


def test_variance_equals_one_hot_randomized_response() -> None:
    """eps = ln 7.5, 4-bit segments: q = 17 and alpha_0 q = 2, so PI-RAPPOR's rates are the
    appendix's constants; its estimates' variance equals one-hot + RR's (F-test), for an element
    held by 50 of 300 devices and for an unused one."""
    eps = math.log(7.5)
    params = round_parameters(eps, 4)
    assert params.set_size == 2 and abs(params.a1 - 0.5) < 1e-9
    layout = RoundLayout(params.q, 2, 4)
    n, held = 300, 50
    indices = np.concatenate([np.full(held, 7), np.full(100, 20), np.full(n - held - 100, -1)])
    trials = 4000
    rng = np.random.default_rng(5)
    pi = np.empty((trials, 2))
    for k in range(trials):
        decoded = decode(params, layout, randomize_many(params, layout, indices, rng))
        pi[k] = rr_estimate(decoded[[7, 3]], n, params)
    ohe = LocalRandomizer(eps)
    true_counts = np.bincount(indices[indices >= 0], minlength=layout.size)
    sums = np.array([draw_sums(ohe, true_counts, n, rng)[[7, 3]] for _ in range(trials)])
    rr = ohe.randomizer
    ohe_estimates = rr_estimate(sums, n, rr)
    for j, c in enumerate((held, 0)):
        assert float(rr_variance(c, n, params)) == pytest.approx(float(rr_variance(c, n, rr)),
                                                                  rel=1e-8)
        ratio = pi[:, j].var(ddof=1) / ohe_estimates[:, j].var(ddof=1)
        low, high = stats.f.ppf(TAIL, trials - 1, trials - 1), stats.f.isf(TAIL, trials - 1,
                                                                            trials - 1)
        assert low < ratio < high


def homogeneous(a: np.ndarray, b: np.ndarray) -> bool:
    values = np.union1d(a, b)
    table = np.array([[np.count_nonzero(a == v) for v in values],
                      [np.count_nonzero(b == v) for v in values]])
    keep = table.sum(axis=0) >= 10
    pooled = np.column_stack([table[:, keep], table[:, ~keep].sum(axis=1)])
    pooled = pooled[:, pooled.sum(axis=0) > 0]
    if pooled.shape[1] < 2:
        return True
    return bool(stats.chi2_contingency(pooled).pvalue > P_MIN)


def test_vectorised_and_per_device_paths_agree() -> None:
    users = [{"ab": 3, "ac": 1}, {"ab": 1}, {"b": 2, "ab": 1}, {"zz": 1}, {}] * 8
    population = Population.build(from_user_counts(users), Codec("5bit"))
    mechanism = PiRappor(3.0)
    tree = PrefixTree(TreeConfig(rounds=12, dim_limit=32), Codec("5bit"), mechanism)
    query = tree.query(tree.initial_state())  # 5-bit first symbol, domain 32, q = 37
    selection = Selection(SelectionRule.WEIGHTED)
    samples = {}
    for per_device in (False, True):
        rows = []
        for seed in range(1500):
            rounds = SimulatedRounds(population, mechanism, selection, Participation(), seed,
                                     per_device=per_device)
            rows.append(rounds.aggregate(query).sums)
        samples[per_device] = np.array(rows)
    for column in (0, 1, 25):  # "a", "b", "z"
        assert homogeneous(samples[False][:, column], samples[True][:, column])
    assert homogeneous(samples[False].sum(axis=1), samples[True].sum(axis=1))
