"""The four decoders return exactly the brute-force counts #{v : v(w) in S}, over prime and
extension fields, with the awkward reports (v_d = 0, repeated reports) included; the cost rule
picks what it should."""

from __future__ import annotations

import numpy as np
import pytest

from fedhh.errors import ConfigError
from fedhh.pirappor import decoders
from fedhh.pirappor.decoders import AUTO, Decoder, choose, costs, decode
from fedhh.pirappor.layout import RoundLayout
from fedhh.pirappor.params import round_parameters
from fedhh.pirappor.randomizer import evaluate, randomize_many

CASES = [  # (eps, segment bits, prefixes): fields GF(3), GF(4), GF(5), GF(9), GF(23), GF(37)...
    (0.5, 1, 7), (0.3, 1, 30), (1.0, 1, 200), (1.0, 2, 40), (1.0, 3, 5), (2.0, 3, 12),
    (1.2, 3, 100), (2.0, 1, 1000), (3.0, 4, 3), (4.0, 4, 20), (1.0, 5, 1), (8.0, 2, 3),
    (8.0, 3, 1), (8.0, 10, 2),
]


def reference(params, layout: RoundLayout, reports: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    values = evaluate(params, reports, layout.points(np.arange(layout.size)))
    return np.count_nonzero(values < params.set_size, axis=0)


def awkward_reports(params, layout: RoundLayout, n: int, seed: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    reports = randomize_many(params, layout, rng.integers(-1, layout.size, n), rng)
    reports[: n // 10, -1] = 0              # v_d = 0: all completions of a prefix or none
    reports[n // 10 : n // 5] = reports[n // 5 : 3 * n // 10]  # repeated reports
    return reports


@pytest.mark.parametrize("eps, s, prefixes", CASES)
@pytest.mark.parametrize("decoder", list(Decoder))
def test_every_decoder_counts_exactly(eps: float, s: int, prefixes: int, decoder: Decoder
                                      ) -> None:
    params = round_parameters(eps, s)
    layout = RoundLayout(params.q, prefixes, s)
    reports = awkward_reports(params, layout, 300, seed=prefixes + s)
    assert np.array_equal(decode(params, layout, reports, decoder.value),
                          reference(params, layout, reports))


@pytest.mark.parametrize("eps, s, prefixes", [(1.0, 3, 5), (4.0, 4, 20), (2.0, 1, 1000),
                                             (1.0, 5, 3)])  # GF(37), |S| = 10: interval
def test_histogram_without_tables(eps: float, s: int, prefixes: int,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Algorithm 5 with its binary-search path (used when a per-group table is too large)."""
    monkeypatch.setattr(decoders, "TABLE_CELLS", 0)
    params = round_parameters(eps, s)
    layout = RoundLayout(params.q, prefixes, s)
    reports = awkward_reports(params, layout, 300, seed=3)
    assert np.array_equal(decode(params, layout, reports, "histogram"),
                          reference(params, layout, reports))


def test_prefix_speed_up_in_batches_and_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small batches split the g loop of the speed-up; every block and thread adds up, with
    the threads (PARALLEL_HITS lowered so that these 300,000 hits use them) and without."""
    monkeypatch.setattr(decoders, "BATCH", 64)
    params = round_parameters(4.0, 8)  # q = 257, |S| = 5
    layout = RoundLayout(params.q, 300, 8)  # two prefix digits: odometer carries
    reports = awkward_reports(params, layout, 200, seed=5)
    expected = reference(params, layout, reports)
    for parallel_hits in (1, decoders.PARALLEL_HITS):
        monkeypatch.setattr(decoders, "PARALLEL_HITS", parallel_hits)
        for decoder in ("direct+prefix", "histogram+prefix"):
            assert np.array_equal(decode(params, layout, reports, decoder), expected)


def test_degenerate_inputs() -> None:
    params = round_parameters(2.0, 3)
    layout = RoundLayout(params.q, 4, 3)
    empty = np.zeros((0, layout.report_length), dtype=np.int64)
    for decoder in Decoder:
        assert np.array_equal(decode(params, layout, empty, decoder.value),
                              np.zeros(layout.size, dtype=np.int64))
    one = awkward_reports(params, layout, 1, seed=0)
    assert np.array_equal(decode(params, layout, one), reference(params, layout, one))
    with pytest.raises(ConfigError, match="shape"):
        decode(params, layout, np.zeros((3, 2), dtype=np.int64))
    with pytest.raises(ConfigError, match="field elements"):
        decode(params, layout, np.full((3, layout.report_length), params.q))
    with pytest.raises(ConfigError, match="decoder"):
        decode(params, layout, one, "fastest")
    with pytest.raises(ConfigError, match="GF"):
        decode(params, RoundLayout(11, 4, 3), one)


def test_cost_rule() -> None:
    # A later OptPrefixTree round at eps 8.47: |S| = 1 of q = 4759, 12-bit segments: the
    # speed-up finds 1 completion of 4096 per report and prefix.
    params = round_parameters(8.4668, 12)
    layout = RoundLayout(params.q, 2441, 12)
    assert choose(params, layout, 1_600_000) is Decoder.DIRECT_PREFIX
    cost = costs(params, layout, 1_600_000)
    assert cost[Decoder.DIRECT] / cost[Decoder.DIRECT_PREFIX] > 300
    # Many reports over a small field: they share their linear parts (17^3 of them), so
    # decoding from the histogram of reports wins.
    small = round_parameters(1.0, 4)  # q = 17, |S| = 5
    grid = RoundLayout(small.q, 200, 4)
    assert choose(small, grid, 10**6) is Decoder.HISTOGRAM
    assert choose(small, grid, 100) is Decoder.DIRECT_PREFIX
    # The appendix's operation counts alone (G < n scanning steps instead of n) would prefer
    # the histogram whenever reports repeat at all; a table lookup costs several scan steps.
    assert cost[Decoder.HISTOGRAM] > cost[Decoder.DIRECT]
    assert AUTO == "auto"
