"""Randomness sources for device logic.

Device functions take a ``RandomSource``. In simulation and tests it wraps a seeded
``numpy.random.Generator`` (one stream per device and round, spawned from a SeedSequence, so
results do not depend on scheduling). A deployed device uses ``SecureSource``: AES-256-CTR
keystream under a key from the operating system's CSPRNG, rekeyed from ``os.urandom`` for every
source, so a report's randomness can be neither predicted nor chosen by the server (a
server-chosen seed would undo local differential privacy).

Privacy-relevant coin flips are made by exact integer comparison of uniform 32-bit words
against integer thresholds (see ``fedhh.device.randomizer``), never by ``random() < p``.
"""

from __future__ import annotations

import os
import secrets
from typing import Protocol, runtime_checkable

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


@runtime_checkable
class RandomSource(Protocol):
    """What device logic draws from."""

    def uint32(self, size: int) -> np.ndarray:
        """``size`` independent uniform 32-bit words."""
        ...

    def below(self, highs: np.ndarray) -> np.ndarray:
        """For each positive int64 ``h`` in highs, an independent uniform integer in [0, h)."""
        ...


class NumpySource:
    """A RandomSource over a seeded numpy Generator (simulation and tests only)."""

    def __init__(self, generator: np.random.Generator) -> None:
        self.generator = generator

    def uint32(self, size: int) -> np.ndarray:
        return self.generator.integers(0, 1 << 32, size=size, dtype=np.uint32)

    def below(self, highs: np.ndarray) -> np.ndarray:
        highs = np.asarray(highs, dtype=np.int64)
        if highs.size == 0:
            return np.zeros(0, dtype=np.int64)
        return self.generator.integers(0, highs, dtype=np.int64)


class SecureSource:
    """A cryptographically secure RandomSource: AES-256-CTR under a fresh OS-random key."""

    def __init__(self) -> None:
        key = os.urandom(32)
        nonce = os.urandom(16)
        self._encryptor = Cipher(algorithms.AES(key), modes.CTR(nonce)).encryptor()

    def uint32(self, size: int) -> np.ndarray:
        # The keystream (AES-CTR of zeros) written straight into the result's memory.
        nbytes = 4 * size
        out = np.empty(size + 4, dtype="<u4")  # update_into wants 15 bytes of slack
        written = self._encryptor.update_into(_zeros(nbytes), out.view(np.uint8).data)
        if written != nbytes:
            raise AssertionError("AES-CTR wrote a partial keystream")  # pragma: no cover
        return out[:size].astype(np.uint32, copy=False)

    def below(self, highs: np.ndarray) -> np.ndarray:
        return np.array([secrets.randbelow(int(h)) for h in np.asarray(highs)], dtype=np.int64)


# The zeros that AES-CTR encrypts into a keystream, one immutable buffer for every source (its
# largest request so far): a buffer per source held a report's size per device, 16 KiB at
# D = 4096, for as long as a load test's fleet kept the device's source.
_ZEROS = b""


def _zeros(nbytes: int) -> memoryview:
    global _ZEROS
    zeros = _ZEROS
    if len(zeros) < nbytes:
        zeros = _ZEROS = bytes(nbytes)
    return memoryview(zeros)[:nbytes]


def as_source(rng: RandomSource | np.random.Generator) -> RandomSource:
    """Accept either a RandomSource or a numpy Generator (wrapped)."""
    if isinstance(rng, np.random.Generator):
        return NumpySource(rng)
    return rng
