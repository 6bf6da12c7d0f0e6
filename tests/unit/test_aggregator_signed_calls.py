"""The unary device calls whose body comes whole (SubmitShares, SubmitConsistency,
SubmitUnmask) are checked by one piece, ``DeviceServicer._signed_body``, in one order: the
round, the admission, the share lists' length, then the message is converted and its
signature checked; the round is handed nothing until all pass. (Before, each call kept its
own copy of the checks; no test sent a unary call a share list longer than k.)"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from fedhh.errors import AuthenticationError
from fedhh.secagg import ProtocolViolation, Violation
from fedhh.v1 import aggregator_pb2 as pb
from fedhh_aggregator import servicers
from fedhh_aggregator.servicers import DeviceServicer

K = 3
DEVICE = 7


class _Registry:
    def __init__(self, admitted: bool) -> None:
        self.round: Any = SimpleNamespace(session_id=b"s" * 16, config=SimpleNamespace(k=K),
                                          admitted=lambda admission: admitted)

    def by_session(self, session_id: bytes) -> Any:
        return self.round


def _servicer(monkeypatch: pytest.MonkeyPatch, admitted: bool = True,
              signed: bool = True) -> tuple[DeviceServicer, list[str]]:
    """A servicer over one round; the admission and signature checks are stand-ins that log
    their turn (their own tests are the aggregator service's)."""
    seen: list[str] = []

    def admission(round_: Any, creds: Any) -> Any:
        seen.append("admission")
        if not round_.admitted(None):
            raise AuthenticationError("not admitted")
        return SimpleNamespace(device_id=DEVICE)

    def check_call(round_: Any, admission: Any, creds: Any, kind: Any, digest: bytes) -> int:
        seen.append(f"signature over {digest!r}")
        if not signed:
            raise AuthenticationError("not signed")
        return int(admission.device_id)

    monkeypatch.setattr(servicers, "device_admission", admission)
    monkeypatch.setattr(servicers, "check_call", check_call)
    return DeviceServicer(_Registry(admitted)), seen  # type: ignore[arg-type]


def _parse(seen: list[str]) -> Any:
    def parse(round_: Any, device: int) -> str:
        seen.append(f"parse for {device}")
        return "message"
    return parse


def _shares(entries: int) -> pb.SubmitSharesRequest:
    request = pb.SubmitSharesRequest(session_id=b"s" * 16)
    for _ in range(entries):
        request.shares.add()
    return request


def _unmask(entries: int) -> pb.SubmitUnmaskRequest:
    request = pb.SubmitUnmaskRequest(session_id=b"s" * 16)
    for _ in range(entries):
        request.b_shares.add()
    return request


@pytest.mark.parametrize("request_", [_shares(K), _unmask(K),
                                      pb.SubmitConsistencyRequest(session_id=b"s" * 16)])
def test_a_call_that_passes_is_checked_in_order(monkeypatch: pytest.MonkeyPatch,
                                                request_: Any) -> None:
    servicer, seen = _servicer(monkeypatch)
    round_, device, message = servicer._signed_body(
        request_, "Rpc", servicers.CallKind.SHARES, _parse(seen), lambda m: m.encode())
    assert (round_.session_id, device, message) == (b"s" * 16, DEVICE, "message")
    assert seen == ["admission", f"parse for {DEVICE}", "signature over b'message'"]


@pytest.mark.parametrize("request_", [_shares(K + 1), _unmask(K + 1)])
def test_a_share_list_longer_than_k_is_refused_before_it_is_converted(
        monkeypatch: pytest.MonkeyPatch, request_: Any) -> None:
    servicer, seen = _servicer(monkeypatch)
    with pytest.raises(ProtocolViolation, match=f"{K + 1} share entries") as refused:
        servicer._signed_body(request_, "Rpc", servicers.CallKind.SHARES, _parse(seen),
                              lambda m: m.encode())
    assert refused.value.reason == Violation.MALFORMED
    assert seen == ["admission"]


def test_an_unadmitted_caller_is_refused_before_its_shares_are_counted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    servicer, seen = _servicer(monkeypatch, admitted=False)
    with pytest.raises(AuthenticationError, match="not admitted"):
        servicer._signed_body(_shares(K + 1), "Rpc", servicers.CallKind.SHARES, _parse(seen),
                              lambda m: m.encode())
    assert seen == ["admission"]


def test_a_call_not_signed_reaches_no_round(monkeypatch: pytest.MonkeyPatch) -> None:
    servicer, seen = _servicer(monkeypatch, signed=False)
    with pytest.raises(AuthenticationError, match="not signed"):
        servicer._signed_body(_unmask(K), "Rpc", servicers.CallKind.UNMASK, _parse(seen),
                              lambda m: m.encode())
    assert seen == ["admission", f"parse for {DEVICE}", "signature over b'message'"]
