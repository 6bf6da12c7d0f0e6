"""The operator's console: a read-only web dashboard served by the coordinator on its own
HTTPS port (``fedhh coordinator --dashboard-port``), in the coordinator's process and event
loop, reading the same store and runner state it serves over gRPC and never writing.

- ``server``: the aiohttp application (routes, sign-in, security headers, downloads);
  ``live``: the stream of server-sent events that keeps a page's regions current;
- ``auth``: sessions from the admin token and the sign-in rate limit;
- ``views``: what each page shows, gathered from the store, the runner and the lobby;
  ``timeline``: a round attempt step by step; ``results``: heavy hitters and privacy spend;
  ``reader``: the read-only SQLite connection for what the store does not offer;
- ``pages``, ``charts``, ``markup``: HTML and SVG with every value escaped;
- ``static/``: the one script and the one style sheet (no third-party asset: it works offline).
"""

from __future__ import annotations

from pathlib import Path

from fedhh.rpc.tls import TlsFiles
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.dashboard.auth import Sessions
from fedhh_coordinator.dashboard.reader import Reader
from fedhh_coordinator.dashboard.server import Dashboard
from fedhh_coordinator.dashboard.views import Views
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.runs import FixedRuns, ShownDenyLists
from fedhh_coordinator.store import Store

__all__ = ["Dashboard", "start_dashboard"]


async def start_dashboard(store: Store, runner: Runner, lobby: Lobby, budget: LifetimeBudget,
                          db: str | Path, admin_token: bytes, tls: TlsFiles | None,
                          host: str, port: int, insecure: bool = False,
                          demo_url: str = "", deny: ShownDenyLists | None = None,
                          fixed: FixedRuns | None = None) -> Dashboard:
    """A running dashboard over the coordinator's state (``close()`` it on shutdown);
    ``demo_url``: a page of browser devices its runs page links to; ``deny``: the deny lists
    displayed and ``fixed``: the runs' fixed parts kept, shared with the admin service."""
    reader = Reader(db)
    dashboard = Dashboard(Views(store, runner, lobby, budget, reader, deny, fixed),
                          Sessions(admin_token),
                          tls, demo_url=demo_url)
    try:
        await dashboard.start(host, port, insecure)
    except BaseException:
        reader.close()
        raise
    dashboard.on_close(reader.close)
    return dashboard
