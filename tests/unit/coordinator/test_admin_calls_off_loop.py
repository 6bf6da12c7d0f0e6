"""The coordinator's admin calls do their work off its event loop, where it grows with the run.

StartRun checked, encoded and stored a deny list of 170,000 items in ~1.3 s on the loop; each
later call read the run's row whole (its deny list decoded), checked its config and converted it
to the wire there: with 1,000,000 items (``MAX_DENY_ITEMS``) a GetRun, a ListRuns entry or a
CancelRun held it ~1 s, a GetResults minutes, during which the coordinator answered no device
and no caller (``fedhh admin wait`` polls GetRun through a run). Each step records whether it
ran with a running event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from admin_service_kit import METADATA, admin_stub

from fedhh.codec import Codec
from fedhh.config import RunConfig
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator import service
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store


class Runner:
    def wake(self) -> None:
        pass

    def progress_of(self, run_id: str) -> pb.Progress | None:
        return pb.Progress(round=1, phase="check-in") if run_id == "kept" else None


def _on_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _watch(monkeypatch: pytest.MonkeyPatch, steps: tuple[tuple[Any, str], ...]
           ) -> dict[str, bool]:
    """name -> whether a call of it ran on the event loop's thread (absent: not called)."""
    on_loop: dict[str, bool] = {}

    def watched(name: str, step: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            on_loop[name] = on_loop.get(name, False) or _on_loop()
            return step(*args, **kwargs)

        return wrapper

    for owner, name in steps:
        monkeypatch.setattr(owner, name, watched(name, getattr(owner, name)))
    return on_loop


def test_a_run_with_a_deny_list_is_planned_and_stored_off_the_event_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_loop = _watch(monkeypatch, ((RunConfig, "validate"), (RunConfig, "to_dict"),
                                   (Codec, "encode_many"), (Store, "create_run")))
    store = Store(tmp_path / "coordinator.sqlite")
    config = RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400, min_devices=300,
                       deny_list=tuple(f"item{i}" for i in range(2_000)))
    row = asyncio.run(create_run(store, config, "d", LifetimeBudget(eps=1e9, delta=0.5)))
    assert (row.run_id, row.state, len(row.deny_codes)) == ("d", "pending", 2_000)
    assert on_loop == {"validate": False, "to_dict": False, "encode_many": False,
                       "create_run": False}


def test_each_admin_call_reads_the_stored_run_off_the_event_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "coordinator.sqlite")
    config = RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400, min_devices=300,
                       deny_list=("spam", "eggs"))
    asyncio.run(create_run(store, config, "kept"))
    on_loop = _watch(monkeypatch, ((Store, "run"), (service, "to_proto"),
                                   (service, "from_proto")))

    async def calls() -> dict[str, Any]:
        async with admin_stub(store, Runner()) as stub:
            answers: dict[str, Any] = {}
            for name, request in (("GetRun", pb.GetRunRequest(run_id="kept")),
                                  ("ListRuns", pb.ListRunsRequest()),
                                  ("GetResults", pb.GetResultsRequest(run_id="kept")),
                                  ("StartRun", pb.StartRunRequest(
                                      run_id="new", config=pb.RunConfig(
                                          eps_agg=4.0, target_devices=400, min_devices=300))),
                                  ("CancelRun", pb.CancelRunRequest(run_id="new"))):
                on_loop.clear()
                answers[name] = (await getattr(stub, name)(request, metadata=METADATA,
                                                           timeout=60), dict(on_loop))
            return answers

    answers = asyncio.run(calls())
    for name, (_, steps) in answers.items():
        assert steps and not any(steps.values()), (name, steps)
    # (the answers as before: the progress the runner gives, read on the loop)
    assert answers["GetRun"][0].progress.phase == "check-in"
    assert list(answers["GetRun"][0].config.deny_list) == ["spam", "eggs"]
    assert [r.progress.phase for r in answers["ListRuns"][0].runs] == ["check-in"]
    assert list(answers["GetResults"][0].deny_list) == ["spam", "eggs"]
    assert answers["StartRun"][0].state == "pending"
    assert answers["CancelRun"][0].state == "cancelled"
