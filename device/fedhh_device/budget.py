"""A device's own privacy budget and its memory of what it reported, kept on the device.

The coordinator's ledgers are the operator's promise; this is the device's: whoever signed a
task, a device

- refuses a report whose local epsilon would take the sum of its reports' local epsilons over
  the last ``period_s`` seconds above ``cap`` (each report is eps_local-LDP, and by basic
  composition, Dwork and Roth 2014, Theorem 3.16, k such reports are (sum eps_i)-LDP). The sum
  is exact, of the binary values the randomizer runs at, and is compared with the cap without
  tolerance (``fedhh.device.budget_sums``; docs/privacy.md, "Budgets are compared exactly"):
  ten reports of 0.1 exceed a cap of 1.0, so the tenth is refused (before, a float sum was
  compared with the cap times 1 + 1e-9);
- answers every attempt of one round of one run with the *same* report: a retried round
  (after an abort, a lost aggregator, a restart of anything) never gets fresh randomness, so
  however many attempts are unmasked, together they reveal no more than one report does. A
  second attempt whose query differs from the first's (another prefix list, segment, epsilon,
  domain) is refused: answering it would need a fresh report.

The record is written (atomically) before the report leaves the device, so a crash between the
two cannot lose a spend. ``path`` None keeps it in memory (tests).

Time. A spend is dated, and the period that ends "now" is measured, with two clocks the device
has: its own and the task's signed last deadline T (``deadline_unix_ms``, under the
coordinator's signature; a report is made before it, so an honest coordinator's T is at or after
the report). A spend is dated max(device clock, T) and counted while its date is at or after
min(device clock, T) - ``period_s``: a spend is dated no earlier than it happened, and "now" is
no later than it is, if either clock is right. Before, both were the device's clock alone: a
device 40 days behind, corrected, found every spend it made meanwhile 40 days old and spent the
cap again at once; a clock jumping ahead freed the spends the same way. A clock behind, or one
jumping back, only counts spends longer; a signed T far ahead holds a spend that much longer
(the coordinator can withhold tasks anyway); a task without T (0) has the device clock alone.
When the clock is ahead and the coordinator honest, "now" is at most T, so a spend can be
freed at most the span from a report to its round's last deadline early (and the clock check
of ``secagg_run`` refuses a clock more than 30 s past the first stage's deadline).

What is kept. Spends are kept while counted; a run's last report is kept while the spend of its
round is, and at most ``MAX_REPORTS`` of them, the latest spent first (before, every run's last
report was kept for ever). A round answered again whose report was dropped is refused while
its spend is counted (a round of a run before the run's latest, or past the count bound): the
coordinator's ledger charges every attempt of a round as one report (docs/privacy.md,
"Retries"). Once its spend has left the period it would get a fresh report, charged like any
other, so the cap holds either way.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fedhh.device.budget_sums import exceeds, exceeds_in_words
from fedhh.errors import ConfigError, PrivacyError
from fedhh.output_paths import open_new
from fedhh.v1 import coordinator_pb2 as pb

MAX_REPORTS = 256


def query_digest(task: pb.Task) -> str:
    """What a report depends on besides the device's data: the round's query and mechanism."""
    digest = hashlib.sha256()
    for part in (task.run_id.encode(), task.round.to_bytes(4, "big"),
                 task.prefix_bits.to_bytes(4, "big"), task.segment_bits.to_bytes(4, "big"),
                 np.asarray(task.prefixes, dtype=">u8").tobytes(), b"|",
                 np.asarray(task.deny_list, dtype=">u8").tobytes(), b"|",
                 repr(task.eps_local).encode(), task.codec.encode(),
                 task.max_bits.to_bytes(4, "big"), task.selection.encode(),
                 bytes([task.prefix_conditioning])):
        digest.update(len(part).to_bytes(4, "big") + part)
    return digest.hexdigest()


@dataclass
class DeviceSpend:
    run_id: str
    round: int
    eps_local: float
    at: float


@dataclass
class SavedReport:
    run_id: str
    round: int
    digest: str
    ones: list[int]


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value)


def _check_record(budget: DeviceBudget) -> None:
    """ValueError unless every spend and report read has its fields' types: a spend whose
    eps_local was NaN (JSON that Python reads) made ``spent()`` NaN, and the cap, compared with
    NaN, never refused a report again; one of another type ended each task with a TypeError."""
    for i, spend in enumerate(budget.spends):
        if not (isinstance(spend.run_id, str) and isinstance(spend.round, int)
                and _number(spend.eps_local) and spend.eps_local >= 0 and _number(spend.at)):
            raise ValueError(f"spend {i} is not a run id, a round, a finite eps_local >= 0 and "
                             "a finite time")
    for key, report in budget.reports.items():
        if not (isinstance(report.run_id, str) and isinstance(report.round, int)
                and isinstance(report.digest, str) and isinstance(report.ones, list)
                and all(isinstance(i, int) and not isinstance(i, bool) for i in report.ones)):
            raise ValueError(f"the report of run {key!r} is not a run id, a round, a digest "
                             "and a list of positions")


def _why_above(charges: list[float], cap: float) -> str:
    """Why ``charges``, which exceed ``cap`` (``exceeds``), do. Where their float sum is within
    the cap (ten of 0.1 under 1.0), the exact sum, the excess and a charge's binary value
    (``exceeds_in_words``, the coordinator's words): before, "their exact sum is above the
    cap" beside "0.9 of 1 used" and "asks for 0.1" left the user to find why. Web devices word
    it alike (clients/web/src/budget.ts ``whyAbove``; the vectors' ``budget_refusals``)."""
    try:
        within = math.fsum(charges) <= cap
    except OverflowError:  # (fsum's sum past the largest double: above every finite cap)
        within = False
    return exceeds_in_words(charges, cap) if within else "their exact sum is above the cap"


@dataclass
class DeviceBudget:
    """One device's spends and its latest report per run (module docstring)."""

    cap: float
    period_s: float
    path: Path | None = None
    spends: list[DeviceSpend] = field(default_factory=list)
    reports: dict[str, SavedReport] = field(default_factory=dict)
    clock: Callable[[], float] = time.time

    @classmethod
    def load(cls, path: Path | None, cap: float, period_s: float) -> DeviceBudget:
        if not cap > 0 or not period_s > 0:
            raise ConfigError(f"a device budget needs cap > 0 and a positive period, got {cap} "
                              f"and {period_s}")
        budget = cls(cap, period_s, path)
        if path is not None and path.exists():
            try:
                data = json.loads(path.read_text())
                budget.spends = [DeviceSpend(**s) for s in data["spends"]]
                budget.reports = {k: SavedReport(**r) for k, r in data["reports"].items()}
                _check_record(budget)
            # (RecursionError: arrays nested thousands deep; before, a traceback)
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
                raise ConfigError(f"{path} is corrupt: {error}") from None
            # (a folder or an unreadable file there: the task is refused as for a corrupt one,
            # its seat given up; before, the OSError failed the task as a bug would, and the
            # seat was kept, never used)
            except OSError as error:
                raise ConfigError(f"{path} cannot be read: {error.strerror or error}") from None
        return budget

    def spent(self, now: float | None = None) -> float:
        """Local epsilon counted at ``now`` (the device clock if None): every spend dated at or
        after ``now - period_s``, those dated after ``now`` included."""
        since = (self.clock() if now is None else now) - self.period_s
        return sum(s.eps_local for s in self.spends if s.at >= since)

    def _times(self, task: pb.Task) -> tuple[float, float]:
        """(now, date of a spend) for ``task``: min and max of the device clock and the task's
        signed last deadline (module docstring, "Time"); the clock alone without one."""
        clock = self.clock()
        if task.deadline_unix_ms <= 0:
            return clock, clock
        signed = task.deadline_unix_ms / 1000
        return min(clock, signed), max(clock, signed)

    def _prune(self, now: float) -> None:
        """Drop the spends no longer counted at ``now``, then the reports whose round's spend
        went with them, then all but the ``MAX_REPORTS`` latest spent (module docstring)."""
        self.spends = [s for s in self.spends if s.at >= now - self.period_s]
        latest = {(s.run_id, s.round): i for i, s in enumerate(self.spends)}
        kept = sorted((latest[(r.run_id, r.round)], k) for k, r in self.reports.items()
                      if (r.run_id, r.round) in latest)[-MAX_REPORTS:]
        keep = {k for _, k in kept}
        self.reports = {k: r for k, r in self.reports.items() if k in keep}

    def report(self, task: pb.Task, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """The report for ``task``: the one this round already produced, or a new one
        (``compute()``) recorded, with its spend, before it is returned."""
        digest = query_digest(task)
        previous = self.reports.get(task.run_id)
        if previous is not None and previous.round == task.round:
            if previous.digest != digest:
                raise PrivacyError(f"round {task.round} of run {task.run_id} came back with "
                                   "another query; answering would need a fresh report")
            return np.asarray(previous.ones, dtype=np.int64)
        if not task.eps_local > 0:
            raise ConfigError(f"the task's eps_local must be > 0, got {task.eps_local}")
        now, _ = self._times(task)
        if any(s.run_id == task.run_id and s.round == task.round and s.at >= now - self.period_s
               for s in self.spends):
            # (the coordinator's ledger charges a retried round as one report, docs/privacy.md
            # "Retries": a fresh one would break that while the first is still counted)
            raise PrivacyError(f"round {task.round} of run {task.run_id} was answered and its "
                               "report is no longer kept; answering again would need a fresh "
                               "report")
        charges = [s.eps_local for s in self.spends if s.at >= now - self.period_s]
        charges.append(task.eps_local)
        if exceeds(charges, self.cap):
            # (the cap as repr, the form the exact comparison's words give it: before, "0.9 of
            # 1 used" and "above the cap 1.0" in one refusal)
            raise PrivacyError(f"this device's budget is spent: {self.spent(now):.4g} of "
                               f"{self.cap!r} used in the period, the task asks for "
                               f"{task.eps_local:.4g}, and {_why_above(charges, self.cap)}")
        ones = np.asarray(compute(), dtype=np.int64)
        now, at = self._times(task)
        self.spends.append(DeviceSpend(task.run_id, task.round, task.eps_local, at))
        self.reports[task.run_id] = SavedReport(task.run_id, task.round, digest, ones.tolist())
        self._prune(now)
        self._save()
        return ones

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        # Shallow field dicts and one json.dumps: asdict deep-copies every index of a report and
        # json.dump encodes in pure Python; together they were most of a load-test device's
        # CPU outside cryptography (a report at D = 2^16 holds thousands of indices).
        data = {"spends": [vars(s) for s in self.spends],
                "reports": {k: vars(r) for k, r in self.reports.items()}}
        fd = open_new(tmp)
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(data))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
