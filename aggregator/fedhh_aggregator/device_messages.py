"""What a device's unary calls and its session stream share: the bound on its share lists,
taking an authenticated device's masked vector into the round, and the wire answer for a
request it awaits."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
from google.protobuf.message import Message

from fedhh.errors import AuthenticationError
from fedhh.rpc.aggregator_wire import DIGEST_BYTES
from fedhh.secagg import MaskedInput, ProtocolViolation, Stage, Violation
from fedhh.secagg.prg import mask_dtype
from fedhh.v1 import aggregator_pb2 as pb
from fedhh_aggregator import metrics
from fedhh_aggregator.errors import EarlierCallOpen, UploadTimeout
from fedhh_aggregator.registry import RoundRegistry
from fedhh_aggregator.rounds import AwaitOutcome, AwaitStatus, Round

_AWAIT_STATUS = {
    AwaitStatus.READY: pb.AWAIT_STATUS_READY,
    AwaitStatus.PENDING: pb.AWAIT_STATUS_PENDING,
    AwaitStatus.NOT_SELECTED: pb.AWAIT_STATUS_NOT_SELECTED,
    AwaitStatus.CLOSED: pb.AWAIT_STATUS_CLOSED,
    AwaitStatus.ABORTED: pb.AWAIT_STATUS_ABORTED,
}


# The repeated fields of a device's shares and unmask shares: one by one, and packed.
_SHARE_ENTRIES = (("shares", "b_shares", "s_shares"), ("dsts", "b_owners", "s_owners"))
# Each message type's fields of each form (a handful of types: those the calls take).
_FORMS: dict[Any, tuple[tuple[str, ...], ...]] = {}


def malformed(detail: str) -> ProtocolViolation:
    """The refusal of a device's message that breaks the wire contract (MALFORMED)."""
    return ProtocolViolation(Violation.MALFORMED, detail)


def check_share_count(round_: Round, message: Message) -> None:
    """Refuse (ProtocolViolation MALFORMED) a shares or unmask-shares message with more
    entries than a device has roster neighbours: k, an arc of k + 1 ring positions of H(k, n)
    (``NeighbourGraph.ring_runs``); its shares go to them and its unmask shares name some of
    them. Checked before the entries are converted (a Python object each, ~5 us): a 1 MiB
    message of 520,000 empty shares held the worker's event loop 1 to 3 s before the library
    refused it, or found its stage not open. (Each form is counted alone: a message of both
    is refused as such by the converter.)"""
    forms = _FORMS.get(message.DESCRIPTOR)
    if forms is None:
        fields = message.DESCRIPTOR.fields_by_name
        forms = _FORMS[message.DESCRIPTOR] = tuple(
            tuple(name for name in form if name in fields) for form in _SHARE_ENTRIES)
    # (loops, not generators: this runs for every device's shares and unmask shares)
    count = 0
    for form in forms:
        entries = 0
        for name in form:
            entries += len(getattr(message, name))
        if entries > count:
            count = entries
    k = round_.config.k
    if count > k:
        raise malformed(f"{count} share entries; a device's shares name its roster "
                        f"neighbours, at most k = {k}")


def declared_upload(round_: Round, total_bytes: int, vector_sha256: bytes) -> bytes:
    """The SHA-256 an upload declares for its vector, once its declared length is the round's
    vectors' and the digest is 32 bytes (the unary upload's header and the session stream's
    vector are checked here alike); ProtocolViolation WRONG_LENGTH otherwise."""
    expected = round_.config.dimension * mask_dtype(round_.config.modulus_bits).itemsize
    if total_bytes != expected:
        raise ProtocolViolation(Violation.WRONG_LENGTH, f"declared {total_bytes} "
                                f"bytes, the round's vectors have {expected}")
    declared = bytes(vector_sha256)
    if len(declared) != DIGEST_BYTES:
        raise ProtocolViolation(Violation.WRONG_LENGTH,
                                f"vector_sha256 must be {DIGEST_BYTES} bytes")
    return declared


async def accept_vector(registry: RoundRegistry, round_: Round, device_id: int, declared: bytes,
                        receive: Callable[[int], Awaitable[tuple[bytes | bytearray, bytes]]]
                        ) -> bool:
    """An authenticated device's masked vector, declared (its length already checked) to hash
    to ``declared``: a repeat of an accepted upload is answered at once (False: identical) or
    refused (different); then the stage and one upload per device at a time are checked, and
    only then an upload slot is taken and the vector read (``receive(expected)``, which
    returns its bytes and their SHA-256). True: accepted, now in the sum."""
    dtype = mask_dtype(round_.config.modulus_bits)
    expected = round_.config.dimension * dtype.itemsize
    accepted_digest = round_.upload_digests.get(device_id)
    if accepted_digest is not None:
        if accepted_digest != declared:
            raise ProtocolViolation(Violation.DUPLICATE,
                                    f"second, different vector from {device_id}")
        metrics.MESSAGES_DUPLICATE[Stage.MASKED_INPUT].inc()
        return False
    round_.upload_precheck(device_id)
    if device_id in round_.uploading:
        raise EarlierCallOpen(f"an upload from device {device_id} is already in progress")
    round_.uploading.add(device_id)
    try:
        try:
            async with asyncio.timeout(round_.upload_deadline()):
                async with registry.uploads:
                    metrics.UPLOADS_ACTIVE.inc()
                    try:
                        buffer, digest = await receive(expected)
                    finally:
                        metrics.UPLOADS_ACTIVE.dec()
        except TimeoutError:
            raise UploadTimeout("the upload did not finish before the stage's "
                                "deadline") from None
    finally:
        round_.uploading.discard(device_id)
    if digest != declared:
        raise AuthenticationError("the vector does not match its signed header")
    message = MaskedInput(round_.session_id, device_id, np.frombuffer(buffer, dtype=dtype))
    accepted = await round_.submit(Stage.MASKED_INPUT, message)
    del message, buffer  # the vector is in the sum (or rejected); drop it now
    if accepted:
        round_.upload_digests[device_id] = declared
    return accepted


def await_response(round_: Round, outcome: AwaitOutcome,
                   out: pb.AwaitStageResponse | None = None) -> pb.AwaitStageResponse:
    """The wire answer for ``outcome`` (filled into ``out``, if given)."""
    if out is None:
        out = pb.AwaitStageResponse()
    if outcome.request is not None:
        out.MergeFromString(round_.encoder.ready(outcome.request))
        return out
    out.status = _AWAIT_STATUS[outcome.status]
    out.abort_reason = outcome.abort_reason
    return out
