"""The dashboard displays a run's deny list once, in a thread (``Views.show_deny``).

``run`` decoded every code of it on the coordinator's event loop, and the live run page asks
``run`` every second: a 170,000-item list (codebook unicode, ~0.2 ms a code) held the loop
~35 s each time, no device or caller answered. Each ``display_item`` records whether it ran
with a running event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.codec import Codec
from fedhh.config import RunConfig
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.dashboard.reader import Reader
from fedhh_coordinator.dashboard.views import Views
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store

ITEMS = ("spam", "eggs", "ham")


def test_a_deny_list_is_displayed_once_off_the_event_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "coordinator.sqlite"
    store = Store(db)
    asyncio.run(create_run(store, RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                            min_devices=300, deny_list=ITEMS), "d"))
    calls: list[bool] = []
    display: Callable[..., Any] = Codec.display_item

    def watched(self: Codec, code: int) -> str:
        try:
            asyncio.get_running_loop()
            calls.append(True)
        except RuntimeError:
            calls.append(False)
        return str(display(self, code))

    monkeypatch.setattr(Codec, "display_item", watched)
    lobby = Lobby()
    runner = Runner(store, None, Ed25519PrivateKey.generate(), "127.0.0.1:1",  # type: ignore[arg-type]
                    lobby, LifetimeBudget(100.0, 1e-4))
    views = Views(store, runner, lobby, LifetimeBudget(100.0, 1e-4), Reader(db))

    async def pages() -> list[tuple[str, ...]]:
        shown = []
        for _ in range(2):  # (a page, then the live page's next render)
            await views.show_deny("d")
            shown.append(views.run("d").deny)
        await views.show_deny("unknown")  # (left to ``run`` to say)
        return shown

    try:
        first, second = asyncio.run(pages())
    finally:
        views.reader.close()
        store.close()
    assert sorted(first) == sorted(ITEMS) and second == first
    assert calls == [False] * len(ITEMS)  # each code once, in a thread
    assert list(views._deny) == ["d"]
