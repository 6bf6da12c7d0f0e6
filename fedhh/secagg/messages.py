"""The messages between devices and the aggregator: plain frozen dataclasses, transport-agnostic.

Every message names the round's ``session_id`` and the ``device_id`` it is from (device to server)
or for (server to device). Fields are bytes, ints, tuples of those, or a numpy vector; receivers
validate every field (types and exact lengths) and never trust the constructor.

Order of one round (server -> device requests come from ``SecAggServer.close_stage``)::

    device                                     server
    advertise_keys()       -- AdvertiseKeys -->      handle_advertise_keys
                           <-- ShareKeysRequest --   close_stage  (stage 0 -> 1)
    share_keys(req)        -- ShareKeysResponse -->  handle_share_keys
                           <-- MaskedInputRequest -- close_stage  (1 -> 2)
    masked_input(req, x)   -- MaskedInput -->        handle_masked_input
                           <-- ConsistencyRequest -- close_stage  (2 -> 3, if consistency_check)
    consistency_check(req) -- ConsistencyResponse -> handle_consistency_check
                           <-- UnmaskRequest --      close_stage  (2 or 3 -> 4)
    unmask(req)            -- UnmaskResponse -->     handle_unmask
                                                     close_stage  (4 -> done) -> AggregateResult
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar, overload

import numpy as np

from fedhh.secagg.config import Admission
from fedhh.secagg.errors import ProtocolViolation, Violation
from fedhh.secagg.primitives import LABELS, sha256, u32

T = TypeVar("T")

__all__ = [
    "AdvertiseKeys",
    "AggregateResult",
    "ConsistencyRequest",
    "ConsistencyResponse",
    "Decline",
    "DeviceMessage",
    "EncryptedShare",
    "MaskedInput",
    "MaskedInputRequest",
    "OwnerShares",
    "ReleaseEvidence",
    "RingRun",
    "ServerMessage",
    "ShareBundle",
    "ShareKeysRequest",
    "ShareKeysResponse",
    "Stage",
    "UnmaskRequest",
    "UnmaskResponse",
    "consistency_transcript",
    "survivors_digest",
]


class Stage(IntEnum):
    """The protocol stages, in order; the server collects one device message type per stage."""

    ADVERTISE_KEYS = 0
    SHARE_KEYS = 1
    MASKED_INPUT = 2
    CONSISTENCY_CHECK = 3
    UNMASK = 4
    DONE = 5


@dataclass(frozen=True, slots=True)
class AdvertiseKeys:
    """Stage 0, device -> server: the device's fresh X25519 public keys for this round.

    ``c_pk`` keys the share encryption, ``s_pk`` the pairwise masks. With device_auth,
    ``admission`` proves that these keys are the ones the device presented at check-in (it
    carries the same keys). The server forwards these entries to the neighbours, under one
    multiproof for all of a device's roster (:class:`ShareKeysRequest`).
    """

    session_id: bytes
    device_id: int
    c_pk: bytes
    s_pk: bytes
    admission: Admission | None = None


@dataclass(frozen=True, slots=True)
class Decline:
    """Stage 0, device -> server: the device gives up its seat before it advertises keys (it
    refuses the task: its floors, its local budget, its user). The stage stops waiting for it,
    so it closes as soon as every other member has answered, not at its deadline. It carries
    no reason: why a device refuses (its budget spent, say) is the device's own business."""

    session_id: bytes
    device_id: int


class _TupleLike(Sequence[T]):
    """An immutable sequence equal to (and hashed as) the tuple of its items; a subclass says
    how long it is and what its i-th item is."""

    __slots__ = ()

    @abstractmethod
    def _at(self, i: int) -> T:
        """The item at ``i``, 0 <= i < len(self)."""

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        return self._at(range(len(self))[index])  # (IndexError, negative indices)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _TupleLike | tuple):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))  # (equal to the tuple it equals, as __eq__ requires)


class RingRun(_TupleLike[T]):
    """A run of a round's items in ring order: items ``start`` to ``stop`` of ``ring`` laid
    twice end to end, so a run may cross the seam, less the ring's item ``skip`` if given
    (:meth:`fedhh.secagg.graph.NeighbourGraph.ring_runs`). The server makes one per device for
    its roster (its own entry and its live neighbours') and for its neighbours' consistency
    signatures (its own left out), a view of one tuple shared by the round; the transport
    sends a run's bytes from one encoding of the ring
    (:class:`fedhh.rpc.aggregator_wire.RequestEncoder`). Immutable; equal to the tuple of its
    items."""

    __slots__ = ("_ring", "_skip", "_start", "_stop")

    def __init__(self, ring: tuple[T, ...], start: int, stop: int,
                 skip: int | None = None) -> None:
        size = len(ring)
        if not 0 <= start <= stop <= start + size or start > size:
            raise ValueError(f"[{start}, {stop}) is not a run of a ring of {size}")
        if skip is not None:  # (an index of ring: the run holds it on this lap or the next)
            at = skip if start <= skip < stop else skip + size
            if not 0 <= skip < size or not start <= at < stop:
                raise ValueError(f"ring item {skip} is not in the run [{start}, {stop})")
            skip = at
        self._ring, self._start, self._stop, self._skip = ring, start, stop, skip

    @property
    def ring(self) -> tuple[T, ...]:
        return self._ring

    def spans(self) -> list[tuple[int, int]]:
        """The run as ranges of ``ring``'s indices, in order: without ``skip``, and split
        where it crosses the seam."""
        size = len(self._ring)
        laps = ([(self._start, self._stop)] if self._skip is None else
                [(self._start, self._skip), (self._skip + 1, self._stop)])
        out = []
        for start, stop in laps:
            if stop <= size:
                out.append((start, stop))
            elif start >= size:
                out.append((start - size, stop - size))
            else:
                out += ((start, size), (0, stop - size))
        return out

    def __len__(self) -> int:
        return self._stop - self._start - (self._skip is not None)

    def _at(self, i: int) -> T:
        at = self._start + i
        if self._skip is not None and at >= self._skip:
            at += 1
        return self._ring[at % len(self._ring)]

    def __iter__(self) -> Iterator[T]:
        ring = self._ring
        for start, stop in self.spans():
            yield from ring[start:stop]

    def __repr__(self) -> str:
        return f"RingRun({list(self)})"


@dataclass(frozen=True)
class ShareKeysRequest:
    """Stage 1, server -> device: the advertised entries of the device and its live neighbours.

    With device_auth, ``range_proof`` is the one Merkle multiproof that every entry's keys
    (its admission's identity key, c_pk and s_pk) are the committed ones
    (:func:`fedhh.secagg.config.verify_members`); the entries' own admission proofs are not
    read (on the wire they are left out)."""

    session_id: bytes
    device_id: int
    roster: tuple[AdvertiseKeys, ...] | RingRun[AdvertiseKeys]
    range_proof: bytes = b""


@dataclass(frozen=True, slots=True)
class EncryptedShare:
    """One AES-256-GCM ciphertext of (src, dst, b-share, s-share) from ``src`` to ``dst``."""

    src: int
    dst: int
    ciphertext: bytes


class _Packed(_TupleLike[T]):
    """A sequence of values of ``width`` bytes each, one per id in ``_ids``, held as the ids and
    one bytes object of the values in the ids' order (an object per value, ~k per device,
    made a worker's garbage collector walk hundreds of thousands of them and its parsing
    make them one by one). Immutable; equal to the tuple of its items."""

    __slots__ = ("_blob", "_ids", "_width")

    def __init__(self, ids: tuple[int, ...], blob: bytes, width: int) -> None:
        if len(blob) != len(ids) * width:
            raise ValueError(f"{len(ids)} values need {len(ids) * width} bytes, got "
                             f"{len(blob)}")
        self._ids, self._blob, self._width = ids, blob, width

    @property
    def blob(self) -> bytes:
        """The values, one after another."""
        return self._blob

    @property
    def width(self) -> int:
        return self._width

    def entries(self) -> Iterator[tuple[int, bytes]]:
        """(id, value) pairs, in order."""
        w, blob = self._width, self._blob
        return zip(self._ids, (blob[i:i + w] for i in range(0, len(blob), w)), strict=True)

    @abstractmethod
    def _item(self, other: int, value: bytes) -> T:
        """The item of ``other``'s id and its value (a subclass says what an item is)."""

    def _key(self) -> tuple[object, ...]:
        return (self._ids, self._blob)

    def __len__(self) -> int:
        return len(self._ids)

    def _at(self, i: int) -> T:
        w = self._width
        return self._item(self._ids[i], self._blob[i * w:(i + 1) * w])

    def __iter__(self) -> Iterator[T]:
        return (self._item(other, value) for other, value in self.entries())

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self):
            return self._key() == other._key()
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    __hash__ = _TupleLike.__hash__


class ShareBundle(_Packed[EncryptedShare]):
    """Ciphertexts between one device and several: those addressed to ``dst`` by
    ``senders`` (``ShareBundle(dst, senders, ...)``: the server routes every share of a stage
    this way), or those ``src`` sends to ``recipients`` (:meth:`sent_by`: a worker takes a
    device's shares off the session stream this way). A sequence of EncryptedShare."""

    __slots__ = ("_device", "_sent")

    def __init__(self, dst: int, srcs: tuple[int, ...], blob: bytes, width: int) -> None:
        super().__init__(srcs, blob, width)
        self._device, self._sent = dst, False

    @classmethod
    def sent_by(cls, src: int, dsts: tuple[int, ...], blob: bytes, width: int) -> ShareBundle:
        """The ciphertexts ``src`` sends to ``dsts`` (ValueError unless ``blob`` holds
        ``width`` bytes for each)."""
        bundle = cls(src, dsts, blob, width)
        bundle._sent = True
        return bundle

    @property
    def src(self) -> int | None:
        """The sender of every share (None: they are addressed to ``dst`` by ``senders``)."""
        return self._device if self._sent else None

    @property
    def dst(self) -> int | None:
        """The recipient of every share (None: ``src`` sends them to ``recipients``)."""
        return None if self._sent else self._device

    @property
    def senders(self) -> tuple[int, ...]:
        """The senders' ids, in order."""
        return (self._device,) * len(self._ids) if self._sent else self._ids

    @property
    def recipients(self) -> tuple[int, ...]:
        """The recipients' ids, in order."""
        return self._ids if self._sent else (self._device,) * len(self._ids)

    def _item(self, other: int, value: bytes) -> EncryptedShare:
        if self._sent:
            return EncryptedShare(self._device, other, value)
        return EncryptedShare(other, self._device, value)

    def _key(self) -> tuple[object, ...]:
        return (self._sent, self._device, *super()._key())

    def __repr__(self) -> str:
        if self._sent:
            return f"ShareBundle.sent_by({self._device}, recipients={self._ids})"
        return f"ShareBundle(dst={self._device}, senders={self._ids})"


class OwnerShares(_Packed[tuple[int, bytes]]):
    """A list of an unmask response, packed: (owner, share value) pairs as the owners' ids
    and their values one after another (``width`` bytes each), as a worker takes them off the
    session stream. A sequence of (owner, value) pairs."""

    __slots__ = ()

    @property
    def owners(self) -> tuple[int, ...]:
        return self._ids

    def _item(self, other: int, value: bytes) -> tuple[int, bytes]:
        return (other, value)

    def __repr__(self) -> str:
        return f"OwnerShares(owners={self._ids})"


@dataclass(frozen=True)
class ShareKeysResponse:
    """Stage 1, device -> server: one ciphertext per roster neighbour (a tuple, or a
    ShareBundle the device sends), and a commitment to b_u."""

    session_id: bytes
    device_id: int
    shares: tuple[EncryptedShare, ...] | ShareBundle
    b_commitment: bytes


@dataclass(frozen=True)
class MaskedInputRequest:
    """Stage 2, server -> device: the ciphertexts sent to the device by surviving neighbours
    (a tuple, or the server's ShareBundle of them)."""

    session_id: bytes
    device_id: int
    shares: tuple[EncryptedShare, ...] | ShareBundle


@dataclass(frozen=True, eq=False)
class MaskedInput:
    """Stage 2, device -> server: y_u, a vector of ``dimension`` little-endian uint16/uint32."""

    session_id: bytes
    device_id: int
    vector: np.ndarray

    def vector_bytes(self) -> bytes:
        """The wire form of the vector (little-endian)."""
        return self.vector.tobytes()

    @classmethod
    def from_wire(cls, session_id: bytes, device_id: int, data: bytes,
                  modulus_bits: int) -> MaskedInput:
        """Wrap received little-endian bytes without copying.

        Raises :class:`ProtocolViolation` (WRONG_LENGTH) if ``data`` is not a whole number of
        elements; the server checks the element count against the round's dimension.
        """
        dtype = np.dtype("<u2") if modulus_bits == 16 else np.dtype("<u4")
        if len(data) % dtype.itemsize:
            raise ProtocolViolation(Violation.WRONG_LENGTH,
                                    f"{len(data)} bytes is not a whole number of {dtype} values")
        return cls(session_id, device_id, np.frombuffer(data, dtype=dtype))


@dataclass(frozen=True)
class ConsistencyRequest:
    """Stage 3 (optional), server -> device: U3, the ids whose masked inputs are in the sum."""

    session_id: bytes
    device_id: int
    survivors: tuple[int, ...]


@dataclass(frozen=True)
class ConsistencyResponse:
    """Stage 3 (optional), device -> server: identity-key signature over the survivor set."""

    session_id: bytes
    device_id: int
    signature: bytes


@dataclass(frozen=True)
class UnmaskRequest:
    """Stage 4, server -> device: which mask partners survived (alive) and which dropped.

    With the consistency check, ``signatures`` holds (neighbour id, signature) pairs over the
    survivor set from stage 3, from the device's neighbours in U3.
    """

    session_id: bytes
    device_id: int
    alive: tuple[int, ...]
    dropped: tuple[int, ...]
    signatures: tuple[tuple[int, bytes], ...] | RingRun[tuple[int, bytes]] = ()


@dataclass(frozen=True)
class UnmaskResponse:
    """Stage 4, device -> server: b-shares of alive partners, s-shares of dropped ones.

    Each entry is (owner device id, 33-byte share value); the share's x is the sender's id.
    A list is a tuple, or the OwnerShares a worker takes off the session stream.
    """

    session_id: bytes
    device_id: int
    b_shares: tuple[tuple[int, bytes], ...] | OwnerShares
    s_shares: tuple[tuple[int, bytes], ...] | OwnerShares


@dataclass(frozen=True)
class ReleaseEvidence:
    """The proof of contributors that travels with a released sum, ahead of it.

    ``survivors`` is U3 (increasing ids), ``signatures`` the (device id, identity-key signature
    over ``consistency_transcript(session_id, id, survivors_digest(U3))``) pairs the aggregator
    collected in the consistency check, ``num_contributors`` the count it claims. Nothing here is
    trusted: :func:`fedhh.secagg.verify_release` counts the signatures that verify.
    """

    survivors: tuple[int, ...]
    signatures: tuple[tuple[int, bytes], ...]
    num_contributors: int


@dataclass(frozen=True, eq=False)
class AggregateResult:
    """What the aggregator releases: the sum over U3 (exact, it cannot wrap), |U3|, and the
    evidence of who contributed (U3 and, with the consistency check, each survivor's signature
    over it)."""

    session_id: bytes
    round_id: bytes
    total: np.ndarray
    num_contributors: int
    survivors: tuple[int, ...] = ()
    signatures: tuple[tuple[int, bytes], ...] = ()

    @property
    def evidence(self) -> ReleaseEvidence:
        return ReleaseEvidence(self.survivors, self.signatures, self.num_contributors)


DeviceMessage = (AdvertiseKeys | ShareKeysResponse | MaskedInput | ConsistencyResponse
                 | UnmaskResponse)
ServerMessage = ShareKeysRequest | MaskedInputRequest | ConsistencyRequest | UnmaskRequest


def survivors_digest(survivors: tuple[int, ...]) -> bytes:
    """SHA-256 of the survivor ids as big-endian uint32 (compute once per round, not per check)."""
    return sha256(np.asarray(survivors, dtype=">u4").tobytes())


def consistency_transcript(session_id: bytes, device_id: int, digest: bytes) -> bytes:
    """What a device's identity key signs in stage 3: its id and the survivor set's digest."""
    return LABELS["consistency"] + session_id + u32(device_id) + digest
