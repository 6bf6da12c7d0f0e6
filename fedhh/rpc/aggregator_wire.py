"""The aggregator's wire form: proto <-> ``fedhh.secagg`` messages, and device call transcripts.

Shared by the service (``fedhh_aggregator``) and its clients (:mod:`fedhh.rpc.aggregator_client`),
so both sides convert and sign the same way. Conversions from the wire never trust the peer:
they only copy fields (a packed list whose bytes do not fit its ids, or one sent in both
forms, is refused here: ProtocolViolation); the state machines validate every value.

Device authentication. The library authenticates stage 0 itself (the coordinator's admission, a
Merkle proof under the signed config's identity root of the advertised keys, which the device
presented at check-in and alone holds the private halves of). Every later device call carries
:class:`DeviceCredentials`: the admission again and the identity key's Ed25519 signature over
:func:`call_transcript` = label || kind || session id || device id || SHA-256 of the call's body
(canonical encodings below; for the masked input, of its header: the declared length and the
vector's SHA-256, so the upload is authenticated before a byte of it is read). So only the
admitted device can submit, or fetch its requests, in its name; a replayed call is an identical
duplicate.

The session stream (``SecureAggregation.Session``) is authenticated once, by its first message:
the admission and the identity key's signature over :func:`session_transcript` = another label
|| session id || device id || the 32 random bytes the aggregator sent first on that stream. The
messages after it are not signed; docs/secagg.md ("The session stream") says why none needs to be.
"""

from __future__ import annotations

import hashlib
import itertools
import struct
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from enum import IntFlag, StrEnum, auto
from typing import Any, TypeVar

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.secagg.config import Admission
from fedhh.secagg.device import SHARE_CIPHERTEXT_BYTES
from fedhh.secagg.errors import ProtocolViolation, Violation
from fedhh.secagg.graph import ROUNDS_REMEMBERED
from fedhh.secagg.messages import (
    AdvertiseKeys,
    ConsistencyRequest,
    ConsistencyResponse,
    EncryptedShare,
    MaskedInputRequest,
    OwnerShares,
    RingRun,
    ServerMessage,
    ShareBundle,
    ShareKeysRequest,
    ShareKeysResponse,
    Stage,
    UnmaskRequest,
    UnmaskResponse,
)
from fedhh.secagg.shamir import SHARE_BYTES
from fedhh.v1 import aggregator_pb2 as pb

T = TypeVar("T")

__all__ = [
    "CHALLENGE_BYTES",
    "CHUNK_BYTES",
    "CONTROL_SERVICE",
    "DEVICE_SERVICE",
    "SESSION_ID_BYTES",
    "CallKind",
    "RequestEncoder",
    "RequestForm",
    "admission_from_pb",
    "admission_to_pb",
    "await_digest",
    "call_transcript",
    "consistency_digest",
    "credentials",
    "evidence_parts",
    "header_digest",
    "keys_from_pb",
    "keys_to_pb",
    "request_from_pb",
    "roster_entry_to_pb",
    "session_open",
    "session_shares",
    "session_transcript",
    "session_unmask",
    "shares_digest",
    "shares_from_pb",
    "shares_to_pb",
    "stage_from_pb",
    "stage_to_pb",
    "unmask_digest",
    "unmask_from_pb",
    "unmask_to_pb",
    "upload_seconds",
]

DEVICE_SERVICE = "fedhh.v1.SecureAggregation"
CONTROL_SERVICE = "fedhh.v1.AggregatorControl"
CHUNK_BYTES = 1 << 20  # the largest vector chunk on the wire, either direction
# An aggregator's defaults for uploads (fedhh_aggregator.rounds.Limits): the next message
# within UPLOAD_IDLE_S, and the whole body at UPLOAD_MIN_RATE bytes/s after that grace. A
# device's call deadline leaves its upload that long (device_client.DeviceSession).
UPLOAD_IDLE_S = 5.0
UPLOAD_MIN_RATE = 64 << 10
SESSION_ID_BYTES = 32
DIGEST_BYTES = 32
EVIDENCE_PART_ENTRIES = 8192  # survivors and signatures per ReleaseEvidencePart (<= 600 KiB)
_CALL_LABEL = b"fedhh/aggregator/v1/call"
_SESSION_LABEL = b"fedhh/aggregator/v1/session"
CHALLENGE_BYTES = 32  # the aggregator's fresh random challenge on each session stream
# The trailing metadata that answers a session stream's unmask shares where the open asked for
# it (SessionOpen.unmask_in_status): "1" accepted, "0" an identical copy already was.
UNMASK_ANSWER_KEY = "fedhh-unmask-accepted"


class CallKind(StrEnum):
    """The device calls that carry :class:`DeviceCredentials` (part of the signed transcript)."""

    AWAIT = "await"
    SHARES = "shares"
    MASKED_INPUT = "masked-input"
    CONSISTENCY = "consistency"
    UNMASK = "unmask"
    DECLINE = "decline"


def _u32(value: int) -> bytes:
    return struct.pack(">I", value & 0xFFFFFFFF)


def _field(data: bytes) -> bytes:
    return _u32(len(data)) + data


# -- stages and admissions ---------------------------------------------------------------------

def stage_to_pb(stage: Stage) -> pb.SecAggStage:
    return pb.SecAggStage.ValueType(int(stage) + 1)


def stage_from_pb(value: int) -> Stage | None:
    """The library stage, or None for SECAGG_STAGE_UNSPECIFIED or an unknown value."""
    try:
        return Stage(int(value) - 1)
    except ValueError:
        return None


def admission_to_pb(admission: Admission) -> pb.SecAggAdmission:
    return pb.SecAggAdmission(device_id=admission.device_id, identity_key=admission.identity_key,
                              c_pk=admission.c_pk, s_pk=admission.s_pk, proof=admission.proof)


def admission_from_pb(message: pb.SecAggAdmission) -> Admission:
    return Admission(int(message.device_id), bytes(message.identity_key), bytes(message.c_pk),
                     bytes(message.s_pk), bytes(message.proof))


# -- call transcripts ----------------------------------------------------------------------------

def call_transcript(kind: CallKind, session_id: bytes, device_id: int, body_digest: bytes) -> bytes:
    """What a device's identity key signs for one call."""
    return (_CALL_LABEL + _field(kind.value.encode()) + _field(session_id) + _u32(device_id)
            + _field(body_digest))


def unmask_answer_metadata(accepted: bool) -> tuple[tuple[str, str]]:
    """The stream's trailing metadata answering its unmask shares (``UNMASK_ANSWER_KEY``)."""
    return ((UNMASK_ANSWER_KEY, "1" if accepted else "0"),)


def unmask_answer_from(metadata: Any) -> bool | None:
    """The answer in a stream's trailing metadata (None: there is none)."""
    for key, value in metadata or ():
        if key == UNMASK_ANSWER_KEY and value in ("0", "1"):
            return value == "1"
    return None


def session_transcript(session_id: bytes, device_id: int, challenge: bytes) -> bytes:
    """What a device's identity key signs to open a session stream: the aggregator's fresh
    ``challenge`` makes the signature good for that one stream. (Another label than
    :func:`call_transcript`'s, and every field length-prefixed, so no signature is both.)"""
    return _SESSION_LABEL + _field(session_id) + _u32(device_id) + _field(challenge)


def session_open(identity_key: Ed25519PrivateKey, admission: Admission, session_id: bytes,
                 challenge: bytes) -> pb.SessionOpen:
    """The first message of a session stream, signed for its ``challenge``."""
    transcript = session_transcript(session_id, admission.device_id, challenge)
    return pb.SessionOpen(session_id=session_id, admission=admission_to_pb(admission),
                          signature=identity_key.sign(transcript))


def await_digest(stage: Stage) -> bytes:
    return hashlib.sha256(_u32(int(stage))).digest()


def shares_digest(message: ShareKeysResponse) -> bytes:
    h = hashlib.sha256(_field(message.b_commitment) + _u32(len(message.shares)))
    for share in message.shares:
        h.update(_u32(share.src) + _u32(share.dst) + _field(share.ciphertext))
    return h.digest()


def header_digest(total_bytes: int, vector_sha256: bytes) -> bytes:
    """The signed body of a masked-input header: its declared length and the vector's hash."""
    return hashlib.sha256(struct.pack(">Q", total_bytes) + _field(vector_sha256)).digest()


def consistency_digest(message: ConsistencyResponse) -> bytes:
    return hashlib.sha256(_field(message.signature)).digest()


def unmask_digest(message: UnmaskResponse) -> bytes:
    h = hashlib.sha256()
    for entries in (message.b_shares, message.s_shares):
        h.update(_u32(len(entries)))
        for owner, share in entries:
            h.update(_u32(owner) + _field(share))
    return h.digest()


def credentials(identity_key: Ed25519PrivateKey, admission: Admission, kind: CallKind,
                session_id: bytes, body_digest: bytes) -> pb.DeviceCredentials:
    """Sign one call as the admitted device."""
    transcript = call_transcript(kind, session_id, admission.device_id, body_digest)
    return pb.DeviceCredentials(admission=admission_to_pb(admission),
                                signature=identity_key.sign(transcript))


# -- stage 0 -------------------------------------------------------------------------------------

def keys_to_pb(message: AdvertiseKeys) -> pb.DeviceKeys:
    out = pb.DeviceKeys(device_id=message.device_id, c_pk=message.c_pk, s_pk=message.s_pk)
    if message.admission is not None:
        out.admission.CopyFrom(admission_to_pb(message.admission))
    return out


def keys_from_pb(session_id: bytes, message: pb.DeviceKeys) -> AdvertiseKeys:
    admission = admission_from_pb(message.admission) if message.HasField("admission") else None
    return AdvertiseKeys(session_id, int(message.device_id), bytes(message.c_pk),
                         bytes(message.s_pk), admission)


# -- server -> device requests -------------------------------------------------------------------

def _add_shares(field: Any, shares: tuple[EncryptedShare, ...] | ShareBundle) -> None:
    # (``add`` on the repeated field builds each entry in place: a list of new messages to
    # extend it with took twice as long, and a device or a worker does this for k shares.)
    add = field.add
    for s in shares:
        add(src=s.src, dst=s.dst, ciphertext=s.ciphertext)


def _shares_from_pb(shares: Iterable[pb.EncryptedShare]) -> tuple[EncryptedShare, ...]:
    # (protobuf's uint32 and bytes fields read as int and bytes already)
    return tuple(EncryptedShare(s.src, s.dst, s.ciphertext) for s in shares)


def _routed_from_pb(device_id: int, message: pb.MaskedInputRequest
                    ) -> tuple[EncryptedShare, ...] | ShareBundle:
    """The shares a masked-input request routes to ``device_id``, one by one or packed. A
    packed form that does not hold one ciphertext per sender, or comes beside the entries,
    comes back as entries cut from it, which the device's checks of each share refuse."""
    srcs, blob = tuple(message.srcs), message.ciphertexts
    if not srcs and not blob:
        return _shares_from_pb(message.shares)
    width = SHARE_CIPHERTEXT_BYTES
    if not message.shares and len(blob) == len(srcs) * width:
        return ShareBundle(device_id, srcs, blob, width)
    cuts = [blob[i * width:(i + 1) * width] for i in range(len(srcs))]
    if not cuts or len(blob) > len(srcs) * width:  # (the extra bytes: a sender 0's share)
        srcs, cuts = (*srcs, 0), [*cuts, blob[len(srcs) * width:]]
    return _shares_from_pb(message.shares) + tuple(
        EncryptedShare(src, device_id, cut) for src, cut in zip(srcs, cuts, strict=True))


def _varint(value: int) -> bytes:
    """``value`` (>= 0) as protobuf writes it. The lengths of a session's events and requests
    (up to a few hundred kilobytes) take two or three bytes, made here in one call: a loop
    appending to a bytearray made five (a worker wrote ~18 of these a device)."""
    if value < 0x80:
        return _SMALL_VARINTS[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0x200000:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_VARINTS = tuple(bytes((v,)) for v in range(0x80))


def _delimited(tag: bytes, data: bytes) -> bytes:
    return tag + _varint(len(data)) + data


# A masked vector's first field, the header (MaskedVector.header = 1, length-delimited).
_HEADER_TAG = 0x0A
_MAX_VARINT_BYTES = 10


def masked_vector_header(prefix: bytes, max_header_bytes: int
                         ) -> tuple[pb.MaskedInputHeader, int] | None:
    """The header of a ``MaskedVector`` from the first bytes of its encoding, with its size:
    None while ``prefix`` stops before the header's end. A masked vector's header must come
    first, as every protobuf encoder writes fields in their numbers' order, and be at most
    ``max_header_bytes`` long; else ProtocolViolation (MALFORMED), as for a header that does
    not parse. So a large upload's caller is known from its first bytes."""
    if not prefix:
        return None
    if prefix[0] != _HEADER_TAG:
        raise ProtocolViolation(Violation.MALFORMED, "a masked vector's header must come first")
    length = shift = 0
    for end in range(1, min(len(prefix), 1 + _MAX_VARINT_BYTES)):
        byte = prefix[end]
        length |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    else:
        if len(prefix) <= _MAX_VARINT_BYTES:
            return None  # (the length's varint goes on)
        raise ProtocolViolation(Violation.MALFORMED, "a masked vector's header length is no "
                                                     "varint")
    if length > max_header_bytes:
        raise ProtocolViolation(Violation.MALFORMED, f"a masked vector's header is at most "
                                                     f"{max_header_bytes} bytes, got {length}")
    start = end + 1
    if len(prefix) < start + length:
        return None
    try:
        header = pb.MaskedInputHeader.FromString(prefix[start:start + length])
    except Exception as error:  # protobuf's DecodeError
        raise ProtocolViolation(Violation.MALFORMED, "a masked vector's header does not "
                                f"parse: {' '.join(str(error).split())[:200]}") from None
    return header, length


class _IdVarints(dict[int, bytes]):
    """Device ids, encoded, made on first use: each unmask request lists a device's ~k
    neighbours, and encoding an id above 127 took a microsecond where a lookup takes a tenth
    of that. A dict's lookup, mapped in C, takes half the time of an lru_cache's call (3.4
    against 6.3 us for 88 ids). The first 65,536 ids met are kept (~10 MiB at most: a shard
    of that many devices), any others encoded each time: with 16,384 kept, a shard of 25,000
    (the load test's at 50,000 devices) encoded a third of its ids anew in every request,
    17.6 us per list of 88 against 6.6 with all kept."""

    HELD = 1 << 16

    def __missing__(self, value: int) -> bytes:
        encoded = _varint(value)
        if len(self) < self.HELD:
            self[value] = encoded
        return encoded


_ID_VARINTS = _IdVarints()


def _packed(tag: bytes, values: Iterable[int]) -> bytes:
    # (proto3 packs repeated scalars and omits an empty list)
    body = b"".join(map(_ID_VARINTS.__getitem__, values))
    return _delimited(tag, body) if body else b""


def _routed_shares(bundle: ShareBundle, dst: int) -> bytes:
    """The ``shares`` fields of a MaskedInputRequest carrying ``bundle`` (k ciphertexts of one
    width, routed to the device ``dst`` > 0), as protobuf writes them: per share the entry's
    key and length, its ``src``, ``dst`` and ``ciphertext`` in field order. Every step is a C
    loop (a cached head per sender, slices of the blob, one join): a protobuf entry built per
    share cost a worker ~75 us per request at k = 83 on a 2.1 GHz core, this ~29."""
    width, blob = bundle.width, bundle.blob
    rest = b"\x10" + _varint(dst) + b"\x1a" + _varint(width)  # dst, ciphertext's key
    heads = _SHARE_HEADS.get(len(rest) + width)
    if heads is None or len(heads) > 1 << 17:
        heads = _SHARE_HEADS[len(rest) + width] = _ShareHeads(len(rest) + width)
    ciphertexts = map(blob.__getitem__, map(slice, range(0, len(blob), width),
                                            range(width, len(blob) + width, width)))
    return b"".join(itertools.chain.from_iterable(
        zip(map(heads.__getitem__, bundle.senders), itertools.repeat(rest), ciphertexts)))


class _ShareHeads(dict[int, bytes]):
    """sender id -> its EncryptedShare entry's key, length and ``src`` field (proto3 leaves
    out src 0), for entries whose other fields take ``rest`` bytes; made on first use (a
    dict's lookup of a known id stays in C, where an lru_cache call built a key per share)."""

    def __init__(self, rest: int) -> None:
        super().__init__()
        self._rest = rest

    def __missing__(self, src: int) -> bytes:
        body = b"\x08" + _varint(src) if src else b""
        head = self[src] = b"\x0a" + _varint(len(body) + self._rest) + body
        return head


_SHARE_HEADS: dict[int, _ShareHeads] = {}


# Field keys of the messages below, as protobuf writes them (field number << 3 | wire type).
_READY = b"\x08" + _varint(pb.AWAIT_STATUS_READY)  # AwaitStageResponse.status
_SHARE_KEYS, _MASKED_INPUT, _CONSISTENCY, _UNMASK = b"\x12", b"\x1a", b"\x22", b"\x2a"
_FIRST = b"\x0a"  # field 1 of ConsistencyRequest, UnmaskRequest
# field 2: ShareKeysRequest.entries, UnmaskRequest.dropped, ConsistencyRequest.survivor_bits,
# SessionEvent.next
_SECOND = b"\x12"
_RANGE_PROOF = b"\x1a"  # ShareKeysRequest.range_proof
_SIGNATURES = b"\x1a"  # UnmaskRequest.signatures
_CIPHERTEXTS = b"\x1a"  # MaskedInputRequest.ciphertexts
_EVENT_STAGE = b"\x20"  # SessionEvent.stage


class RequestForm(IntFlag):
    """How a session's device takes its pushed requests (the flags of its ``SessionOpen``);
    a device that said neither, or calls ``AwaitStage``, gets them as protobuf lists them."""

    PLAIN = 0
    PACKED_SHARES = auto()  # ``packed_requests``: a masked-input request's shares packed
    SURVIVOR_BITS = auto()  # ``survivor_bits``: U3 as a bitmap

    @classmethod
    def of(cls, opened: pb.SessionOpen) -> RequestForm:
        """The form a device's ``SessionOpen`` asks for (looked up: an IntFlag's ``|`` runs
        enum's Python, 1.5 us of every session's open where the lookup takes 0.2)."""
        return _FORMS[bool(opened.packed_requests), bool(opened.survivor_bits)]


_FORMS = {(packed, bits): RequestForm((RequestForm.PACKED_SHARES if packed else 0)
                                      | (RequestForm.SURVIVOR_BITS if bits else 0))
          for packed in (False, True) for bits in (False, True)}


def _survivor_bits(survivors: tuple[int, ...]) -> bytes:
    """U3 (ids >= 1) as ``ConsistencyRequest.survivor_bits``: bit i - 1 for device i, least
    significant bit first, up to the byte of the largest id. At 90% survivors the ids take
    ~2.1 bytes each as varints, the bitmap 0.14 a survivor: every device of a shard of 25,000
    gets 3 KB where the list took 53 KB, which its worker copied, encrypted and wrote to it."""
    if not survivors:
        return b""
    ids = np.asarray(survivors, dtype=np.int64)
    bits = np.zeros(int(ids.max()), dtype=bool)
    bits[ids - 1] = True
    return np.packbits(bits, bitorder="little").tobytes()


def _bit_ids(bits: bytes) -> tuple[int, ...]:
    """The ids whose bits are set in ``survivor_bits``' form, increasing."""
    set_bits = np.flatnonzero(np.unpackbits(np.frombuffer(bits, np.uint8), bitorder="little"))
    return tuple((set_bits + 1).tolist())


class _EncodedRing:
    """A ring's items encoded once, one after another in ring order, and sent as the runs
    of it that the requests are (:class:`fedhh.secagg.messages.RingRun`)."""

    __slots__ = ("_body", "_offsets", "ring")

    def __init__(self, ring: tuple[Any, ...], encoded: list[bytes]) -> None:
        self.ring = ring
        self._body = memoryview(b"".join(encoded))
        self._offsets = (0, *itertools.accumulate(map(len, encoded)))

    def slices(self, run: RingRun[Any]) -> list[memoryview]:
        """``run``'s encoded items: a slice for each of its spans."""
        body, offsets = self._body, self._offsets
        return [body[offsets[start]:offsets[stop]] for start, stop in run.spans()]


class RequestEncoder:
    """One round's server requests as the wire bytes of READY ``AwaitStageResponse`` answers.

    A device's request repeats what its neighbours' requests hold: its roster entry reaches all
    its k neighbours, its consistency signature too, and every device gets the same survivor
    set U3. Copying those into a new message per device cost a worker about a third of a
    millisecond per device at k ~ 100 (protobuf copies each nested entry); here each is encoded
    once per round and a request is the concatenation of its parts' bytes: the protobuf
    encoding of the same message, fields in number order and proto3 defaults left out, equal
    to what ``SerializeToString`` writes (tests/unit/rpc/test_request_encoder.py). The
    ciphertexts, each sent once, are written by protobuf itself (faster than Python here).
    Entries are keyed by device id: one encoder serves one round, where each device has one
    entry and one signature.
    """

    def __init__(self) -> None:
        self._entries: dict[int, bytes] = {}
        self._signatures: dict[int, bytes] = {}
        # the rings the requests' runs are of (rosters, consistency signatures), encoded
        self._roster_ring = self._signature_ring = _EncodedRing((), [])
        # U3, and its encoded field in each form asked for
        self._survivors: tuple[tuple[int, ...], dict[bool, bytes]] = ((), {})

    def ready(self, request: ServerMessage) -> bytes:
        """The encoded ``AwaitStageResponse`` (status READY) carrying ``request``."""
        parts: list[bytes | memoryview] = [_READY, b"", b""]
        parts[1], size = self._append_body(request, parts, RequestForm.PLAIN)
        parts[2] = _varint(size)
        return b"".join(parts)

    def event(self, stage: Stage, request: ServerMessage,
              form: RequestForm = RequestForm.PLAIN) -> bytes:
        """The encoded ``SessionEvent`` for ``stage`` whose ``next`` is :meth:`ready`'s answer,
        in the ``form`` the device said it takes (:class:`RequestForm`).

        Its bytes are joined once: joining the request, then the answer around it, then the
        event around that copied tens of kilobytes three times per device and stage, each copy
        a fresh allocation from the C heap, whose search for free memory grows with a worker's
        heap (docs/benchmarks.md, "What grows with n at a worker")."""
        parts: list[bytes | memoryview] = [_SECOND, b"", _READY, b"", b""]
        parts[3], size = self._append_body(request, parts, form)
        parts[4] = _varint(size)
        parts[1] = _varint(len(_READY) + len(parts[3]) + len(parts[4]) + size)
        parts += (_EVENT_STAGE, _varint(stage_to_pb(stage)))
        return b"".join(parts)

    def _append_body(self, request: ServerMessage, parts: list[bytes | memoryview],
                     form: RequestForm) -> tuple[bytes, int]:
        """Append ``request``'s encoded fields to ``parts``; returns its field key in the
        answer and the fields' size."""
        start = len(parts)
        if isinstance(request, ShareKeysRequest):
            tag, roster = _SHARE_KEYS, request.roster
            if isinstance(roster, RingRun):
                if self._roster_ring.ring is not roster.ring:
                    self._roster_ring = _EncodedRing(roster.ring,
                                                     list(map(_roster_entry, roster.ring)))
                parts += self._roster_ring.slices(roster)
            else:
                entries = self._entries
                for e in roster:
                    encoded = entries.get(e.device_id)
                    if encoded is None:
                        encoded = entries[e.device_id] = _roster_entry(e)
                    parts.append(encoded)
            if request.range_proof:
                parts.append(_delimited(_RANGE_PROOF, request.range_proof))
        elif isinstance(request, MaskedInputRequest):
            tag, routed = _MASKED_INPUT, request.shares
            if RequestForm.PACKED_SHARES in form and isinstance(routed, ShareBundle) \
                    and routed.dst:
                if routed.blob:  # (the senders, then their ciphertexts: two fields, no copy)
                    parts += (_packed(_SECOND, routed.senders), _CIPHERTEXTS,
                              _varint(len(routed.blob)), routed.blob)
            elif isinstance(routed, ShareBundle) and (dst := routed.dst) and routed.width:
                parts.append(_routed_shares(routed, dst))
            else:
                shares = pb.MaskedInputRequest()
                _add_shares(shares.shares, routed)
                parts.append(shares.SerializeToString())
        elif isinstance(request, ConsistencyRequest):
            tag, bits = _CONSISTENCY, RequestForm.SURVIVOR_BITS in form
            survivors, forms = self._survivors
            if survivors is not request.survivors:
                survivors, forms = self._survivors = (request.survivors, {})
            encoded = forms.get(bits)
            if encoded is None:
                if bits:
                    body = _survivor_bits(survivors)
                    encoded = _delimited(_SECOND, body) if body else b""
                else:
                    encoded = _packed(_FIRST, survivors)
                forms[bits] = encoded
            parts.append(encoded)
        elif isinstance(request, UnmaskRequest):
            tag, signatures = _UNMASK, self._signatures
            parts += (_packed(_FIRST, request.alive), _packed(_SECOND, request.dropped))
            pairs = request.signatures
            if isinstance(pairs, RingRun):
                if self._signature_ring.ring is not pairs.ring:
                    self._signature_ring = _EncodedRing(pairs.ring, list(
                        itertools.starmap(_signature_entry, pairs.ring)))
                parts += self._signature_ring.slices(pairs)
            else:
                for i, signature in pairs:
                    encoded = signatures.get(i)
                    if encoded is None:
                        encoded = signatures[i] = _signature_entry(i, signature)
                    parts.append(encoded)
        else:  # pragma: no cover
            raise TypeError(f"not a server request: {type(request).__name__}")
        return tag, sum(map(len, parts[start:]))


def roster_entry_to_pb(entry: AdvertiseKeys) -> pb.RosterEntry:
    """``entry`` as a roster entry: its id and keys, without its admission's proof (the
    request's one range proof covers every entry)."""
    out = pb.RosterEntry(device_id=entry.device_id, c_pk=entry.c_pk, s_pk=entry.s_pk)
    if entry.admission is not None:
        out.identity_key = entry.admission.identity_key
    return out


def _roster_entry(entry: AdvertiseKeys) -> bytes:
    """``entry`` as a ``ShareKeysRequest.entries`` field."""
    return _delimited(_SECOND, roster_entry_to_pb(entry).SerializeToString())


def _from_roster_entry(session_id: bytes, entry: pb.RosterEntry) -> AdvertiseKeys:
    """A ``ShareKeysRequest.entries`` field as the library's entry: with an identity key, an
    admission of that key and the entry's round keys, without a proof of its own."""
    device_id, c_pk, s_pk = int(entry.device_id), bytes(entry.c_pk), bytes(entry.s_pk)
    admission = (Admission(device_id, bytes(entry.identity_key), c_pk, s_pk, b"")
                 if entry.identity_key else None)
    return AdvertiseKeys(session_id, device_id, c_pk, s_pk, admission)


def _signature_entry(device_id: int, signature: bytes) -> bytes:
    """A consistency signature as an ``UnmaskRequest.signatures`` field."""
    return _delimited(_SIGNATURES, pb.NeighbourSignature(
        device_id=device_id, signature=signature).SerializeToString())


def request_from_pb(session_id: bytes, device_id: int, message: pb.AwaitStageResponse
                    ) -> ServerMessage | None:
    """The library request in a READY answer (None if the answer holds none)."""
    which = message.WhichOneof("request")
    if which == "share_keys":
        keys = message.share_keys
        return ShareKeysRequest(session_id, device_id, tuple(
            _shared_entry(session_id, e) for e in keys.entries), bytes(keys.range_proof))
    if which == "masked_input":
        return MaskedInputRequest(session_id, device_id,
                                  _routed_from_pb(device_id, message.masked_input))
    if which == "consistency_check":
        return ConsistencyRequest(session_id, device_id,
                                  _shared_survivors(message.consistency_check))
    if which == "unmask":
        u = message.unmask
        return UnmaskRequest(session_id, device_id, tuple(int(i) for i in u.alive),
                             tuple(int(i) for i in u.dropped),
                             tuple((int(s.device_id), bytes(s.signature)) for s in u.signatures))
    return None


class _Shared:
    """One object for equal decoded values: the last ``size`` distinct ones are remembered.

    Every device of a round gets the same survivor set U3 (thousands of ids, 36 bytes each as
    a tuple of ints), and each device's roster entry (its id and keys
    decoded) reaches all its k neighbours. A process hosting thousands of simulated devices
    kept a copy of each per device: at 50,000 devices in 8 processes each process grew to
    2.6 GB in the consistency check and the OOM killer ended one or two of them, whose devices
    fell silent. The decoded values are immutable, so sharing them is safe.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._values: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        value = self._values.get(key)
        if value is None:
            value = make()
            self._values[key] = value
            if len(self._values) > self._size:
                self._values.popitem(last=False)
        else:
            self._values.move_to_end(key)
        return value


_SURVIVOR_SETS = _Shared(ROUNDS_REMEMBERED)
# (shards are drawn at random, so a load-test process meets every device's entry: 2^16 held
# 50,000 devices' but not 100,000's; 2^18, ~1.3 KB each, bound a process's at ~340 MB)
_ROSTER_ENTRIES = _Shared(1 << 18)


def _shared_survivors(message: pb.ConsistencyRequest) -> tuple[int, ...]:
    # Keyed by the encoded set, which equal sets share: decoding thousands of ids into a
    # tuple for every device only to find the tuple already known cost a device more than
    # signing the set. (Both forms at once: the ids, then the bitmap's.)
    return _SURVIVOR_SETS.get(message.SerializeToString(), lambda: tuple(
        message.survivors) + _bit_ids(message.survivor_bits))


def _shared_entry(session_id: bytes, entry: pb.RosterEntry) -> AdvertiseKeys:
    return _ROSTER_ENTRIES.get((session_id, entry.SerializeToString(deterministic=True)),
                               lambda: _from_roster_entry(session_id, entry))


# -- device -> server submissions ----------------------------------------------------------------

def shares_to_pb(message: ShareKeysResponse, creds: pb.DeviceCredentials
                 ) -> pb.SubmitSharesRequest:
    out = pb.SubmitSharesRequest(session_id=message.session_id, credentials=creds,
                                 b_commitment=message.b_commitment)
    _add_shares(out.shares, message.shares)
    return out


def shares_from_pb(device_id: int, message: pb.SubmitSharesRequest | pb.SessionShares,
                   session_id: bytes | None = None) -> ShareKeysResponse:
    """``session_id``: the stream's, for a SessionShares (which names none, and may carry the
    shares packed: then they are taken as one ShareBundle sent by ``device_id``)."""
    if session_id is None:
        session_id = bytes(message.session_id)
    shares: tuple[EncryptedShare, ...] | ShareBundle = _shares_from_pb(message.shares)
    if isinstance(message, pb.SessionShares) and (message.dsts or message.ciphertexts):
        if shares:
            raise ProtocolViolation(Violation.MALFORMED, "shares come packed or one message "
                                    "each, not both")
        try:
            shares = ShareBundle.sent_by(device_id, tuple(message.dsts),
                                         bytes(message.ciphertexts), SHARE_CIPHERTEXT_BYTES)
        except ValueError:
            raise ProtocolViolation(Violation.WRONG_LENGTH, f"packed shares hold "
                                    f"{SHARE_CIPHERTEXT_BYTES} bytes of ciphertext per "
                                    f"recipient") from None
    return ShareKeysResponse(session_id, device_id, shares, bytes(message.b_commitment))


# -- device -> server on the session stream ----------------------------------------------------

def session_shares(message: ShareKeysResponse, packed: bool) -> pb.SessionMessage:
    """The shares message; ``packed``: in the packed form (where the challenge offered it)."""
    out = pb.SessionMessage()
    out.shares.b_commitment = message.b_commitment
    shares = message.shares
    if packed and isinstance(shares, ShareBundle) and shares.src is not None:
        out.shares.dsts.extend(shares.recipients)  # (the same, as the device packed them)
        out.shares.ciphertexts = shares.blob
    elif packed:
        out.shares.dsts.extend([s.dst for s in shares])
        out.shares.ciphertexts = b"".join([s.ciphertext for s in shares])
    else:
        _add_shares(out.shares.shares, message.shares)
    return out


def session_unmask(message: UnmaskResponse, packed: bool) -> pb.SessionMessage:
    """The unmask message; ``packed``: in the packed form (where the challenge offered it)."""
    out = pb.SessionMessage()
    if packed:
        unmask = out.unmask
        unmask.b_owners.extend([owner for owner, _ in message.b_shares])
        unmask.b_values = b"".join([share for _, share in message.b_shares])
        unmask.s_owners.extend([owner for owner, _ in message.s_shares])
        unmask.s_values = b"".join([share for _, share in message.s_shares])
    else:
        _add_owner_shares(out.unmask, message)
    out.unmask.SetInParent()  # (present even with both lists empty)
    return out


def _add_owner_shares(out: Any, message: UnmaskResponse) -> None:
    for field, entries in ((out.b_shares, message.b_shares), (out.s_shares, message.s_shares)):
        add = field.add
        for owner, share in entries:
            add(owner=owner, share=share)


def unmask_to_pb(message: UnmaskResponse, creds: pb.DeviceCredentials) -> pb.SubmitUnmaskRequest:
    out = pb.SubmitUnmaskRequest(session_id=message.session_id, credentials=creds)
    _add_owner_shares(out, message)
    return out


def unmask_from_pb(device_id: int, message: pb.SubmitUnmaskRequest | pb.SessionUnmask,
                   session_id: bytes | None = None) -> UnmaskResponse:
    """``session_id``: the stream's, for a SessionUnmask (which names none, and may carry the
    shares packed: then each list is taken as one OwnerShares)."""
    if session_id is None:
        session_id = bytes(message.session_id)
    b_shares: tuple[tuple[int, bytes], ...] | OwnerShares = _owner_shares(message.b_shares)
    s_shares: tuple[tuple[int, bytes], ...] | OwnerShares = _owner_shares(message.s_shares)
    if isinstance(message, pb.SessionUnmask) and (
            message.b_owners or message.b_values or message.s_owners or message.s_values):
        if b_shares or s_shares:
            raise ProtocolViolation(Violation.MALFORMED, "unmask shares come packed or one "
                                    "message each, not both")
        try:
            b_shares = OwnerShares(tuple(message.b_owners), bytes(message.b_values), SHARE_BYTES)
            s_shares = OwnerShares(tuple(message.s_owners), bytes(message.s_values), SHARE_BYTES)
        except ValueError:
            raise ProtocolViolation(Violation.WRONG_LENGTH, f"packed unmask shares hold "
                                    f"{SHARE_BYTES} bytes per owner") from None
    return UnmaskResponse(session_id, device_id, b_shares, s_shares)


def _owner_shares(entries: Iterable[pb.OwnerShare]) -> tuple[tuple[int, bytes], ...]:
    return tuple((int(e.owner), bytes(e.share)) for e in entries)


# -- the release evidence (aggregator -> coordinator) --------------------------------------------

def evidence_parts(survivors: tuple[int, ...], signatures: tuple[tuple[int, bytes], ...]
                   ) -> list[pb.ReleaseEvidencePart]:
    """U3 and the survivors' signatures in parts of at most EVIDENCE_PART_ENTRIES each."""
    parts = []
    step = EVIDENCE_PART_ENTRIES
    for offset in range(0, max(len(survivors), len(signatures)), step):
        parts.append(pb.ReleaseEvidencePart(
            survivors=survivors[offset:offset + step],
            signatures=[pb.SurvivorSignature(device_id=i, signature=sig)
                        for i, sig in signatures[offset:offset + step]]))
    return parts


def upload_seconds(size: int) -> float:
    """How long an aggregator at its default limits may take to read an upload of ``size``
    bytes (UPLOAD_IDLE_S, then UPLOAD_MIN_RATE): what a device's call deadline leaves the body,
    so a slow uplink is cut by the aggregator's rule, not sooner by the device's own deadline."""
    return UPLOAD_IDLE_S + size / UPLOAD_MIN_RATE
