"""The mask generator: AES-128-CTR keystream read as little-endian uint16/uint32 vectors.

A mask of dimension D modulo R = 2^b is the first D*b/8 bytes of the AES-128-CTR keystream under a
16-byte key with the all-zero initial counter block, read as little-endian unsigned b-bit integers.
Since R is a power of two, every element is exactly uniform mod R (no rejection sampling needed).
Each key is used for exactly one mask: keys come from HKDF with the round's session id as salt and
the device ids as info (:func:`self_mask_key`, :func:`pair_mask_key`), so the zero IV is safe.

Speed: the keystream is written with ``update_into`` into one preallocated scratch buffer (256 KiB,
so it stays in cache) and added to the accumulator in place, chunk by chunk; no per-mask
allocation. Many masks of one accumulator (a device's k + 1, a worker's unmasking) go through
:meth:`MaskGenerator.add_many`, which sums a batch of keystreams at a time. A
:class:`MaskGenerator` belongs to one thread.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from fedhh.secagg.errors import SecAggConfigError
from fedhh.secagg.primitives import LABELS, hkdf, u32

__all__ = [
    "MASK_KEY_BYTES",
    "MaskGenerator",
    "mask_dtype",
    "pair_mask_key",
    "self_mask_key",
]

MASK_KEY_BYTES = 16  # AES-128
_ZERO_IV = bytes(16)
_DEFAULT_CHUNK_BYTES = 1 << 18
_BATCH_BYTES = 1 << 17  # add_many's keystreams side by side (in L2 with the accumulator)


def mask_dtype(modulus_bits: int) -> np.dtype:
    """The little-endian wire dtype of vectors modulo 2^modulus_bits (16 or 32)."""
    if modulus_bits == 16:
        return np.dtype("<u2")
    if modulus_bits == 32:
        return np.dtype("<u4")
    raise SecAggConfigError(f"modulus_bits must be 16 or 32, got {modulus_bits}")


def self_mask_key(b_secret: bytes, session_id: bytes, device_id: int) -> bytes:
    """The PRG key of device ``device_id``'s self mask PRG(b_u)."""
    return hkdf(b_secret, salt=session_id, info=LABELS["self"] + u32(device_id),
                length=MASK_KEY_BYTES)


def pair_mask_key(shared_secret: bytes, session_id: bytes, u: int, v: int) -> bytes:
    """The PRG key of the pairwise mask between ``u`` and ``v`` from their X25519 secret."""
    lo, hi = (u, v) if u < v else (v, u)
    return hkdf(shared_secret, salt=session_id, info=LABELS["pair"] + u32(lo) + u32(hi),
                length=MASK_KEY_BYTES)


class MaskGenerator:
    """Expands 16-byte keys into masks of one dimension and modulus, through a reused buffer."""

    def __init__(self, dimension: int, modulus_bits: int,
                 chunk_bytes: int = _DEFAULT_CHUNK_BYTES) -> None:
        if dimension < 1:
            raise SecAggConfigError(f"dimension must be >= 1, got {dimension}")
        if chunk_bytes < 16 or chunk_bytes % 16:
            raise SecAggConfigError(f"chunk_bytes must be a positive multiple of 16, got "
                                    f"{chunk_bytes}")
        self.dimension = dimension
        self.modulus_bits = modulus_bits
        self.dtype = mask_dtype(modulus_bits)
        self.native_dtype = self.dtype.newbyteorder("=")
        itemsize = self.dtype.itemsize
        self._chunk = min(chunk_bytes // itemsize, dimension)  # elements per chunk
        nbytes = self._chunk * itemsize
        self._zeros = memoryview(bytes(nbytes))
        # update_into needs room for len(data) + block_size - 1 bytes.
        self._scratch = bytearray(nbytes + 15)
        self._view = np.frombuffer(self._scratch, dtype=self.dtype, count=self._chunk)
        self._batch: bytearray | None = None  # add_many's rows, made on its first call

    def _check(self, acc: np.ndarray) -> None:
        if acc.shape != (self.dimension,) or acc.dtype != self.native_dtype:
            raise ValueError(f"accumulator must be {self.native_dtype}[{self.dimension}], got "
                             f"{acc.dtype}{list(acc.shape)}")

    def zeros(self) -> np.ndarray:
        """A fresh all-zero accumulator of the right dimension and (native) dtype."""
        return np.zeros(self.dimension, dtype=self.native_dtype)

    def add(self, acc: np.ndarray, key: bytes, sign: int = 1) -> None:
        """``acc += sign * PRG(key) mod 2^b`` in place (``sign`` is +1 or -1)."""
        if len(key) != MASK_KEY_BYTES:
            raise ValueError(f"mask key must be {MASK_KEY_BYTES} bytes, got {len(key)}")
        self._check(acc)
        if sign not in (1, -1):
            raise ValueError(f"sign must be +1 or -1, got {sign}")
        op = np.add if sign == 1 else np.subtract
        stream = Cipher(algorithms.AES(key), modes.CTR(_ZERO_IV)).encryptor()
        chunk, itemsize, view = self._chunk, self.dtype.itemsize, self._view
        for start in range(0, self.dimension, chunk):
            stop = min(start + chunk, self.dimension)
            part = acc[start:stop]
            if stop - start == chunk:
                stream.update_into(self._zeros, self._scratch)
                op(part, view, out=part)
            else:
                m = stop - start
                stream.update_into(self._zeros[: m * itemsize], self._scratch)
                op(part, view[:m], out=part)

    def add_many(self, acc: np.ndarray, keys: Sequence[bytes], signs: Sequence[int]) -> None:
        """:meth:`add` of each key with its sign. Where a vector fits in one chunk, as it does
        up to D = 2^17 at b = 16, the keystreams of up to 128 KiB of vectors are written side
        by side and each batch is added (or subtracted) as one sum: the numpy call and checks
        of an add per key were ~1 us beside its ~7 us keystream, and a device adds k + 1
        masks, a worker one per survivor and k per dropped device. (89 masks at D = 4096,
        b = 16 on a fresh generator, as a device makes one: 733 -> 650 us; batches of 64 KiB
        took 675, of 256 KiB 645.)"""
        if len(keys) != len(signs):
            raise ValueError(f"{len(keys)} keys but {len(signs)} signs")
        if any(len(key) != MASK_KEY_BYTES for key in keys):
            raise ValueError(f"mask keys must be {MASK_KEY_BYTES} bytes")
        if any(sign not in (1, -1) for sign in signs):
            raise ValueError("signs must be +1 or -1")
        self._check(acc)
        if self._chunk < self.dimension:
            for key, sign in zip(keys, signs, strict=True):
                self.add(acc, key, sign)
            return
        nbytes = self._chunk * self.dtype.itemsize
        rows = max(1, _BATCH_BYTES // nbytes)
        if self._batch is None:
            self._batch = bytearray(rows * nbytes + 15)  # (update_into's room, as above)
        out = memoryview(self._batch)
        streams = np.frombuffer(self._batch, dtype=self.dtype,
                                count=rows * self._chunk).reshape(rows, self._chunk)
        for sign, op in ((1, np.add), (-1, np.subtract)):
            batch = [key for key, s in zip(keys, signs, strict=True) if s == sign]
            for start in range(0, len(batch), rows):
                part = batch[start:start + rows]
                for i, key in enumerate(part):
                    stream = Cipher(algorithms.AES(key), modes.CTR(_ZERO_IV)).encryptor()
                    stream.update_into(self._zeros, out[i * nbytes:(i + 1) * nbytes + 15])
                op(acc, streams[:len(part)].sum(axis=0, dtype=self.native_dtype), out=acc)

    def generate(self, key: bytes) -> np.ndarray:
        """PRG(key) as a new array (for tests and known-answer vectors; the hot path uses add)."""
        out = self.zeros()
        self.add(out, key)
        return out
