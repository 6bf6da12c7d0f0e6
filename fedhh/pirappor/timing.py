"""Decoding time of every PI-RAPPOR decoder against the round's domain size.

Two series of rounds at one eps: first-round domains (one prefix, segments of 10 to 22 bits)
and later-round domains (12-bit segments, 1 to 2441 prefixes, up to the paper's P = 10^7).
For each round a sample of reports (Zipf-distributed elements, 30% "nothing to report") is
decoded by each decoder, on as many reports as fit a time budget, and the time is scaled to
the population's n with the cost model (``decoders.costs``: linear in the reports for the
scanning and speed-up decoders, by the expected number of distinct linear parts for the
histogram decoder). The cost rule's choice is recorded with each round, so a reader can see
whether it picks the fastest decoder.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from fedhh.pirappor.decoders import Decoder, choose, costs, decode
from fedhh.pirappor.layout import RoundLayout
from fedhh.pirappor.params import round_parameters
from fedhh.pirappor.randomizer import randomize_many

FIRST_ROUND = tuple((1, bits) for bits in (10, 13, 16, 19, 22))
LATER_ROUNDS = tuple((prefixes, 12) for prefixes in (1, 8, 64, 512, 2441))
SAMPLE = 20_000
BUDGET_NS = 2e9  # expected time of one measurement, by the cost model


def sample_indices(size: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """70% of the devices hold an element (Zipf, exponent 1.1, over a shuffled domain)."""
    ranks = np.minimum(rng.zipf(1.1, n), size) - 1
    indices = rng.permutation(size)[ranks]
    indices[rng.random(n) < 0.3] = -1
    return indices


def measure_round(eps: float, prefixes: int, bits: int, population: int, seed: int = 0
                  ) -> list[dict[str, Any]]:
    """One row per decoder: reports decoded, seconds, and seconds scaled to ``population``."""
    params = round_parameters(eps, bits)
    layout = RoundLayout(params.q, prefixes, bits)
    rng = np.random.default_rng(seed)
    reports = randomize_many(params, layout, sample_indices(layout.size, SAMPLE, rng), rng)
    auto = choose(params, layout, population)
    full = costs(params, layout, population)
    rows = []
    for decoder in Decoder:
        per_report = costs(params, layout, SAMPLE)[decoder] / SAMPLE
        n = int(min(SAMPLE, max(10, BUDGET_NS // max(per_report, 1.0))))
        started = time.perf_counter()
        decode(params, layout, reports[:n], decoder.value)
        seconds = time.perf_counter() - started
        scaled = seconds * full[decoder] / costs(params, layout, n)[decoder]
        rows.append({"prefixes": prefixes, "segment_bits": bits, "domain": layout.size,
                     "q": params.q, "set_size": params.set_size, "decoder": decoder.value,
                     "reports": n, "seconds": seconds, "population": population,
                     "scaled_s": scaled, "auto": decoder is auto,
                     "report_bytes": layout.report_bytes})
    return rows


def measure_decoders(eps: float, population: int, seed: int = 0) -> dict[str, Any]:
    """The two series (module docstring) and the appendix's predicted speed-up."""
    started = time.perf_counter()
    series = {"first round": FIRST_ROUND, "later rounds": LATER_ROUNDS}
    rows = [dict(row, series=name) for name, shapes in series.items()
            for prefixes, bits in shapes
            for row in measure_round(eps, prefixes, bits, population, seed)]
    return {"eps_local": eps, "population": population, "sample": SAMPLE, "rows": rows,
            "predicted_speedup": (math.exp(eps) + 1) / eps,
            "timings": {"wall_s": time.perf_counter() - started}}
