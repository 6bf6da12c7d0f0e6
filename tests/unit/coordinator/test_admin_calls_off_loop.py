"""The coordinator's admin calls, and the runner's load of a run it drives, do their work off
its event loop, where it grows with the run.

StartRun checked, encoded and stored a deny list of 170,000 items in ~1.3 s on the loop; each
later call read the run's row whole (its deny list decoded), checked its config and converted it
to the wire there: with 1,000,000 items (``MAX_DENY_ITEMS``) a GetRun, a ListRuns entry or a
CancelRun held it ~1 s, a GetResults minutes, during which the coordinator answered no device
and no caller (``fedhh admin wait`` polls GetRun through a run). Each step records whether it
ran with a running event loop. The runner read the run's row and built its tree and ledger
(``RunParts.load``) on the loop each time it drove the run, after every store outage too:
~2.2 s with 1,000,000 items.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from admin_service_kit import METADATA, admin_stub
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from single_aggregator_kit import SingleAggregator

from fedhh.codec import Codec
from fedhh.config import RunConfig
from fedhh.errors import StateError
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator import runner, service
from fedhh_coordinator.aggregation import DeviceAddresses
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runs import RunParts, create_run
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
    # (a GetRun, StartRun or CancelRun answer reads the row's changing part, its fixed part
    # loaded once: ``FixedRuns``)
    on_loop = _watch(monkeypatch, ((Store, "run"), (Store, "run_head"), (service, "to_proto"),
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


def test_tokens_are_minted_and_counted_off_the_event_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """50,000 tokens drawn, hashed and stored took 1 to 6 s on the loop; their counts scan
    every token ever minted."""
    store = Store(tmp_path / "coordinator.sqlite")
    on_loop = _watch(monkeypatch, ((service, "mint"), (Store, "add_new_enrollment_tokens"),
                                   (Store, "enrollment")))

    async def calls() -> tuple[int, int]:
        async with admin_stub(store, Runner()) as stub:
            minted = await stub.MintEnrollmentTokens(pb.MintEnrollmentTokensRequest(
                count=3, ttl_s=60), metadata=METADATA, timeout=60)
            counts = await stub.GetEnrollment(pb.GetEnrollmentRequest(), metadata=METADATA,
                                              timeout=60)
            return len(minted.tokens), counts.tokens_unused

    assert asyncio.run(calls()) == (3, 3)
    assert on_loop == {"mint": False, "add_new_enrollment_tokens": False, "enrollment": False}


def test_the_runner_loads_the_run_it_drives_off_the_event_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "coordinator.sqlite")
    # (no device checks in: the one attempt aborts at its 10 ms check-in, and the run ends)
    config = RunConfig(eps_agg=1e6, delta=1e-6, eps_local=4.0, rounds=1, max_bits=10,
                       dim_limit=1 << 10, codec="5bit", target_devices=8, min_devices=5,
                       checkin_ms=10, max_attempts=1, expected_dropout=0.0,
                       corrupt_fraction=0.0, deny_list=("spam", "eggs"))
    asyncio.run(create_run(store, config, "driven"))
    on_loop = _watch(monkeypatch, ((Store, "run"), (RunParts, "load")))
    driver = runner.Runner(store, SingleAggregator(), Ed25519PrivateKey.generate(),  # type: ignore[arg-type]
                           DeviceAddresses("aggregator:7100", "https://aggregator:7180"),
                           Lobby(), LifetimeBudget(eps=1e9, delta=0.5))
    with pytest.raises(StateError, match="released nothing in 1 attempt"):
        asyncio.run(driver.drive("driven"))
    assert on_loop == {"run": False, "load": False}


def test_a_run_cancelled_while_the_runner_loads_it_is_not_driven(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop runs while the run loads: a CancelRun of the pending run meanwhile marks it
    cancelled there, and the runner must not open its rounds under that state."""
    store = Store(tmp_path / "coordinator.sqlite")
    asyncio.run(create_run(store, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                            min_devices=300), "p"))
    load = RunParts.load

    def cancelled_meanwhile(row: Any) -> RunParts:
        store.set_run_state("p", "cancelled", "cancelled by the operator")
        return load(row)

    monkeypatch.setattr(RunParts, "load", cancelled_meanwhile)
    driver = runner.Runner(store, SingleAggregator(), Ed25519PrivateKey.generate(),  # type: ignore[arg-type]
                           DeviceAddresses("aggregator:7100", "https://aggregator:7180"),
                           Lobby(), LifetimeBudget(eps=1e9, delta=0.5))
    asyncio.run(asyncio.wait_for(driver.drive("p"), 60))
    assert (store.run("p").state, store.rounds("p")) == ("cancelled", [])
