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
"""

from __future__ import annotations

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from fedhh.secagg.errors import SecAggConfigError
from fedhh.secagg.primitives import LABELS, hkdf, u32

__all__ = ["NeighbourGraph", "check_graph_parameters", "neighbours_of", "ring_order"]


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
    """int64[n]: the device id (1..n) at each ring position, derived from ``graph_seed``."""
    if len(graph_seed) != 32:
        raise SecAggConfigError(f"graph_seed must be 32 bytes, got {len(graph_seed)}")
    key = hkdf(graph_seed, salt=b"", info=LABELS["graph"] + u32(n), length=16)
    stream = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
    values = np.frombuffer(stream.update(bytes(8 * n)), dtype="<u8")
    return np.argsort(values, kind="stable").astype(np.int64) + 1


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
    order = ring_order(graph_seed, n)
    position = int(np.flatnonzero(order == device_id)[0])
    ids = order[(position + _offsets(n, k)) % n]
    return tuple(sorted(int(i) for i in ids))


class NeighbourGraph:
    """All neighbourhoods of a round (built once by the server)."""

    def __init__(self, graph_seed: bytes, n: int, k: int) -> None:
        check_graph_parameters(n, k)
        self.n = n
        self.k = k
        self.complete = k == n - 1
        if self.complete:
            self._table = None
        else:
            order = ring_order(graph_seed, n)
            position = np.empty(n + 1, dtype=np.int64)
            position[order] = np.arange(n)
            rows = (position[1:, None] + _offsets(n, k)[None, :]) % n
            self._table = np.sort(order[rows], axis=1)  # row i-1: neighbours of device i

    def neighbours(self, device_id: int) -> tuple[int, ...]:
        """Sorted neighbour ids of ``device_id``."""
        if not 1 <= device_id <= self.n:
            raise SecAggConfigError(f"device_id must be in [1, {self.n}], got {device_id}")
        if self._table is None:
            return tuple(i for i in range(1, self.n + 1) if i != device_id)
        return tuple(int(i) for i in self._table[device_id - 1])
