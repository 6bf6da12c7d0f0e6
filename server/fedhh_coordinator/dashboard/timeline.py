"""A round attempt as the operator follows it: check-in, the five secure-aggregation stages,
then the release or the abort, each step with its status, its devices, its dropout and its
duration (after a wait for the aggregation service, a step of its own, when the service did
not answer as the attempt began: docs/networked.md, "A round", step 0); and the dropout of
each stage over recent attempts.

The sources: the attempt's row (state, reason, contributors, the summary the link keeps at
its end: the cohort's members, the steps seen and the devices each stage accepted, and the
prefix tree's report for a released round) and, for the attempt in progress, the runner's live
``Progress``. Step times are when the coordinator first saw each step (it asks the aggregator
about once a second), so a stage shorter than that may show no duration.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fedhh_coordinator.progress import Progress
from fedhh_coordinator.store import RoundRow, stored_members

STAGES = ("ADVERTISE_KEYS", "SHARE_KEYS", "MASKED_INPUT", "CONSISTENCY_CHECK", "UNMASK")
# Stages whose count measures dropout. The aggregator closes UNMASK as soon as every mask can
# be removed (``SecAggServer.can_close_early``), so devices missing there were not needed, not
# lost.
DROPOUT_STAGES = STAGES[:-1]
STAGE_LABELS = {"ADVERTISE_KEYS": "advertise keys", "SHARE_KEYS": "share keys",
                "MASKED_INPUT": "masked input", "CONSISTENCY_CHECK": "consistency",
                "UNMASK": "unmask"}
CHECK_IN, END = "check-in", "end"
STEPS = (CHECK_IN, *STAGES, END)
# The step before check-in of an attempt that found the aggregation service silent; its phase
# reads "waiting for the aggregator at ADDRESS" (``NetworkLink._await_aggregator``).
WAIT = "aggregator"
WAIT_PHASE = "waiting for the aggregator"
# Phases of ``Progress`` and the step each begins.
_PHASE_STEP = {"check-in": CHECK_IN, "secure aggregation": STAGES[0], "releasing": END}
FINISHED = ("released", "aborted", "lost")


@dataclass(frozen=True)
class Step:
    key: str
    label: str
    status: str  # done, active, failed, skipped or pending
    devices: int | None  # check-in: the cohort; a stage: devices it accepted; end: contributors
    dropout: float | None  # share of the previous step's devices missing here
    seconds: float | None


@dataclass(frozen=True)
class AttemptView:
    run_id: str
    round: int
    attempt: int
    state: str
    reason: str
    started_at: float
    seconds: float
    cohort: int | None
    contributors: int
    n_min: int
    kept: int | None
    finished: int | None
    threshold: float | None
    expected_fp: float | None
    # Kept items on the deny list, which devices never select: false positives for certain.
    # (Impossible codes are removed before thresholding: never kept, so never counted here;
    # adding them once showed 26,499 "observed" among 5 kept.)
    provable_fp: int | None
    steps: tuple[Step, ...]

    @property
    def live(self) -> bool:
        return self.state not in FINISHED


def attempt_view(row: RoundRow, n_min: int, live: Progress | None, pool: int,
                 now: float) -> AttemptView:
    """The attempt of ``row``; ``live`` is the runner's progress if it is this attempt, and
    ``pool`` the check-in pool's size now."""
    s: dict[str, Any] = row.summary
    seen = live.steps if live is not None else s.get("steps", [])
    counts: dict[str, int] = dict(live.stage_devices if live is not None
                                  else s.get("stage_devices", {}))
    starts: dict[str, float] = {}
    for name, at in seen:
        key = WAIT if name.startswith(WAIT_PHASE) else _PHASE_STEP.get(name, name)
        if key in STEPS or key == WAIT:
            starts.setdefault(key, float(at))
    # A wait for the aggregator is its own step, check-in not begun while it lasts (before,
    # check-in showed as running through the wait).
    keys = (WAIT, *STEPS) if WAIT in starts else STEPS
    starts.setdefault(keys[0], row.started_at)
    reached = max(keys.index(key) for key in starts)
    for stage in counts:
        if stage in STAGES:  # a closed stage: the next step was open
            reached = max(reached, keys.index(stage) + 1)
    released = row.state == "released"
    finished = row.state in FINISHED
    if released:
        reached = len(keys) - 1
    members = stored_members(s)
    cohort = len(members) if members is not None else None
    if cohort is None and live is not None:
        cohort = pool if live.phase == "check-in" else live.devices or None
    end = row.finished_at if finished and row.finished_at is not None else now

    steps = []
    previous = cohort
    for i, key in enumerate(keys):
        if released:
            status = "done"
        elif finished:
            status = ("done" if i < reached else "failed" if i == reached or key == END
                      else "skipped")
        else:
            status = "done" if i < reached else "active" if i == reached else "pending"
        if key == CHECK_IN:
            devices = cohort
        elif key == WAIT:
            devices = None
        elif key == END:
            devices = row.participants if row.state in ("released", "lost") else None
        else:
            devices = counts.get(key)
        dropout = None
        if key in DROPOUT_STAGES and devices is not None and previous:
            dropout = 1 - devices / previous
        if key in STAGES and devices is not None:
            previous = devices
        seconds = None
        if key in starts:
            later = [starts[k] for k in keys[i + 1:] if k in starts]
            stop = min(later) if later else end
            seconds = max(0.0, stop - starts[key])
        label = (("waited for the aggregator" if status == "done" else WAIT_PHASE)
                 if key == WAIT else STAGE_LABELS.get(key, key) if key != END
                 else "released" if released else row.state if finished else "release")
        steps.append(Step(key, label, status, devices, dropout, seconds))

    def figure(name: str) -> float | None:
        value = s.get(name)
        return float(value) if released and value is not None else None

    provable = int(s.get("denied", 0)) if released else None
    kept, found = figure("kept"), figure("finished")
    return AttemptView(
        run_id=row.run_id, round=row.round, attempt=row.attempt, state=row.state,
        reason=row.reason, started_at=row.started_at, seconds=max(0.0, end - row.started_at),
        cohort=cohort, contributors=row.participants, n_min=n_min,
        kept=None if kept is None else int(kept), finished=None if found is None else int(found),
        threshold=figure("threshold"), expected_fp=figure("expected_false_positives"),
        provable_fp=provable, steps=tuple(steps))


@dataclass(frozen=True)
class Dropout:
    """Devices lost at a stage over several attempts: ``missing`` of the ``of`` that the
    previous step held."""

    stage: str
    missing: int
    of: int
    attempts: int

    @property
    def rate(self) -> float:
        return self.missing / self.of if self.of else math.nan


def dropout_by_stage(attempts: Iterable[AttemptView]) -> list[Dropout]:
    """Each stage's dropout pooled over the finished attempts that report it (an attempt under
    way still changes, and counted beside its own earlier figures it read as twice the fleet:
    "advertise keys 0 of 2774" for 1,387 devices)."""
    totals = {stage: [0, 0, 0] for stage in DROPOUT_STAGES}
    for view in attempts:
        if view.live:
            continue
        previous = view.cohort
        for step in view.steps:
            if step.key not in DROPOUT_STAGES or step.devices is None:
                continue
            if previous:
                entry = totals[step.key]
                entry[0] += max(0, previous - step.devices)
                entry[1] += previous
                entry[2] += 1
            previous = step.devices
    return [Dropout(stage, *totals[stage]) for stage in DROPOUT_STAGES]
