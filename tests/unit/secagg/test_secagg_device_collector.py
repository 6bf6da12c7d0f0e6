"""What a device keeps of each neighbour through a round (two keys from share keys on, the
partner's shares from masked input on) is bytes in tables of ids, which CPython's cycle
collector does not track. A load test's device process holds k of them for each of its
thousands of devices: before, an object of three fields and a tuple of two ints per neighbour
were most of what the collector's youngest generation walked there (375,000 of 974,000
objects at 5,000 devices a process)."""

from __future__ import annotations

import gc
from collections.abc import Callable

import pytest
from secagg_testkit import drive_to

from fedhh.secagg.messages import Stage
from fedhh.secagg.simulate import make_cohort


def _tracked_left(n: int, stage: Stage) -> int:
    """Net objects the collector tracks that one device's answer to ``stage`` leaves alive,
    on a complete graph of ``n`` devices (k = n - 1 neighbours)."""
    k = n - 1
    driver = drive_to(make_cohort(n=n, dimension=12, k=k, t=k // 2 + 1, n_min=n // 2, seed=3),
                      stage)
    u = min(driver.pending)
    device, request = driver.devices[u], driver.pending[u]
    answer: Callable[[], object] = (
        (lambda: device.share_keys(request)) if stage is Stage.SHARE_KEYS  # type: ignore[arg-type]
        else (lambda: device.masked_input(request, driver.reports[u])))  # type: ignore[arg-type]
    gc.collect()
    gc.disable()  # (the count below is the youngest generation's: no collection may reset it)
    try:
        before = gc.get_count()[0]
        answered = answer()  # (held while counted: a device sends it, or keeps it to resend)
        left = gc.get_count()[0] - before
    finally:
        gc.enable()
    del answered
    return left


@pytest.mark.parametrize("stage", [Stage.SHARE_KEYS, Stage.MASKED_INPUT],
                         ids=["share keys", "masked input"])
def test_what_a_device_keeps_per_neighbour_is_not_tracked_by_the_collector(
        stage: Stage) -> None:
    _tracked_left(8, stage)  # (first: the module-level memos' one-off entries)
    # 16 neighbours more leave no tracked object more (before: 16 more at each stage)
    assert _tracked_left(32, stage) == _tracked_left(16, stage)
