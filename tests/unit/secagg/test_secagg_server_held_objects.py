"""The Python objects a SecAgg+ server holds per device from the key sharing's close on
(issue 30): a worker holds them among tens of thousands of streams' objects and reads them
at the later closes, so a device's mask partners (~k ids) are runs of one array and the
requests' id tuples share one int object per device, not one int per partner each."""

from __future__ import annotations

import gc
import types

from secagg_testkit import drive_to, small_cohort

from fedhh.secagg.messages import Stage

N = 400  # (ids above 256, CPython's cached ints, make an int object each where not shared)


def _objects_held(root: object) -> int:
    """Distinct objects reachable from ``root`` (classes, modules and functions left out)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(obj))
        stack.extend(gc.get_referents(obj))
    return len(seen)


def _held_per_device(k: int) -> list[float]:
    """Objects the server holds a device once each of the masked input, consistency and
    unmask stages has opened."""
    cohort = small_cohort(n=N, k=k, t=k // 2 + 1, n_min=N // 2, dimension=8,
                          device_auth=True, consistency_check=True)
    driver = drive_to(cohort, Stage.MASKED_INPUT)
    held = []
    for stage in (Stage.MASKED_INPUT, Stage.CONSISTENCY_CHECK, Stage.UNMASK):
        while driver.server.stage < stage:
            driver.step()
        assert driver.server.stage == stage, driver.outcome.abort
        pending, driver.pending = driver.pending, {}  # (the server keeps its own references)
        held.append(_objects_held(driver.server) / N)
        driver.pending = pending
    return held


def test_objects_held_per_device_do_not_grow_with_k() -> None:
    """6 and 18 neighbours a device: the same objects a device at each stage, within one
    (before: 4-5 more at 18, an int per partner above 256 in the partners' tuples and in
    each request's)."""
    few, many = _held_per_device(6), _held_per_device(18)
    growth = [round(b - a, 2) for a, b in zip(few, many, strict=True)]
    assert max(growth) < 1.0, growth


def _answers_held_per_device(k: int) -> float:
    """Objects the server holds a device more once every device answered the unmask stage
    (the stage still open) than when it opened."""
    cohort = small_cohort(n=N, k=k, t=k // 2 + 1, n_min=N // 2, dimension=8)
    driver = drive_to(cohort, Stage.UNMASK)
    pending, driver.pending = driver.pending, {}
    opened = _objects_held(driver.server)
    driver.pending = pending
    driver.answer()
    assert driver.outcome.abort is None and driver.server.stage == Stage.UNMASK
    driver.pending = {}
    return (_objects_held(driver.server) - opened) / N


def test_the_unmask_answers_held_do_not_grow_with_k() -> None:
    """An answer's shares go into the stage's store, which rebuilds the secrets; what is kept
    of the answer itself, to tell a resend from different shares, is a digest: 7 objects a
    device at 6 and 18 neighbours. Before, the whole response was kept to the round's end, its
    (owner, share) pairs with it: 20 and 44."""
    few, many = _answers_held_per_device(6), _answers_held_per_device(18)
    assert many - few < 1.0 and many < 8, (few, many)
