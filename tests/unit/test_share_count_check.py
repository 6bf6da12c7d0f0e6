"""``check_share_count``: a device's shares and unmask shares name at most k neighbours, counted
before anything is converted, in a few calls for every device's two such messages."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from call_count_kit import calls
from google.protobuf.message import Message

from fedhh.secagg import ProtocolViolation
from fedhh.v1 import aggregator_pb2 as pb
from fedhh_aggregator.device_messages import check_share_count

K = 5
ROUND = SimpleNamespace(config=SimpleNamespace(k=K))


def _session_shares(listed: int, packed: int) -> pb.SessionShares:
    message = pb.SessionShares()
    for _ in range(listed):
        message.shares.add()
    message.dsts.extend([1] * packed)
    return message


def _session_unmask(b: int, s: int, b_owners: int, s_owners: int) -> pb.SessionUnmask:
    message = pb.SessionUnmask()
    for _ in range(b):
        message.b_shares.add()
    for _ in range(s):
        message.s_shares.add()
    message.b_owners.extend([1] * b_owners)
    message.s_owners.extend([1] * s_owners)
    return message


@pytest.mark.parametrize(("message", "count"), [
    (_session_shares(K, 0), None), (_session_shares(0, K), None),
    (_session_shares(K + 1, 0), K + 1), (_session_shares(0, K + 1), K + 1),
    (_session_shares(K, K), None),  # (each form alone: the converter refuses the mix)
    (_session_unmask(3, 2, 0, 0), None), (_session_unmask(0, 0, 2, 3), None),
    (_session_unmask(3, 3, 0, 0), 6), (_session_unmask(0, 0, 4, 2), 6),
    (_session_unmask(1, 1, 4, 3), 7),
    (pb.SubmitSharesRequest(), None), (pb.SubmitUnmaskRequest(), None)])
def test_a_share_list_longer_than_k_is_refused(message: Message, count: int | None) -> None:
    if count is None:
        check_share_count(ROUND, message)  # type: ignore[arg-type]
    else:
        with pytest.raises(ProtocolViolation, match=f"{count} share entries; .* k = {K}"):
            check_share_count(ROUND, message)  # type: ignore[arg-type]


@pytest.mark.parametrize(("message", "most"), [(_session_shares(K, 0), 7),
                                               (_session_unmask(2, 2, 0, 0), 11)])
def test_the_count_is_a_few_calls(message: Message, most: int) -> None:
    """A call, a lookup and a len and a getattr a field (with the caller's lambda); before,
    generators and a max of sums: 16 calls for a session's shares, 22 for its unmask shares."""
    check_share_count(ROUND, message)  # type: ignore[arg-type]  # (its fields found once)
    assert calls(lambda: check_share_count(ROUND, message)) <= most  # type: ignore[arg-type]
