"""A device process decodes equal survivor sets and roster entries to one shared object (a
fleet of simulated devices kept a copy per device and ran out of memory at 50,000)."""

from __future__ import annotations

from fedhh.rpc.aggregator_wire import request_from_pb
from fedhh.v1 import aggregator_pb2 as pb

SESSION = b"s" * 16


def _consistency(ids: list[int]) -> pb.AwaitStageResponse:
    out = pb.AwaitStageResponse(status=pb.AWAIT_STATUS_READY)
    out.consistency_check.survivors.extend(ids)
    return out


def _roster(*device_ids: int) -> pb.AwaitStageResponse:
    out = pb.AwaitStageResponse(status=pb.AWAIT_STATUS_READY)
    for i in device_ids:
        out.share_keys.entries.add(device_id=i, c_pk=bytes([i]) * 32, s_pk=bytes([i + 1]) * 32)
    return out


def test_equal_survivor_sets_are_one_tuple() -> None:
    ids = list(range(1, 5001, 2))
    a = request_from_pb(SESSION, 1, _consistency(ids))
    b = request_from_pb(SESSION, 3, _consistency(ids))
    c = request_from_pb(SESSION, 5, _consistency([*ids[:-1], 5001]))
    assert a.survivors == tuple(ids) and a.device_id == 1 and b.device_id == 3  # type: ignore[union-attr]
    assert a.survivors is b.survivors  # type: ignore[union-attr]
    assert c.survivors[-1] == 5001 and c.survivors is not a.survivors  # type: ignore[union-attr]


def test_equal_roster_entries_are_shared_within_a_session_only() -> None:
    first = request_from_pb(SESSION, 1, _roster(2, 3))
    second = request_from_pb(SESSION, 4, _roster(3, 5))
    other = request_from_pb(b"t" * 16, 4, _roster(3, 5))
    assert first.roster[1] is second.roster[0]  # device 3's entry  # type: ignore[union-attr]
    assert first.roster[1].device_id == 3 and second.roster[1].device_id == 5  # type: ignore[union-attr]
    assert other.roster[0] is not second.roster[0]  # type: ignore[union-attr]
    assert other.roster[0].session_id == b"t" * 16  # type: ignore[union-attr]
    changed = _roster(3)
    changed.share_keys.entries[0].s_pk = b"\x09" * 32
    assert request_from_pb(SESSION, 6, changed).roster[0].s_pk == b"\x09" * 32  # type: ignore[union-attr]
