"""``fedhh.rpc.device_client.decline``: a device's Decline is best effort and never raises for
the call's outcome. An aggregator older than the call (UNIMPLEMENTED) is asked once and the
device goes on (the round waits for the deadline, as before devices could decline); a shed
or unavailable call is retried as every device call is; the request is signed as the
admitted device's call of kind "decline" over an empty body."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.rpc.aggregator_wire import CallKind, call_transcript
from fedhh.rpc.device_client import RetryPolicy, decline
from fedhh.secagg import Admission
from fedhh.secagg.primitives import ed25519_verify
from fedhh.v1 import aggregator_pb2 as pb

SESSION = b"s" * 32
KEY = Ed25519PrivateKey.generate()
ADMISSION = Admission(3, KEY.public_key().public_bytes_raw(), b"c" * 32, b"d" * 32, b"")


class _Aggregator:
    """Answers each Decline with the next of ``answers`` (a status code raises it)."""

    def __init__(self, *answers: grpc.StatusCode | None) -> None:
        self.answers = list(answers)
        self.requests: list[pb.DeclineRequest] = []

    async def Decline(self, request: pb.DeclineRequest, **_: Any) -> pb.SubmitResponse:
        self.requests.append(request)
        code = self.answers.pop(0)
        if code is not None:
            raise grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                       details="test")
        return pb.SubmitResponse(accepted=True)


def _decline(aggregator: _Aggregator) -> bool:
    return asyncio.run(decline(aggregator, SESSION, identity_key=KEY, admission=ADMISSION,
                               retry=RetryPolicy(initial_backoff_s=0.001),
                               rng=random.Random(1)))


def test_an_aggregator_without_the_call_is_asked_once_and_the_device_goes_on() -> None:
    aggregator = _Aggregator(grpc.StatusCode.UNIMPLEMENTED)
    assert _decline(aggregator) is False
    assert len(aggregator.requests) == 1


def test_a_shed_or_unavailable_decline_is_retried() -> None:
    aggregator = _Aggregator(grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, None)
    assert _decline(aggregator) is True
    assert len(aggregator.requests) == 3
    unreachable = _Aggregator(*[grpc.StatusCode.UNAVAILABLE] * RetryPolicy().attempts)
    assert _decline(unreachable) is False
    assert len(unreachable.requests) == RetryPolicy().attempts


def test_the_decline_is_signed_as_the_admitted_devices_call() -> None:
    aggregator = _Aggregator(None)
    _decline(aggregator)
    sent = aggregator.requests[0]
    assert sent.session_id == SESSION
    assert sent.credentials.admission.device_id == ADMISSION.device_id
    assert ed25519_verify(ADMISSION.identity_key, sent.credentials.signature,
                          call_transcript(CallKind.DECLINE, SESSION, 3, b""))
