"""What `fedhh up`'s summary says of a browser device whose page posted no outcome of its last
round (a tab closed or frozen in it), and of one late round after round (fedhh/cli/webdemo.py
``summary``; the page's own words for the second: clients/web/demo/rounds.ts)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from fedhh.cli.webdemo import LATE_IN_A_ROW, DemoPage, late_in_a_row, summary, task_name

ROOT = Path(__file__).resolve().parents[2]


def task(name: str, outcome: str, contributed: bool, detail: str = "") -> dict[str, Any]:
    return {"task": name, "outcome": outcome, "contributed": contributed, "detail": detail}


def device(state: str, tasks: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"user": 8, "deviceId": "3", "state": state, "tasks": tasks, "spent": 1.5, **fields}


FIRST = task("demo round 1.1", "completed", True)
ATTEMPTS = {task_name("demo", 1, 1): ("released", 60), task_name("demo", 2, 1): ("released", 57),
            task_name("demo", 3, 1): ("aborted", 0)}


def test_a_device_whose_page_stopped_after_its_masked_input_reads_contributed() -> None:
    """The page closed in unmask, round 2 released: its input is in the sum. Before, the line
    ended at round 1, as if the device had had no part in round 2."""
    line = summary([device("in a round", [FIRST], task="demo round 2.1", stage="unmask",
                           sent=True)], ATTEMPTS)
    assert line == ["user 8 (device 3, local eps spent 1.500): demo round 1.1: contributed, "
                    "demo round 2.1: contributed (its masked input was accepted and the round "
                    "released over 57; its outcome not yet posted by the page)"]


def test_a_device_whose_page_stopped_before_its_masked_input_is_told_as_such() -> None:
    """Closed in share keys: no outcome, where the page last showed it, and what became of
    the round. Before, 'no round yet' for a device that had taken the round's task."""
    line = summary([device("in a round", [], task="demo round 2.1", stage="share keys",
                           sent=False)], ATTEMPTS)
    assert line == ["user 8 (device 3, local eps spent 1.500): demo round 2.1: no outcome "
                    "posted yet (the page last showed it in share keys; the round was "
                    "released over 57)"]
    line = summary([device("in a round", [], task="demo round 3.1", stage="unmask",
                           sent=True)], ATTEMPTS)
    assert line[0].endswith("demo round 3.1: no outcome posted yet (the page last showed it in "
                            "unmask, its masked input sent; the round was aborted)")
    line = summary([device("in a round", [], task="demo round 9.1", stage="")], ATTEMPTS)
    assert line[0].endswith("demo round 9.1: no outcome posted yet (the page last showed it in "
                            "it)")


def test_an_outcome_posted_is_not_told_twice_and_ends_the_wait(tmp_path: Path) -> None:
    """Between a round's result and the next check-in the page shows the device in the round
    with the round's outcome posted: the summary names the outcome once, and `fedhh up` does
    not wait for another (before, it waited SETTLE_S for the state to change)."""
    posted = device("in a round", [FIRST], task="demo round 1.1", stage="unmask", sent=True)
    assert summary([posted], ATTEMPTS) == [
        "user 8 (device 3, local eps spent 1.500): demo round 1.1: contributed"]
    (tmp_path / "browser").mkdir()
    (tmp_path / "browser" / "demo.js").write_text("// the bundle")
    with DemoPage(tmp_path, None) as page:
        page._posted(json.dumps({"devices": [posted]}).encode())
        assert page.wait_settled(0)  # (one look: no wait)
        page._posted(b'{"devices": [{"user": 8, "state": "in a round", "task": "demo round '
                     b'2.1", "tasks": []}]}')
        assert not page.wait_settled(0)


def test_a_device_late_round_after_round_is_told_what_to_do() -> None:
    late = [task(f"demo round {r}.1", "late", False, "the round has finished")
            for r in range(2, 2 + LATE_IN_A_ROW)]
    [line] = summary([device("checking in", [FIRST, *late])])
    assert line.endswith(f"; late in its last {LATE_IN_A_ROW} rounds in a row, each charged "
                         "its report's eps with its report in no sum: its browser is too slow "
                         "for the stage windows (keep its tab in front, or give the stages "
                         "longer windows: fedhh up --stage-ms, --share-keys-ms)")
    # Fewer in a row, or the last late one with its input in (its report counted): nothing.
    assert "in a row" not in summary([device("checking in", [FIRST, *late[1:]])])[0]
    kept = task("demo round 9.1", "late", True)
    assert late_in_a_row([*late, kept]) == 0
    assert late_in_a_row([*late, FIRST]) == 0 and late_in_a_row(late) == LATE_IN_A_ROW


def test_the_page_tells_late_rounds_in_a_row_at_the_same_count() -> None:
    source = (ROOT / "clients" / "web" / "demo" / "rounds.ts").read_text()
    [count] = re.findall(r"export const LATE_IN_A_ROW = (\d+);", source)
    assert int(count) == LATE_IN_A_ROW


def test_a_late_answer_after_an_accepted_input_in_a_released_round_is_told_in_the_sum(
        tmp_path: Path) -> None:
    """Its answer to a later stage came late: its input is in the released sum, which the run's
    attempts tell (before, 'contributed (late)' alone, and the page left the round out of its
    count). The page is told the released attempts in progress.json as they come."""
    tasks = [task("demo round 2.1", "late", True), task("demo round 3.1", "late", True)]
    [line] = summary([device("checking in", tasks)], ATTEMPTS)
    assert line.endswith("demo round 2.1: contributed (late; the round was released over 57 "
                         "with its input), demo round 3.1: contributed (late)")
    (tmp_path / "browser").mkdir()
    (tmp_path / "browser" / "demo.js").write_text("// the bundle")

    class Round:
        def __init__(self, round_: int, state: str) -> None:
            self.round, self.attempt, self.state = round_, 1, state

    class Run:
        def __init__(self) -> None:
            self.run_id = "demo"
            self.rounds = [Round(1, "released"), Round(2, "aborted"), Round(3, "open")]

    told: list[Any] = []
    with DemoPage(tmp_path, None) as page:
        page.following(told.append)(Run())
        answer = page._answer("/progress.json")
        assert len(told) == 1
        assert answer is not None and json.loads(answer[0]) == {
            "lines": [], "released": ["demo round 1.1"]}


def test_the_round_a_page_was_reloaded_in_is_kept_and_told_from_the_attempts(
        tmp_path: Path) -> None:
    """Reloaded in round 2's unmask (its masked input accepted), the page's new load is handed
    round 2's task again and refuses it (its admission was for the old load's keys): round 2
    was released over 57 with its input. Before, the summary said 'demo round 2.1:
    device_aborted (...)' of it alone. A load the page names tells a reload even before any
    round ended (its list of tasks then grows from empty as the old one did)."""
    (tmp_path / "browser").mkdir()
    (tmp_path / "browser" / "demo.js").write_text("// the bundle")
    refused = task("demo round 2.1", "device_aborted", False, "the admission does not verify")

    def post(page: DemoPage, load: str, state: str, tasks: list[dict[str, Any]],
             **fields: Any) -> None:
        page._posted(json.dumps({"load": load, "devices": [
            device(state, tasks, **fields)]}).encode())

    with DemoPage(tmp_path, None) as page:
        post(page, "a", "in a round", [FIRST], task="demo round 2.1", stage="unmask", sent=True)
        post(page, "b", "in a round", [], task="demo round 2.1", stage="checking the config")
        post(page, "b", "checking in", [refused])
        assert summary(page.devices(), ATTEMPTS) == [
            "user 8 (device 3, local eps spent 1.500): demo round 1.1: contributed, demo round "
            "2.1: contributed (its masked input was accepted and the round released over 57; "
            "the page was reloaded in unmask before its outcome), demo round 2.1: "
            "device_aborted (the admission does not verify)"]
    with DemoPage(tmp_path, None) as page:
        # Reloaded in round 1's share keys, before any outcome: nothing of it in the sum.
        post(page, "a", "in a round", [], task="demo round 1.1", stage="share keys")
        post(page, "b", "checking in", [])
        assert summary(page.devices(), ATTEMPTS)[0].endswith(
            "demo round 1.1: no outcome (the page was reloaded in share keys; the round was "
            "released over 60)")
        post(page, "b", "checking in", [])  # the same load again: told once
        assert summary(page.devices(), ATTEMPTS)[0].count("demo round 1.1") == 1
