"""A device process remembers the last tasks each device took, not every one: a set of every
(run, round, attempt) grew for as long as the process ran (a device of a fleet that runs for
months took one entry a round)."""

from __future__ import annotations

from fedhh_device.fleet import REMEMBERED_TASKS, Remembered


def test_the_last_tasks_are_remembered_and_the_oldest_forgotten() -> None:
    taken: Remembered[tuple[str, int, int]] = Remembered(REMEMBERED_TASKS)
    keys = [(f"run-{i % 3}", i, 1 + i % 2) for i in range(10 * REMEMBERED_TASKS)]
    for key in keys:
        taken.add(key)
        assert key in taken
    assert len(taken) == REMEMBERED_TASKS
    assert all(key in taken for key in keys[-REMEMBERED_TASKS:])
    assert not any(key in taken for key in keys[:-REMEMBERED_TASKS])


def test_a_task_taken_again_is_not_counted_twice() -> None:
    taken: Remembered[tuple[str, int, int]] = Remembered(bound=2)
    for key in [("r", 1, 1), ("r", 1, 1), ("r", 2, 1)]:
        taken.add(key)
    assert len(taken) == 2 and ("r", 1, 1) in taken and ("r", 2, 1) in taken
