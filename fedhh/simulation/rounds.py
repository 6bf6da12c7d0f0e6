"""Round sums for a simulated population, drawn exactly or report by report.

Exact mode. With c_w devices selecting domain element w among n participants, the secure
aggregate of asymmetric randomized response is, coordinate by coordinate and independently,
``S_w = Bin(c_w, a1) + Bin(n - c_w, a0)``: every report's coordinates are independent Bernoulli
variables, a report's coordinate w is Bernoulli(a1) for the c_w devices whose one-hot bit is w and
Bernoulli(a0) for the others (devices with nothing to report included), and a sum of independent
Bernoulli variables with a common parameter is binomial. So drawing the two binomials per
coordinate gives the exact law of the sum the secure-aggregation service would release, without
simulating any report. Vote thresholds release c_w itself; central baselines add noise to c_w.

Several items per report (``round_items``): a device reporting the set S of elements sets a
one at each of them, so with c_w now the number of devices whose set holds w the same two
binomials give the exact sum (each coordinate's coins stay independent and Bernoulli(a1) at
the c_w devices, Bernoulli(a0) at the others).

Per-device mode randomizes every participant's report with its own stream (the one a device
process would use for the same seed) and adds them up: the reference the exact mode is tested
against, practical for small populations.

PI-RAPPOR (``fedhh.pirappor``) has no sum to draw: its reports are decoded one by one (in the
shuffle model). Every participant draws its own report, exactly (Algorithm 3 of Feldman and
Talwar 2021), and the server decodes them: vectorised over the devices from the round's noise
stream by default, or one device at a time from each device's own stream in per-device mode
(the reference the vectorised mode is tested against). Decoding depends only on the multiset of
reports, so the shuffler's permutation does not need simulating.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedhh.device import Eligibility, NumpySource, Selection, select_domain_index, streams
from fedhh.pirappor.mechanism import PiRappor
from fedhh.server import RoundQuery
from fedhh.server.mechanisms import (
    CentralNoise,
    LocalRandomizer,
    Mechanism,
    NoiseKind,
    VoteThreshold,
)
from fedhh.simulation.participation import Participation
from fedhh.simulation.population import Population


@dataclass(frozen=True)
class RoundSum:
    sums: np.ndarray         # int64 or float64 per domain element
    participants: int
    true_counts: np.ndarray  # c_w, for diagnostics only (actual false positives)
    diagnostics: dict[str, Any] = field(default_factory=dict)  # PI-RAPPOR: decoder, timings


class SimulatedRounds:
    """Produces each round's released sum for a population."""

    def __init__(
        self,
        population: Population,
        mechanism: Mechanism,
        selection: Selection,
        participation: Participation,
        seed: int,
        per_device: bool = False,
        round_mechanisms: tuple[Mechanism, ...] | None = None,
        round_items: tuple[int, ...] | None = None,
    ) -> None:
        """``round_mechanisms``: one mechanism per round (a per-round budget allocation);
        ``round_items``: the items each device reports per round (None: one)."""
        self.population = population
        self.mechanism = mechanism
        self.round_mechanisms = round_mechanisms
        self.selection = selection
        self.participation = participation
        self.seed = seed
        self.per_device = per_device
        self.round_items = round_items
        if round_items is not None and (per_device or isinstance(mechanism, PiRappor)):
            raise ValueError("several items per report are drawn in the exact mode of the "
                             "one-hot randomizer only")

    def mechanism_for(self, round_: int) -> Mechanism:
        if self.round_mechanisms is None:
            return self.mechanism
        return self.round_mechanisms[round_ - 1]

    def aggregate(self, query: RoundQuery) -> RoundSum:
        t = query.round
        users = self.participation.sample(
            self.population.num_users, streams.participation_stream(self.seed, t)
        )
        n = self.population.num_users if users is None else int(users.size)
        if isinstance(self.mechanism, PiRappor):
            return self._pi_rappor(self.mechanism, query, users, n)
        if self.per_device:
            return self._per_device(query, users, n)
        k = 1 if self.round_items is None else self.round_items[t - 1]
        if k > 1:
            indices = self.population.selected_domain_sets(
                query, self.selection, streams.selection_seeds(self.seed, t), k, users
            ).ravel()
        else:
            indices = self.population.selected_domain_indices(
                query, self.selection, streams.selection_seeds(self.seed, t), users
            )
        counts = np.bincount(indices[indices >= 0], minlength=query.domain_size).astype(np.int64)
        sums = draw_sums(self.mechanism_for(t), counts, n, streams.noise_stream(self.seed, t))
        return RoundSum(sums, n, counts)

    def _per_device(self, query: RoundQuery, users: np.ndarray | None, n: int) -> RoundSum:
        pop = self.population
        ids = np.arange(pop.num_users) if users is None else users
        sums = np.zeros(query.domain_size, dtype=np.int64)
        counts = np.zeros(query.domain_size, dtype=np.int64)
        eligibility = Eligibility.of(pop.item_codes, query.round_filter())
        mechanism = self.mechanism_for(query.round)
        randomizer = mechanism.randomizer if isinstance(mechanism, LocalRandomizer) else None
        for u in ids.tolist():
            rng = streams.device_stream(self.seed, query.round, u)
            index = device_domain_index(pop, u, query, self.selection, rng, eligibility)
            if index >= 0:
                counts[index] += 1
            if randomizer is not None:
                sums[randomizer.randomize(None if index < 0 else index, query.domain_size,
                                          rng)] += 1
        if randomizer is None:
            noise = streams.noise_stream(self.seed, query.round)
            sums = draw_sums(mechanism, counts, n, noise)
        return RoundSum(sums, n, counts)

    def _pi_rappor(self, mechanism: PiRappor, query: RoundQuery, users: np.ndarray | None,
                   n: int) -> RoundSum:
        """Every participant's own report, then the server's decoding (module docstring)."""
        pop = self.population
        round_ = mechanism.at_segment(query.segment_bits)
        layout = round_.layout(query.domain_size >> query.segment_bits)
        started = time.perf_counter()
        if self.per_device:
            ids = np.arange(pop.num_users) if users is None else users
            eligibility = Eligibility.of(pop.item_codes, query.round_filter())
            indices = np.empty(ids.size, dtype=np.int64)
            reports = np.empty((ids.size, layout.report_length), dtype=np.int64)
            for i, u in enumerate(ids.tolist()):
                rng = streams.device_stream(self.seed, query.round, u)
                indices[i] = device_domain_index(pop, u, query, self.selection, rng, eligibility)
                reports[i] = round_.randomize(layout, None if indices[i] < 0 else int(indices[i]),
                                              rng)
        else:
            indices = pop.selected_domain_indices(
                query, self.selection, streams.selection_seeds(self.seed, query.round), users)
            reports = round_.randomize_many(
                layout, indices, NumpySource(streams.noise_stream(self.seed, query.round)))
        randomized = time.perf_counter()
        decoder = round_.decoder_for(layout, len(reports))
        sums = round_.decode(layout, reports)
        decoded = time.perf_counter()
        counts = np.bincount(indices[indices >= 0], minlength=query.domain_size).astype(np.int64)
        params = round_.params
        return RoundSum(sums, n, counts, {
            "randomizer": "pi-rappor", "q": params.q, "set_size": params.set_size,
            "a0": params.a0, "a1": params.a1, "report_bytes": layout.report_bytes,
            "decoder": decoder.value, "randomize_s": randomized - started,
            "decode_s": decoded - randomized,
        })


def device_domain_index(
    population: Population,
    user: int,
    query: RoundQuery,
    selection: Selection,
    rng: np.random.Generator,
    eligibility: Eligibility,
) -> int:
    """One device's selected domain element (-1 for nothing), drawn from its own stream: the
    networked device's draw (``fedhh.device.select_domain_index``), or in single-item mode
    the user's fixed item."""
    if population.single_items is None:
        items, item_counts = population.dataset.user_items(user)
        return select_domain_index(query, items, item_counts, population.item_codes,
                                   eligibility, selection, rng)
    item = int(population.single_items[user])
    if item < 0 or eligibility.prefix_index[item] < 0:
        return -1
    code = population.item_codes[item : item + 1]
    return int(query.domain_index(code, eligibility.prefix_index[item : item + 1])[0])


def draw_sums(
    mechanism: Mechanism, counts: np.ndarray, n: int, rng: np.random.Generator
) -> np.ndarray:
    """The released sum's exact law given the true counts c_w of n participants."""
    if isinstance(mechanism, LocalRandomizer):
        # Every coordinate draws as if nobody held it (numpy's binomial with one n is ~4x
        # faster than with an array of n), then the held ones are drawn afresh: the same law,
        # each coordinate independent.
        rr = mechanism.randomizer
        sums = rng.binomial(n, rr.a0, size=counts.size).astype(np.int64)
        hit = np.flatnonzero(counts)
        sums[hit] = rng.binomial(n - counts[hit], rr.a0) + rng.binomial(counts[hit], rr.a1)
        return sums
    if isinstance(mechanism, VoteThreshold):
        return counts.copy()
    if isinstance(mechanism, CentralNoise):
        if mechanism.kind is NoiseKind.LAPLACE:
            noise = rng.laplace(0.0, mechanism.scale, size=counts.size)
        else:
            noise = rng.normal(0.0, mechanism.scale, size=counts.size)
        return counts + noise
    if isinstance(mechanism, PiRappor):
        raise TypeError("PI-RAPPOR releases no sum: its reports are decoded one by one")
    raise TypeError(f"unknown mechanism {mechanism!r}")  # pragma: no cover
