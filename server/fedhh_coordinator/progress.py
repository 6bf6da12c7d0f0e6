"""Where each running run is now, for the operator: the attempt in progress and its phase
(check-in with the pool's size, secure aggregation with the aggregator's stage, releasing).
Kept in memory and shown by GetRun; nothing in it is needed to resume a run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fedhh.v1 import coordinator_pb2 as pb


@dataclass
class Progress:
    round: int = 0
    attempt: int = 0
    phase: str = ""
    devices: int = 0
    stage: str = ""
    since: float = field(default_factory=time.monotonic)

    def enter(self, round_: int, attempt: int, phase: str, devices: int = 0) -> None:
        self.round, self.attempt, self.phase = round_, attempt, phase
        self.devices, self.stage, self.since = devices, "", time.monotonic()

    def to_proto(self) -> pb.Progress:
        return pb.Progress(round=self.round, attempt=self.attempt, phase=self.phase,
                           devices=self.devices, stage=self.stage,
                           seconds=time.monotonic() - self.since)
