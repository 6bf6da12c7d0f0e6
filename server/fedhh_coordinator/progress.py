"""Where each running run is now, for the operator: the attempt in progress and its phase
(check-in with the pool's size, secure aggregation with the aggregator's stage, releasing),
and the steps this attempt went through so far with the devices each secure-aggregation stage
accepted. Kept in memory and shown by GetRun and the dashboard; when an attempt ends its steps
and counts are kept in its round summary (``summary``); nothing in it is needed to resume a
run."""

from __future__ import annotations

import time
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

    def enter(self, round_: int, attempt: int, phase: str, devices: int = 0) -> None:
        if (round_, attempt) != (self.round, self.attempt):
            self.steps, self.stage_devices = [], {}
        self.round, self.attempt, self.phase = round_, attempt, phase
        self.devices, self.stage, self.since = devices, "", time.monotonic()
        self.steps.append((phase, time.time()))

    def observe_stage(self, stage: str, stage_devices: dict[str, int]) -> None:
        """The aggregator's open stage and its per-stage counts, as last asked."""
        if stage and stage != self.stage:
            self.steps.append((stage, time.time()))
        self.stage = stage
        if stage_devices:
            self.stage_devices = dict(stage_devices)

    def wait(self, what: str) -> str:
        """A wait within the attempt (``what``: "waiting for the aggregator at ADDRESS", the
        aggregation service lost mid-round): the stage it shows and a step of its own; the
        stage it interrupted is returned, for ``resume``. (Before, the link overwrote the
        stage's text alone, and the timeline kept the interrupted stage running through it.)"""
        interrupted = self.stage
        self.stage = what
        self.steps.append((what, time.time()))
        return interrupted

    def resume(self, stage: str) -> None:
        """The wait is over and ``stage`` (what ``wait`` returned) goes on: a step again, so
        the wait shows as ended (the phase, if no stage had been seen)."""
        self.stage = stage
        self.steps.append((stage or self.phase, time.time()))

    def summary(self) -> dict[str, Any]:
        """What the round summary keeps of this attempt for the operator."""
        return {"steps": [[name, at] for name, at in self.steps],
                "stage_devices": dict(self.stage_devices)}

    def to_proto(self) -> pb.Progress:
        return pb.Progress(round=self.round, attempt=self.attempt, phase=self.phase,
                           devices=self.devices, stage=self.stage,
                           seconds=time.monotonic() - self.since)
