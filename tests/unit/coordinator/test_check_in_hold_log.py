"""The log line of a check-in held past its window names what bounds the hold: the latest
cohort's members still in their round, the devices reconnecting after a start, or both where
the reconnecting devices' bound is the later. Before, any hold with a cohort read "check-in
held for the last cohort", also where it lasted to the longer returning bound."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from fedhh_coordinator.lobby import Lobby

COHORT = "check-in held for the last cohort"
RETURNING = "check-in held for the devices reconnecting after the start"
BOTH = "check-in held for the last cohort and the devices reconnecting after the start"


def _held_line(cohort_s: float | None, returning_s: float | None,
               caplog: pytest.LogCaptureFixture) -> str:
    """The hold's log line of a check-in 5 devices short, its 10 ms window over, with a cohort
    busy for ``cohort_s`` more seconds and devices returning for ``returning_s`` (None: none);
    the check-in is stopped once held."""
    lobby = Lobby()
    if cohort_s is not None:
        lobby.expect([1, 2], time.time() + cohort_s)
    if returning_s is not None:
        lobby.expect_return(time.time() + returning_s)
    stopped = False

    async def go() -> None:
        nonlocal stopped
        collecting = asyncio.create_task(lobby.collect(5, 0.01, min_size=5,
                                                       stop=lambda: stopped))
        while not lobby.is_held:
            await asyncio.sleep(0.001)
        stopped = True
        lobby.recheck()
        assert await collecting == []

    with caplog.at_level(logging.INFO, logger="fedhh_coordinator.lobby"):
        asyncio.run(asyncio.wait_for(go(), 30))
    held = [r.getMessage() for r in caplog.records if "held" in r.getMessage()]
    assert len(held) == 1, held
    return held[0]


@pytest.mark.parametrize(("cohort_s", "returning_s", "line"), [
    (60.0, None, COHORT),
    (60.0, 20.0, COHORT),       # (the cohort's bound is the later: it alone bounds the hold)
    (20.0, 60.0, BOTH),         # (before: COHORT, the hold lasting to the returning bound)
    (-1.0, 60.0, RETURNING),    # (the cohort's bound already past; before: COHORT)
    (None, 60.0, RETURNING),
])
def test_the_hold_names_its_bound(cohort_s: float | None, returning_s: float | None,
                                  line: str, caplog: pytest.LogCaptureFixture) -> None:
    assert _held_line(cohort_s, returning_s, caplog) == line
