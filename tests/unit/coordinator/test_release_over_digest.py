"""The digest a charge stores of whose reports its sum is over (``ReleaseJudgement.over_digest``),
which a restarted coordinator compares before it reads a held sum under that charge: equal for
the same reports in any order, different for any other reports, and written as stores already
hold it (a change of its encoding would refuse, unread, every sum charged before an upgrade)."""

from __future__ import annotations

import hashlib

import pytest

from fedhh_coordinator.plans import ReleaseJudgement


def digest(*over: tuple[bytes, tuple[int, ...]]) -> str:
    return ReleaseJudgement(len(over), over=over).over_digest


def test_the_encoding_is_the_one_stores_hold() -> None:
    stored = b'[["722f312f312f7330",[1,2,5]],["722f312f312f7331",[0,7]]]'
    assert digest((b"r/1/1/s0", (1, 2, 5)), (b"r/1/1/s1", (0, 7))) == \
        "sha256:" + hashlib.sha256(stored).hexdigest()


def test_the_same_reports_in_any_order_give_one_digest() -> None:
    assert digest((b"s1", (7, 0)), (b"s0", (5, 1, 2))) == \
        digest((b"s0", (1, 2, 5)), (b"s1", (0, 7)))


@pytest.mark.parametrize("other", [
    ((b"s0", (1, 2)), (b"s1", (5, 0, 7))),  # a survivor counted in another part
    ((b"s0", (1, 2, 5)), (b"s2", (0, 7))),  # another shard
    ((b"s0", (1, 2, 5, 0, 7)),),  # one part holding both
    ((b"s0", (1, 2, 5)), (b"s1", (0, 7)), (b"s1", (0, 7))),  # a part twice
    ((b"s", (1, 2, 5)), (b"0s1", (0, 7))),  # round ids cut elsewhere
    ((b"s0", (1, 2, 6)), (b"s1", (0, 7))),  # another survivor
])
def test_other_reports_give_another_digest(other: tuple[tuple[bytes, tuple[int, ...]], ...]
                                           ) -> None:
    assert digest(*other) != digest((b"s0", (1, 2, 5)), (b"s1", (0, 7)))
