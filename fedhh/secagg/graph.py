"""The neighbour graph: a Harary graph H(k, n) on a ring ordered by a committed random permutation.

The round's cohort is the devices with ids 1..n. A 32-byte ``graph_seed`` from the
coordinator-signed round config keys AES-128-CTR (key = HKDF(graph_seed, info = label || n));
the keystream gives one little-endian uint64 per device, and a stable argsort of those values
orders the devices on a ring.
Each device is linked to the k/2 devices on each side (k even), so every device has exactly k
neighbours and the neighbourhood of a device is a uniformly random k-subset of the others (up to
ties among 64-bit values, probability < n^2 / 2^65). With k >= n - 1 the graph is complete
(plain SecAgg).

The graph is over the whole cohort and fixed by the config before any key exists, so a device
derives its own neighbours and rejects any other id, and the server cannot choose the graph
(not even by choosing which devices count as having advertised keys).

Survivor connectivity. The server learns the sum of every connected component of the survivors'
mask graph, so U3 must not split it (:func:`survivors_connected`). Deleting devices from the ring
H(k, n): an edge spans at most k/2 ring positions, so no edge crosses a gap of more than k/2
positions between two ring-consecutive survivors, and two ring-consecutive survivors at most
k/2 apart are adjacent. The survivors therefore form one cycle (no such gap), one path (one
gap), or two or more arcs with no edge between them (two or more gaps).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from fedhh.secagg.errors import SecAggConfigError
from fedhh.secagg.primitives import LABELS, hkdf, u32

__all__ = ["ROUNDS_REMEMBERED", "NeighbourGraph", "check_graph_parameters", "neighbours_of",
           "ring_order", "ring_positions", "survivors_connected"]

# How many rounds a process's per-round caches remember (the ring here, a device's U3 facts,
# decoded U3s): one per round open at once. A load-test process hosts devices of every shard
# (shards are drawn at random), and 8-16 would let the ten shards of a 50,000-device test
# evict each other's.
ROUNDS_REMEMBERED = 256


def check_graph_parameters(n: int, k: int) -> None:
    """Raise :class:`SecAggConfigError` unless H(k, n) is defined: 1 <= k <= n - 1, k even or
    k == n - 1 (the complete graph)."""
    if n < 2:
        raise SecAggConfigError(f"the cohort needs at least 2 devices, got n={n}")
    if not 1 <= k <= n - 1:
        raise SecAggConfigError(f"k must be in [1, n-1] = [1, {n - 1}], got {k}")
    if k % 2 and k != n - 1:
        raise SecAggConfigError(f"k must be even (or n-1 for the complete graph), got {k}")


def ring_order(graph_seed: bytes, n: int) -> np.ndarray:
    """int64[n]: the device id (1..n) at each ring position, derived from ``graph_seed``
    (read-only)."""
    return _ring(graph_seed, n)[0]


def ring_positions(graph_seed: bytes, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`ring_order`, int64[n + 1]: the ring position of each id, index 0 unused), both
    read-only: where the cohort's Merkle tree puts each device's leaf
    (:mod:`fedhh.secagg.merkle`)."""
    return _ring(graph_seed, n)


@functools.lru_cache(maxsize=ROUNDS_REMEMBERED)
def _ring(graph_seed: bytes, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(ring order, ring position of each id), derived once per (seed, n) and read-only.

    A device derives the ring twice a round (its neighbours, then the survivors'
    connectivity), and a process simulating thousands of devices of one round derived the
    same one thousands of times: a sort of n values each, ~1 ms of a device's CPU at n = 5000.
    The arrays are shared, so they are frozen."""
    if len(graph_seed) != 32:
        raise SecAggConfigError(f"graph_seed must be 32 bytes, got {len(graph_seed)}")
    key = hkdf(graph_seed, salt=b"", info=LABELS["graph"] + u32(n), length=16)
    stream = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
    values = np.frombuffer(stream.update(bytes(8 * n)), dtype="<u8")
    order = np.argsort(values, kind="stable").astype(np.int64) + 1
    positions = _positions(order)
    order.flags.writeable = False
    positions.flags.writeable = False
    return order, positions


def _offsets(n: int, k: int) -> np.ndarray:
    half = k // 2
    return np.concatenate([np.arange(-half, 0), np.arange(1, half + 1)])


def neighbours_of(graph_seed: bytes, n: int, k: int, device_id: int) -> tuple[int, ...]:
    """The sorted neighbour ids of ``device_id``: what a device checks its roster against."""
    check_graph_parameters(n, k)
    if not 1 <= device_id <= n:
        raise SecAggConfigError(f"device_id must be in [1, {n}], got {device_id}")
    if k == n - 1:
        return tuple(i for i in range(1, n + 1) if i != device_id)
    order, positions = _ring(graph_seed, n)
    ids = order[(positions[device_id] + _offsets(n, k)) % n]
    return tuple(sorted(int(i) for i in ids))


def _positions(order: np.ndarray) -> np.ndarray:
    """int64[n + 1]: the ring position of each device id (index 0 unused)."""
    position = np.empty(order.size + 1, dtype=np.int64)
    position[0] = -1
    position[order] = np.arange(order.size)
    return position


def _connected_on_ring(positions: np.ndarray, n: int, k: int) -> bool:
    """True iff at most one gap between ring-consecutive ``positions`` exceeds k/2."""
    if positions.size <= 1:
        return True
    ring = np.sort(positions)
    gaps = np.diff(ring, append=ring[0] + n)
    return int(np.count_nonzero(gaps > k // 2)) <= 1


def survivors_connected(graph_seed: bytes, n: int, k: int, survivors: Sequence[int]) -> bool:
    """True iff ``survivors`` (distinct ids in 1..n) induce a connected subgraph of H(k, n)
    (module docstring); always true for the complete graph."""
    check_graph_parameters(n, k)
    if k == n - 1:
        return True
    ids = np.asarray(survivors, dtype=np.int64)
    return _connected_on_ring(_ring(graph_seed, n)[1][ids], n, k)


class NeighbourGraph:
    """All neighbourhoods of a round (built once by the server)."""

    def __init__(self, graph_seed: bytes, n: int, k: int) -> None:
        check_graph_parameters(n, k)
        self.n = n
        self.k = k
        self.complete = k == n - 1
        if self.complete:
            self._table = None
            self._position = None
        else:
            order, self._position = _ring(graph_seed, n)
            rows = (self._position[1:, None] + _offsets(n, k)[None, :]) % n
            self._table = np.sort(order[rows], axis=1)  # row i-1: neighbours of device i

    def neighbours(self, device_id: int) -> tuple[int, ...]:
        """Sorted neighbour ids of ``device_id``."""
        if not 1 <= device_id <= self.n:
            raise SecAggConfigError(f"device_id must be in [1, {self.n}], got {device_id}")
        if self._table is None:
            return tuple(i for i in range(1, self.n + 1) if i != device_id)
        return tuple(int(i) for i in self._table[device_id - 1])

    def _members(self, members: Collection[int]) -> tuple[np.ndarray, np.ndarray]:
        """``members`` as sorted ids and as a mask indexed by id (entry 0 unused)."""
        ids = np.unique(np.fromiter(members, dtype=np.int64, count=len(members)))
        if ids.size and (ids[0] < 1 or ids[-1] > self.n):
            raise SecAggConfigError(f"device ids must be in [1, {self.n}]")
        mask = np.zeros(self.n + 1, dtype=bool)
        mask[ids] = True
        return ids, mask

    def ring_runs(self, members: Collection[int]) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
        """``members`` in ring order, and for the i-th of them the run [start[i], stop[i]) of
        that order, laid twice end to end (indices 0..2m), that holds it and its neighbours
        among the members: the members within k/2 ring positions on either side, one run
        because the neighbourhood is an arc of the ring (module docstring). For the complete
        graph the order is the ids' and every run is all of them.

        A device's share-keys request lists its own and its live neighbours' keys, and its
        unmask request its signing neighbours' signatures, so with the round's entries laid
        out in this order each list is a run or two of consecutive bytes
        (:class:`fedhh.secagg.messages.RingRun`) instead of ~k entries gathered from all m:
        at 25,000 devices a shard the gathers cost a worker 76-85 and ~61 us a device,
        against 59 and 25 at 2,500 (docs/benchmarks.md)."""
        ids, _ = self._members(members)
        m = ids.size
        if self._position is None:
            return tuple(ids.tolist()), np.zeros(m, dtype=np.int64), np.full(m, m, dtype=np.int64)
        positions = self._position[ids]
        by_ring = np.argsort(positions, kind="stable")
        ring, pos = ids[by_ring], positions[by_ring]
        half = self.k // 2
        # Three laps of the members' positions, so that an arc around the seam is one range;
        # an arc spans k + 1 <= n - 1 positions, so it meets each member at most once.
        laps = np.concatenate([pos - self.n, pos, pos + self.n])
        start = np.searchsorted(laps, pos - half, side="left") - m
        stop = np.searchsorted(laps, pos + half, side="right") - m
        wrapped = start < 0
        start[wrapped] += m
        stop[wrapped] += m
        return tuple(ring.tolist()), start, stop

    def core(self, members: Collection[int], t: int) -> set[int]:
        """The devices of ``members`` left after removing, again and again until none is left
        to remove, every device with fewer than ``t`` neighbours among those left: the t-core
        of the subgraph ``members`` induce. It is unique (a removal never gives another device
        a neighbour, so the order of removals does not change the result; Matula and Beck,
        "Smallest-last ordering and clustering and graph coloring algorithms", JACM 1983).

        One gather over the n x k table counts each device's neighbours among the members;
        each removal then takes one from its own neighbours' counts (the graph is undirected),
        so a round of removals costs its devices' k entries, not another pass over the table.
        Near the cliff of ``closing_keeps_round`` the removals cascade around the ring for
        tens to over a hundred rounds, more the larger n: a pass a round cost ~10-45 ms at
        5,000 devices and 0.3-1.2 s at 25,000 (now ~5 and ~25), and a worker asks every
        quarter of a quiet spell (docs/benchmarks.md, "The sharded load test at the fifty-fifth
        stop")."""
        ids, alive = self._members(members)
        table = self._table
        if table is None:  # complete: each member has every other member as neighbour
            return set(ids.tolist()) if ids.size - 1 >= t else set()
        among = np.zeros(self.n + 1, dtype=np.int64)  # a device's neighbours still in
        among[1:] = np.count_nonzero(alive[table], axis=1)
        weak = ids[among[ids] < t]
        while weak.size:
            alive[weak] = False
            touched = table[weak - 1].ravel()
            np.subtract.at(among, touched, 1)
            touched = np.unique(touched)  # each removed once, its neighbours' counts cut once
            weak = touched[alive[touched] & (among[touched] < t)]
        return set(np.flatnonzero(alive).tolist())

    def connected(self, members: Sequence[int]) -> bool:
        """True iff ``members`` (distinct ids) induce a connected subgraph (module docstring)."""
        if self._position is None:
            return True
        return _connected_on_ring(self._position[np.asarray(members, dtype=np.int64)],
                                  self.n, self.k)
