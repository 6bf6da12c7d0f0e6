"""A device process's failed rounds, logged once per round and cause, not once per device.

A process hosts many simulated devices, and those of one round fail alike when what they share
fails (the aggregator unreachable: every device ends ``unavailable`` at the same stage; a
config below the devices' floors: every device refuses it). Each logged its own warning: 250
lines a round from a 250-device process, the cause drowned in its repetitions. Here the first
device of a round (``run_id``, round, attempt) that fails with a cause (its outcome and the
stage it reached) logs the warning; the others log at debug level, and one warning sums them up
(how many devices, their distinct details, their secagg ids), so that nothing is hidden and an
operator reads one line per cause and round, and one more with the count.

The count is logged once the process has moved on: when a device of a round not seen before
takes part, every round whose devices here have all ended is summed up (a refusal ends a
device's round at once, before the next device's begins, so a round's end here is not when
its last device so far leaves), or when the process stops (``flush``).
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RoundFailures"]

RoundKey = tuple[str, int, int]  # (run_id, round, attempt)
Cause = tuple[str, str]  # (outcome, stage)
# How many distinct details, and devices' secagg ids, a summary names (the most frequent details
# first, the lowest ids; the rest counted).
SHOWN_DETAILS = 5
SHOWN_IDS = 20


@dataclass
class _Failed:
    """The devices of one round here that failed with one cause."""

    devices: int = 0
    details: Counter[str] = field(default_factory=Counter)
    secagg_ids: list[int] = field(default_factory=list)


@dataclass
class _Round:
    users: int = 0
    failed: dict[Cause, _Failed] = field(default_factory=dict)


class RoundFailures:
    """The failures of the rounds this process's devices take part in (module docstring)."""

    def __init__(self, logger: logging.Logger, message: str = "secure aggregation failed",
                 detail_field: str = "detail") -> None:
        self._log = logger
        self._message = message
        self._detail_field = detail_field  # (the field a log reader knows the detail by)
        self._rounds: dict[RoundKey, _Round] = {}  # rounds some device here takes part in
        self._ended: dict[RoundKey, _Round] = {}  # rounds whose devices here have all ended

    @contextlib.contextmanager
    def of(self, key: RoundKey) -> Iterator[RoundFailures.Reporter]:
        """While the caller's device takes part in round ``key``: what it reports its failure
        to (the module docstring says when the round's count is logged)."""
        state = self._rounds.get(key)
        if state is None:
            state = self._ended.pop(key, None)
            if state is None:
                self.flush()  # (a new round: the process has moved on from the ended ones)
                state = _Round()
            self._rounds[key] = state
        state.users += 1
        try:
            yield RoundFailures.Reporter(self, key, state)
        finally:
            state.users -= 1
            if not state.users:
                self._ended[key] = self._rounds.pop(key)

    def flush(self) -> None:
        """Log the count of every round whose devices here have all ended, and forget them."""
        ended, self._ended = self._ended, {}
        for key, state in ended.items():
            self._summarise(key, state)

    def __len__(self) -> int:
        """How many rounds are followed (taking part, or ended and not yet counted)."""
        return len(self._rounds) + len(self._ended)

    class Reporter:
        """One device's way to report how its round failed."""

        def __init__(self, owner: RoundFailures, key: RoundKey, state: _Round) -> None:
            self._owner, self._key, self._state = owner, key, state

        def failed(self, outcome: str, stage: str, secagg_id: int, detail: str,
                   **fields: Any) -> None:
            """This device's round ended ``outcome`` at ``stage``: a warning if it is the
            first of its round here to fail so, else a debug line (counted for the summary)."""
            failed = self._state.failed.setdefault((outcome, stage), _Failed())
            failed.devices += 1
            failed.details[detail] += 1
            failed.secagg_ids.append(secagg_id)
            run_id, round_, attempt = self._key
            extra = {"run_id": run_id, "round": round_, "attempt": attempt,
                     "secagg_id": secagg_id, "outcome": outcome, "stage": stage,
                     self._owner._detail_field: detail, **fields}
            if failed.devices == 1:
                extra["others"] = ("further devices of this process ending so in this round "
                                   "are logged at debug level, and counted once it has moved on")
                self._owner._log.warning(self._owner._message, extra=extra)
            else:
                self._owner._log.debug(self._owner._message, extra=extra)

    def _summarise(self, key: RoundKey, state: _Round) -> None:
        run_id, round_, attempt = key
        for (outcome, stage), failed in state.failed.items():
            if failed.devices < 2:
                continue  # (its one warning said it all)
            shown = dict(failed.details.most_common(SHOWN_DETAILS))
            extra: dict[str, Any] = {
                "run_id": run_id, "round": round_, "attempt": attempt, "outcome": outcome,
                "stage": stage, "devices": failed.devices,
                "secagg_ids": sorted(failed.secagg_ids)[:SHOWN_IDS], "details": shown}
            if len(failed.details) > len(shown):
                extra["other_details"] = len(failed.details) - len(shown)
            self._log.warning(f"{self._message}: {failed.devices} devices of this process in "
                              f"round {round_} (attempt {attempt}), {outcome} at {stage}",
                              extra=extra)
