"""Back-pressure on a host too slow for the configured stage windows (issue 30): the next
attempt of a round whose attempt aborted with too few devices in time gets longer windows.

Lateness is told from the aggregation service's per-stage counts: devices that advertised keys
and then were not accepted at a later stage took part and missed a window (late, or dropped
out). A cohort short at the first stage alone is not stretched for: devices that refuse a round
never contact the service, and those are not helped by time. Each such abort doubles the
windows of the round's next attempt, up to ``STRETCH_MAX`` times the configured ones and a last
deadline the service accepts; an abort for another reason (a check-in short of devices, the
service lost) keeps the stretch the attempt had; a new round starts again from the configured
windows. The stretch an attempt ran with is kept in its round summary (``STRETCH``), so a
restarted coordinator plans the next attempt as the stopped one would have. A stretched attempt
whose config the service refused (one started with a --max-round-seconds below the default
refuses a last deadline past it) caps the round's later attempts at half its stretch (``CAP``,
kept from attempt to attempt); another refusal (a busy service) keeps the stretch. Windows
are no privacy parameter: nothing about charging depends on them.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from fedhh.backoff import ceiling
from fedhh.secagg.config import MAX_ROUND_S

# The round summary's keys: the factor the attempt's windows were stretched by, and the mark
# that it aborted with devices that took part and then missed a stage's window.
STRETCH = "window_stretch"
LATE = "too_few_in_time"
# The service refused to open the attempt while its windows were stretched, and the most the
# round's next attempts stretch (``stretch_cap``).
REFUSED = "stretch_refused"
CAP = "stretch_cap"
# The most an attempt's windows are stretched: a round that is still short at 8 times its
# windows needs an operator (fewer devices, a quieter host), not a longer wait.
STRETCH_MAX = 8
# The aggregation service refuses a config whose last deadline is further ahead than its
# ``max_round_s`` (--max-round-seconds; no service says its own, so its default): a stretch
# past it would turn every later attempt into a refusal.
STRETCHED_ROUND_MAX_MS = int(MAX_ROUND_S * 1000)


def fell_short(stages: Mapping[str, int]) -> bool:
    """Whether a stage accepted fewer devices than the stage before it (``stages`` in the
    protocol's order): devices that took part and then missed a window, or dropped out."""
    return any(later < earlier for earlier, later in itertools.pairwise(stages.values()))


def aborted_late(reason: str, reached_unmask: bool, stages: Mapping[str, int]) -> bool:
    """Whether an attempt aborted with too few devices in time: for too few devices before
    unmasking, with devices that took part and then missed a stage's window."""
    return not reached_unmask and "too_few_devices" in reason and fell_short(stages)


def stretch_cap(previous: Mapping[str, Any] | None) -> int:
    """The most an attempt stretches its windows by, from the round summary of the round's
    previous attempt: ``STRETCH_MAX``, or half a stretch the service refused to open in an
    earlier attempt of the round. The limit ``STRETCHED_ROUND_MAX_MS`` assumes is the default
    one; a service started with a lower --max-round-seconds refused every later attempt alike
    (their windows stretched as far or further), and the run failed after --max-attempts."""
    if not previous:
        return STRETCH_MAX
    cap = int(previous.get(CAP, STRETCH_MAX))
    if previous.get(REFUSED) is True:
        cap = min(cap, max(int(previous.get(STRETCH, 1)) // 2, 1))
    return cap


def next_stretch(previous: Mapping[str, Any] | None, windows: Sequence[int]) -> int:
    """The factor an attempt stretches the configured ``windows`` by, from the round summary
    of the round's previous attempt (None: the round's first attempt)."""
    if not previous:
        return 1
    factor = int(previous.get(STRETCH, 1))
    if previous.get(LATE) is True:
        factor = int(ceiling(factor, STRETCH_MAX, 1))  # doubled, at most the cap
    factor = min(factor, stretch_cap(previous))
    while factor > 1 and sum(windows) * factor > STRETCHED_ROUND_MAX_MS:
        factor //= 2
    return max(factor, 1)


def stretched(windows: Sequence[int], factor: int) -> tuple[int, ...]:
    return tuple(ms * factor for ms in windows)
