"""Where each running run is now, for the operator: the attempt in progress and its phase
(check-in with the pool's size, secure aggregation with the aggregator's stage, releasing),
and the steps this attempt went through so far with the devices each secure-aggregation stage
accepted. Kept in memory and shown by GetRun and the dashboard; when an attempt ends its steps
and counts are kept in its round summary (``summary``); nothing in it is needed to resume a
run.

``RunChanges`` tells the runs' followers (GetRun's long-poll) when a run changed."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fedhh.v1 import coordinator_pb2 as pb


@dataclass
class Progress:
    round: int = 0
    attempt: int = 0
    phase: str = ""
    devices: int = 0
    stage: str = ""
    since: float = field(default_factory=time.monotonic)
    # (phase or stage, Unix time it was first seen) of this attempt, in order
    steps: list[tuple[str, float]] = field(default_factory=list)
    stage_devices: dict[str, int] = field(default_factory=dict)  # accepted per closed stage
    # Called when the attempt, its phase or its stage changes (``RunChanges.changed``); not
    # for the counts, which a follower reads when it asks.
    changed: Callable[[], None] = field(default=lambda: None, repr=False, compare=False)

    def enter(self, round_: int, attempt: int, phase: str, devices: int = 0) -> None:
        if (round_, attempt) != (self.round, self.attempt):
            self.steps, self.stage_devices = [], {}
        self.round, self.attempt, self.phase = round_, attempt, phase
        self.devices, self.stage, self.since = devices, "", time.monotonic()
        self.steps.append((phase, time.time()))
        self.changed()

    def observe_stage(self, stage: str, stage_devices: dict[str, int]) -> None:
        """The aggregator's open stage and its per-stage counts, as last asked."""
        moved = stage != self.stage
        if stage and moved:
            self.steps.append((stage, time.time()))
        self.stage = stage
        if stage_devices:
            self.stage_devices = dict(stage_devices)
        if moved:
            self.changed()

    def wait(self, what: str) -> str:
        """A wait within the attempt (``what``: "waiting for the aggregator at ADDRESS", the
        aggregation service lost mid-round): the stage it shows and a step of its own; the
        stage it interrupted is returned, for ``resume``. (Before, the link overwrote the
        stage's text alone, and the timeline kept the interrupted stage running through it.)"""
        interrupted = self.stage
        self.stage = what
        self.steps.append((what, time.time()))
        self.changed()
        return interrupted

    def resume(self, stage: str) -> None:
        """The wait is over and ``stage`` (what ``wait`` returned) goes on: a step again, so
        the wait shows as ended (the phase, if no stage had been seen)."""
        self.stage = stage
        self.steps.append((stage or self.phase, time.time()))
        self.changed()

    def summary(self) -> dict[str, Any]:
        """What the round summary keeps of this attempt for the operator."""
        return {"steps": [[name, at] for name, at in self.steps],
                "stage_devices": dict(self.stage_devices)}

    def to_proto(self) -> pb.Progress:
        return pb.Progress(round=self.round, attempt=self.attempt, phase=self.phase,
                           devices=self.devices, stage=self.stage,
                           seconds=time.monotonic() - self.since)


class RunChanges:
    """The runs' versions, for GetRun's long-poll: a run's version moves on at each change a
    follower of it sees (its state, an attempt opened or ended, its progress's phase or
    stage), and the calls waiting for it are answered then. Before, ``fedhh admin wait``,
    ``fedhh up`` and the load test asked twice a second whatever happened: ~4 ms of the
    coordinator's CPU a second (two TLS calls, each reading the run) while a round waited.
    Changed and read on the event loop."""

    def __init__(self) -> None:
        # (this process's alone: a version handed out before a restart is no version here, so
        # its follower is answered at once)
        self._epoch = secrets.token_hex(4)
        self._count = 0
        self._at: dict[str, int] = {}  # run id -> the count at its latest change
        self._changed = asyncio.Event()  # (set, and replaced, at each change)

    def changed(self, run_id: str) -> None:
        self._count += 1
        self._at[run_id] = self._count
        self._changed.set()
        self._changed = asyncio.Event()

    def version(self, run_id: str) -> str:
        return f"{self._epoch}.{self._at.get(run_id, 0)}"

    async def wait(self, run_id: str, seen: str, wait_s: float) -> None:
        """Return once ``run_id``'s version is not ``seen``, or after ``wait_s``."""
        loop = asyncio.get_running_loop()
        until = loop.time() + wait_s
        while self.version(run_id) == seen and loop.time() < until:
            try:
                async with asyncio.timeout_at(until):
                    await self._changed.wait()
            except TimeoutError:
                return
