"""A dashboard over a test's store with no aggregation service, its runner showing one run in
an attempt's check-in: for the tests that call its handlers without serving HTTP."""

from __future__ import annotations

from pathlib import Path

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
