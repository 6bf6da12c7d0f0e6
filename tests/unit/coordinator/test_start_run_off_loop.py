"""StartRun plans and stores a run off the coordinator's event loop.

A deny list of 170,000 items took ~1.3 s to check, encode and store, all on the loop: every
device's GetTask and every admin call waited that long. The work that grows with the request
(validation, encoding, the tree, the store's write) runs in a worker thread now; each step
records whether it ran on a thread with a running event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fedhh.codec import Codec
from fedhh.config import RunConfig
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store


def _on_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_a_run_with_a_deny_list_is_planned_and_stored_off_the_event_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, bool] = {}

    def watched(owner: Any, name: str) -> None:
        step: Callable[..., Any] = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            seen[name] = seen.get(name, False) or _on_loop()
            return step(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)

    for owner, name in ((RunConfig, "validate"), (RunConfig, "to_dict"),
                        (Codec, "encode_many"), (Store, "create_run")):
        watched(owner, name)
    store = Store(tmp_path / "coordinator.sqlite")
    config = RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400, min_devices=300,
                       deny_list=tuple(f"item{i}" for i in range(2_000)))
    row = asyncio.run(create_run(store, config, "d", LifetimeBudget(eps=1e9, delta=0.5)))
    assert (row.run_id, row.state, len(row.deny_codes)) == ("d", "pending", 2_000)
    assert seen == {"validate": False, "to_dict": False, "encode_many": False,
                    "create_run": False}
