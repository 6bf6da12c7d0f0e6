"""Fixtures of the dashboard tests: a dashboard served in this process over a store the test
fills through the store's own API; headless Chromium (Debian's chromium and chromium-driver,
installed by `bootstrap.py test`) that trusts exactly the test's server key; and the real
services with a run watched in the browser from its first check-in to its end."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from dashboard_kit import (
    CHROMEDRIVER,
    CHROMIUM,
    RUN,
    TOKEN,
    LiveRun,
    Served,
    System,
    fill_store,
    screenshot,
    sign_in,
    spki_pin,
    timeline,
    wait,
)
from networked_kit import SEED, run_config
from selenium.webdriver.common.by import By

from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.tls import make_dev_pki
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.dashboard import Dashboard
from fedhh_coordinator.dashboard.auth import Sessions
from fedhh_coordinator.dashboard.reader import Reader
from fedhh_coordinator.dashboard.views import Views
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.store import Store


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A dashboard over a filled store, on an OS-chosen port, in a thread's event loop."""
    tls = make_dev_pki(tmp_path / "tls", ["localhost", "127.0.0.1"])
    db = tmp_path / "coordinator.sqlite"
    store = Store(db)
    fill_store(store)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def call(function: Callable[..., Any], *args: Any) -> Any:
        async def run() -> Any:
            return await function(*args)
        return asyncio.run_coroutine_threadsafe(run(), loop).result(60)

    async def build() -> tuple[Dashboard, Views]:
        lobby = Lobby()
        runner = Runner(store, None, Ed25519PrivateKey.generate(), "127.0.0.1:1",  # type: ignore[arg-type]
                        lobby, LifetimeBudget(100.0, 1e-4))
        views = Views(store, runner, lobby, LifetimeBudget(100.0, 1e-4), Reader(db))
        dashboard = Dashboard(views, Sessions(TOKEN, login_burst=50), tls, interval_s=0.2)
        await dashboard.start("127.0.0.1", 0)
        return dashboard, views

    dashboard, views = call(build)
    try:
        yield Served(f"https://127.0.0.1:{dashboard.port}", "127.0.0.1", dashboard.port, tls,
                     db, views, dashboard)
    finally:
        call(dashboard.close)
        done: Future[None] = Future()
        loop.call_soon_threadsafe(lambda: (loop.stop(), done.set_result(None)))
        done.result(30)
        thread.join(30)
        loop.close()
        views.reader.close()
        store.close()


@pytest.fixture(scope="session")
def chromium() -> Iterator[Callable[[Path], Any]]:
    """A factory of headless Chromium drivers trusting one server key; all quit at the end."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for program in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(program) is None:
            pytest.fail(f"{program} is missing: `apt-get install chromium chromium-driver` "
                        "(python3 bootstrap.py test installs them)")
    drivers: list[Any] = []
    profiles: list[tempfile.TemporaryDirectory[str]] = []

    def make(server_pem: Path, width: int = 1200) -> Any:
        profile = tempfile.TemporaryDirectory(prefix="fedhh-chromium-")
        profiles.append(profile)
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                     "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                     f"--user-data-dir={profile.name}", f"--window-size={width},900",
                     f"--ignore-certificate-errors-spki-list={spki_pin(server_pem)}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        drivers.append(driver)
        return driver

    try:
        yield make
    finally:
        for driver in drivers:
            driver.quit()
        for profile in profiles:
            profile.cleanup()


# ---- real services ---------------------------------------------------------------------------
@pytest.fixture(scope="session")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    """The aggregator and the coordinator (dashboard and metrics on OS-chosen ports) as real
    processes; the devices are started by ``live_run``, once a browser watches."""
    from networked_kit import COORDINATOR_FLAGS, planted_dataset

    from fedhh.rpc.topology import LocalTopology

    root = tmp_path_factory.mktemp("dashboard-system")
    data = planted_dataset(root / "users.txt")
    with LocalTopology(root / "topology", env={"FEDHH_CACHE": str(root / "cache")}) as topo:
        topo.start_aggregator(["--metrics-port", "0"])
        topo.start_coordinator([*COORDINATOR_FLAGS, "--metrics-port", "0",
                                "--dashboard-port", "0"])
        port = topo.services["coordinator"].ready["dashboard_port"]
        yield System(topo, data, f"https://127.0.0.1:{port}")


@pytest.fixture(scope="session")
def live_run(system: System, chromium: Callable[..., Any]) -> LiveRun:
    """Start a run with no device yet, watch its page, then start the devices and follow the
    rounds in the same page until the run is done."""
    topo = system.topo
    driver = chromium(system.server_pem)
    admin = AdminClient(topo.address("coordinator"), topo.token("admin"), system.ca)
    with admin:
        sign_in(driver, system.base, topo.token("admin").decode())
        # 4096 dimensions, not run_config's 16384: the seeded devices find the three
        # planted words in round 3 all the same (the per-device simulation of this config
        # does), at a quarter of the masking work per round.
        admin.start_run(run_config(checkin_ms=120_000, dim_limit=1 << 12), run_id=RUN)
        driver.get(f"{system.base}/runs/{RUN}")
        seen = [wait(driver, lambda d: (t := timeline(d)).get("1.1", {}).get("check-in")
                     == "active" and t, "round 1 in check-in")]
        screenshot(driver, "run-check-in")
        driver.execute_script("window.fedhhMarker = 'same page';")
        for i, users in enumerate(("0:100", "100:200")):
            topo.start_devices(f"devices-{i}", str(system.data), users,
                               ["--seed", str(SEED), "--metrics-port", "0"])
        seen.append(wait(driver, lambda d: (t := timeline(d)).get("1.1", {}).get("check-in")
                         == "done" and t, "round 1 past check-in"))
        seen.append(wait(driver, lambda d: "2.1" in (t := timeline(d)) and t, "round 2"))
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR,
                                               "#run-head .badge.state-done"), "run done")
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "table.hits"),
             "the heavy hitters")
        seen.append(timeline(driver))
        kept = driver.execute_script("return window.fedhhMarker") == "same page"
        topo.wait_for_devices()
        return LiveRun(driver, system, seen, kept, admin.results(RUN))
