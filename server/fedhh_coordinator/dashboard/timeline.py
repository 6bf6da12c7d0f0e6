"""A round attempt as the operator follows it: check-in, the five secure-aggregation stages,
then the release or the abort, each step with its status, its devices, its dropout and its
duration (a wait for the aggregation service, a step of its own: before check-in when the
service did not answer as the attempt began, docs/networked.md, "A round", step 0; after the
stage it interrupted when the service was lost mid-round, that stage going on after it once
the service answers); and the dropout of each stage over recent attempts.

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
# reads "waiting for the aggregator at ADDRESS" (``NetworkLink._await_aggregator``). A wait
# mid-round (``NetworkLink._patient_outcome``) is step WAIT-1, WAIT-2... (``_step_keys``).
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
    contributors: int  # in the released total (``RoundRow.contributors``)
    charged: int  # the count the ledger charged (n_min for a shard lost after unmasking)
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
    # Prefixes a released round kept that the next round's segment left out (never queried
    # again: ``RoundReport.trimmed``); None unless released.
    trimmed: int | None = None

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
    keys, spans = _step_keys([(str(name), float(at)) for name, at in seen])
    if keys[0] not in {key for key, _ in spans}:
        spans.insert(0, (keys[0], row.started_at))
    started = {key for key, _ in spans}
    waits = {key for key in keys if key.startswith(WAIT)}
    last = spans[-1][0]
    if last in waits:
        reached = keys.index(last)  # waiting now (or given up there)
    else:
        reached = max(keys.index(key) for key in started if key not in waits)
        for stage in counts:
            if stage in STAGES:  # a closed stage: the next stage (or the end) was open
                reached = max(reached, keys.index(STEPS[STEPS.index(stage) + 1]))
    released = row.state == "released"
    finished = row.state in FINISHED
    if released:
        reached = len(keys) - 1
    members = stored_members(s)
    cohort = len(members) if members is not None else None
    if cohort is None and live is not None:
        cohort = pool if live.phase == "check-in" else live.devices or None
    end = row.finished_at if finished and row.finished_at is not None else now
    # Each step's time: the spans it was the latest step seen (a stage a wait interrupted
    # goes on after it).
    seconds_of: dict[str, float] = {}
    for (key, at), (_, stop) in zip(spans, [*spans[1:], ("", end)], strict=True):
        seconds_of[key] = seconds_of.get(key, 0.0) + max(0.0, stop - at)

    steps = []
    previous = cohort
    for i, key in enumerate(keys):
        seen_wait = key in waits and key != keys[reached]  # (one the stage went on after)
        if released:
            status = "done"
        elif finished:
            status = ("done" if i < reached or seen_wait else "failed"
                      if i == reached or key == END else "skipped")
        else:
            status = ("done" if i < reached or seen_wait else "active" if i == reached
                      else "pending")
        if key == CHECK_IN:
            devices = cohort
        elif key in waits:
            devices = None
        elif key == END:
            devices = row.contributors if row.state in ("released", "lost") else None
        else:
            devices = counts.get(key)
        dropout = None
        if key in DROPOUT_STAGES and devices is not None and previous:
            dropout = 1 - devices / previous
        if key in STAGES and devices is not None:
            previous = devices
        seconds = seconds_of.get(key)
        label = (("waited for the aggregator" if status == "done" else WAIT_PHASE)
                 if key in waits else STAGE_LABELS.get(key, key) if key != END
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
        cohort=cohort, contributors=row.contributors, charged=row.participants,
        n_min=n_min,
        kept=None if kept is None else int(kept), finished=None if found is None else int(found),
        threshold=figure("threshold"), expected_fp=figure("expected_false_positives"),
        provable_fp=provable, steps=tuple(steps),
        trimmed=int(s.get("trimmed", 0)) if released else None)


def _step_keys(seen: list[tuple[str, float]]
               ) -> tuple[tuple[str, ...], list[tuple[str, float]]]:
    """The attempt's steps in order and ``seen`` as (step, Unix time) spans. A wait for the
    aggregation service seen first is the step before check-in (``WAIT``); one seen later
    (the service lost mid-round: ``NetworkLink._patient_outcome``) is a step of its own,
    ``WAIT-1``, ``WAIT-2``..., after the step it interrupted, which goes on after it."""
    keys: list[str] = list(STEPS)
    spans: list[tuple[str, float]] = []
    for name, at in seen:
        if name.startswith(WAIT_PHASE):
            if not spans:
                key = WAIT
                keys.insert(0, key)
            else:
                key = f"{WAIT}-{sum(k.startswith(WAIT + '-') for k in keys) + 1}"
                after = spans[-1][0]
                keys.insert(min(keys.index(after) + 1, keys.index(END)), key)
        else:
            key = _PHASE_STEP.get(name, name)
            if key not in STEPS:
                continue
        if not spans or spans[-1][0] != key:
            spans.append((key, at))
    return tuple(keys), spans


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
