"""A dashboard over a test's store with no aggregation service, its runner showing one run in
an attempt's check-in: for the tests that call its handlers without serving HTTP."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.dashboard import Dashboard
from fedhh_coordinator.dashboard.auth import Sessions
from fedhh_coordinator.dashboard.reader import Reader
from fedhh_coordinator.dashboard.views import Views
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.progress import Progress
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.store import Store


def offline_dashboard(store: Store, db: Path, running: str) -> Dashboard:
    """The dashboard of ``store`` (whose file is ``db``), run ``running`` in round 1.1's
    check-in; its views' reader is the caller's to close."""
    lobby = Lobby()
    runner = Runner(store, None, Ed25519PrivateKey.generate(), "127.0.0.1:1",  # type: ignore[arg-type]
                    lobby, LifetimeBudget(100.0, 1e-4))
    runner.progress[running] = Progress(1, 1, "check-in")
    views = Views(store, runner, lobby, LifetimeBudget(100.0, 1e-4), Reader(db))
    return Dashboard(views, Sessions(b"t" * 32), None)


class LoopProbe:
    """Whether each watched call left the event loop free: it asks the loop (``loop``, set by
    the test once it runs) to run a callback and waits for it (``call_soon_threadsafe``), which
    a call holding the loop's own thread never sees. Such a call waits ``wait_s`` once: the
    calls after it do not wait, and all read as held."""

    def __init__(self, wait_s: float = 30.0) -> None:
        self.wait_s = wait_s
        self.loop: asyncio.AbstractEventLoop | None = None
        self.answered: dict[str, list[bool]] = {}  # each call: whether the loop ran its callback

    def watch(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str,
              wrap: Callable[[Callable[..., Any]], Any] = lambda f: f) -> None:
        """Probe each call of ``owner.name`` (``wrap``: as the attribute is set, e.g.
        ``staticmethod``)."""
        step: Callable[..., Any] = getattr(owner, name)

        def probed(*args: Any, **kwargs: Any) -> Any:
            if self.loop is not None:
                ran = threading.Event()
                held = any(not ok for calls in self.answered.values() for ok in calls)
                self.loop.call_soon_threadsafe(ran.set)
                self.answered.setdefault(name, []).append(not held and ran.wait(self.wait_s))
            return step(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrap(probed))

    def all_free(self) -> bool:
        return all(all(calls) for calls in self.answered.values())
