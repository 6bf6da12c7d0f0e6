"""The neighbour graph: a Harary graph on a ring ordered by a committed random permutation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.secagg.errors import SecAggConfigError
from fedhh.secagg.graph import NeighbourGraph, check_graph_parameters, neighbours_of, ring_order

SEED = bytes(range(32))


@pytest.mark.parametrize(("n", "k"), [(10, 4), (11, 10), (12, 11), (50, 8), (101, 2), (3, 2)])
def test_every_device_has_k_neighbours_and_edges_are_symmetric(n: int, k: int) -> None:
    graph = NeighbourGraph(SEED, n, k)
    for u in range(1, n + 1):
        nbrs = graph.neighbours(u)
        assert len(nbrs) == k and len(set(nbrs)) == k and u not in nbrs
        assert all(1 <= v <= n for v in nbrs)
        assert all(u in graph.neighbours(v) for v in nbrs)
        assert neighbours_of(SEED, n, k, u) == nbrs  # what the device derives on its own


def test_the_ring_is_a_permutation_fixed_by_the_seed() -> None:
    order = ring_order(SEED, 1000)
    assert sorted(order.tolist()) == list(range(1, 1001))
    assert np.array_equal(order, ring_order(SEED, 1000))
    assert not np.array_equal(order, ring_order(bytes(32), 1000))
    # Known answer: the committed graph must be the same for every device and server version.
    assert ring_order(bytes(32), 10).tolist() == [8, 7, 4, 3, 1, 9, 5, 6, 2, 10]
    assert neighbours_of(bytes(32), 10, 4, 1) == (3, 4, 5, 9)


def test_harary_structure_on_the_ring() -> None:
    n, k = 30, 6
    order = ring_order(SEED, n).tolist()
    graph = NeighbourGraph(SEED, n, k)
    for pos, u in enumerate(order):
        ring = {order[(pos + d) % n] for d in (-3, -2, -1, 1, 2, 3)}
        assert set(graph.neighbours(u)) == ring


def test_positions_are_close_to_uniform() -> None:
    """Over 600 seeds, device 1 lands on each of 6 ring positions about 100 times."""
    counts = np.zeros(6, dtype=np.int64)
    for s in range(600):
        order = ring_order(s.to_bytes(32, "big"), 6)
        counts[int(np.flatnonzero(order == 1)[0])] += 1
    # chi-square with 5 degrees of freedom; 20.5 is the 0.999 quantile.
    chi2 = float(((counts - 100) ** 2 / 100).sum())
    assert chi2 < 20.5, counts


def test_complete_graph_when_k_is_n_minus_1() -> None:
    graph = NeighbourGraph(SEED, 7, 6)
    assert graph.complete and graph.neighbours(3) == (1, 2, 4, 5, 6, 7)
    assert neighbours_of(SEED, 7, 6, 3) == (1, 2, 4, 5, 6, 7)


def test_neighbourhood_is_a_random_k_subset() -> None:
    """Every other device is a neighbour of device 1 with probability k/(n-1)."""
    n, k, trials = 9, 4, 800
    hits = np.zeros(n + 1, dtype=np.int64)
    for s in range(trials):
        for v in neighbours_of(s.to_bytes(32, "big"), n, k, 1):
            hits[v] += 1
    expected = trials * k / (n - 1)  # 400, sd ~ 14
    assert np.all(np.abs(hits[2:] - expected) < 5 * math.sqrt(expected * (1 - k / (n - 1))))


@pytest.mark.parametrize(("n", "k"), [(1, 1), (10, 0), (10, 10), (10, 3), (10, 5)])
def test_invalid_parameters(n: int, k: int) -> None:
    with pytest.raises(SecAggConfigError):
        check_graph_parameters(n, k)


def test_bad_seed_and_ids() -> None:
    with pytest.raises(SecAggConfigError, match="graph_seed"):
        ring_order(b"short", 10)
    with pytest.raises(SecAggConfigError, match="device_id"):
        neighbours_of(SEED, 10, 4, 11)
    with pytest.raises(SecAggConfigError, match="device_id"):
        NeighbourGraph(SEED, 10, 4).neighbours(0)


def _peeled(graph: NeighbourGraph, members: set[int], t: int) -> set[int]:
    """The t-core by its definition: remove a device short of t member neighbours, repeat."""
    while True:
        weak = next((u for u in sorted(members)
                     if sum(v in members for v in graph.neighbours(u)) < t), None)
        if weak is None:
            return members
        members = members - {weak}


@settings(max_examples=60, deadline=None)
@given(n=st.integers(3, 40), k_half=st.integers(1, 20), t=st.integers(0, 41),
       drop=st.sets(st.integers(1, 40)), seed=st.binary(min_size=32, max_size=32))
def test_core_matches_its_definition(
        n: int, k_half: int, t: int, drop: set[int], seed: bytes) -> None:
    k = min(2 * k_half, n - 1)
    graph = NeighbourGraph(seed, n, k)
    members = set(range(1, n + 1)) - drop
    assert graph.core(members, t) == _peeled(graph, members, t)


@settings(max_examples=80, deadline=None)
@given(n=st.integers(3, 40), k_half=st.integers(1, 20), drop=st.sets(st.integers(1, 40)),
       seed=st.binary(min_size=32, max_size=32))
def test_each_ring_run_is_the_device_and_its_member_neighbours(
        n: int, k_half: int, drop: set[int], seed: bytes) -> None:
    """The run of each member, read from its ring order laid twice, holds exactly the member
    and its neighbours among the members, each once (runs across the seam included)."""
    k = min(2 * k_half, n - 1)
    graph = NeighbourGraph(seed, n, k)
    members = set(range(1, n + 1)) - drop
    order, starts, stops = graph.ring_runs(members)
    assert sorted(order) == sorted(members)
    if not graph.complete:
        positions = [int(np.flatnonzero(ring_order(seed, n) == u)[0]) for u in order]
        assert positions == sorted(positions)
    twice = order + order
    for u, start, stop in zip(order, starts.tolist(), stops.tolist(), strict=True):
        assert 0 <= start <= len(order) and start <= stop <= start + len(order)
        run = twice[start:stop]
        assert len(set(run)) == len(run)
        assert set(run) == {u} | {v for v in graph.neighbours(u) if v in members}


def test_core_refuses_ids_outside_the_cohort() -> None:
    graph = NeighbourGraph(SEED, 10, 4)
    for bad in ({0, 1}, {11}):
        with pytest.raises(SecAggConfigError, match=r"device ids must be in \[1, 10\]"):
            graph.core(bad, 2)


def test_a_deep_cascade_of_removals_reads_the_table_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Near the cliff the removals peel the members off the ring a few at a time for tens of
    rounds; each round must cost its removed devices' neighbours, not another pass over the
    n x k table (a pass a round made each of a worker's quiet-close checks cost 0.3-1.2 s at
    25,000 devices a shard)."""
    n, k, t = 1000, 80, 53
    graph = NeighbourGraph(SEED, n, k)
    rng = np.random.default_rng(3)
    members = {int(u) for u in rng.permutation(np.arange(1, n + 1))[:770]}
    table = np.array([graph.neighbours(u) for u in range(1, n + 1)])
    alive = np.zeros(n + 1, dtype=bool)
    alive[list(members)] = True
    rounds = 0  # the reference: a whole round of removals at a time, each a pass
    while (weak := alive[1:] & (alive[table].sum(axis=1) < t)).any():
        alive[1:][weak] = False
        rounds += 1
    assert rounds >= 10  # a deep cascade (19 rounds with this seed)
    read = 0
    count_nonzero = np.count_nonzero

    def counted(a: np.ndarray, *args: object, **kwargs: object) -> object:
        nonlocal read
        read += np.size(a)
        return count_nonzero(a, *args, **kwargs)

    monkeypatch.setattr(np, "count_nonzero", counted)
    assert graph.core(members, t) == set(np.flatnonzero(alive).tolist())
    assert read == n * k
