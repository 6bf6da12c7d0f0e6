"""What a device keeps of each neighbour through a round (two keys from share keys on, the
partner's shares from masked input on) is bytes in tables of ids, which CPython's cycle
collector does not track. A load test's device process holds k of them for each of its
thousands of devices: before, an object of three fields and a tuple of two ints per neighbour
were most of what the collector's youngest generation walked there (375,000 of 974,000
objects at 5,000 devices a process).

The count is of the tracked objects reachable from the device (deterministic, whatever other
threads of the process allocate meanwhile; a count of the collector's allocations was not, in
a full test run)."""

from __future__ import annotations

import gc
import types

from secagg_testkit import drive_to

from fedhh.secagg.messages import Stage
from fedhh.secagg.simulate import make_cohort

SHARED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
          types.MethodType, types.CodeType)


def _tracked(root: object) -> int:
    """The collector-tracked objects reachable from ``root`` (classes, modules and functions,
    shared by every device, left out)."""
    seen: set[int] = set()
    stack, tracked = [root], 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, SHARED):
            continue
        seen.add(id(obj))
        tracked += gc.is_tracked(obj)
        stack.extend(gc.get_referents(obj))
    return tracked


def _kept(n: int, stage: Stage) -> tuple[int, int]:
    """Tracked objects one device holds before and after its answer to ``stage``, on a
    complete graph of ``n`` devices (k = n - 1 neighbours)."""
    k = n - 1
    driver = drive_to(make_cohort(n=n, dimension=12, k=k, t=k // 2 + 1, n_min=n // 2, seed=3),
                      stage)
    u = min(driver.pending)
    device, request = driver.devices[u], driver.pending[u]
    before = _tracked(device)
    if stage is Stage.SHARE_KEYS:
        device.share_keys(request)  # type: ignore[arg-type]
    else:
        device.masked_input(request, driver.reports[u])  # type: ignore[arg-type]
    return before, _tracked(device)


def test_the_keys_kept_from_share_keys_are_one_tracked_object_a_neighbour_at_most() -> None:
    (_, small), (_, large) = _kept(16, Stage.SHARE_KEYS), _kept(32, Stage.SHARE_KEYS)
    assert large - small <= 16  # 16 neighbours more (before: 32 more)


def test_the_shares_kept_from_masked_input_add_no_tracked_object_a_neighbour() -> None:
    added = [after - before for before, after in (_kept(n, Stage.MASKED_INPUT)
                                                  for n in (16, 32))]
    assert added[0] == added[1]  # (before: 22 and 38)
