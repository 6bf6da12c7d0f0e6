"""Fixtures of the dashboard tests: a dashboard served in this process over a store the test
fills through the store's own API, and headless Chromium (Debian's chromium and
chromium-driver, installed by `bootstrap.py test`) that trusts exactly the test's server key."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import http.client
import shutil
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from networked_kit import run_config

from fedhh.prefixtree import Found, TreeState
from fedhh.rpc.run_config import from_proto
from fedhh.rpc.tls import TlsFiles, make_dev_pki
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.dashboard import Dashboard
from fedhh_coordinator.dashboard.auth import Sessions
from fedhh_coordinator.dashboard.reader import Reader
from fedhh_coordinator.dashboard.views import Views
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.runner import Runner
from fedhh_coordinator.runs import RunParts, create_run
from fedhh_coordinator.store import Store

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
TOKEN = b"dashboard-test-admin-token-0123456789"
XSS_LABEL = "<script>window.pwned=1</script><img src=x onerror=pwned=2>"
STAGES = {"ADVERTISE_KEYS": 200, "SHARE_KEYS": 196, "MASKED_INPUT": 190,
          "CONSISTENCY_CHECK": 190, "UNMASK": 150}


def fill_store(store: Store) -> None:
    """A run "r1" with two released rounds (their steps and per-stage counts as the link keeps
    them), an attempt aborted at check-in, heavy hitters, and 200 devices charged, the first and
    the last of which have an HTML label."""
    loop = asyncio.new_event_loop()
    try:
        row = loop.run_until_complete(create_run(store, from_proto(run_config(rounds=2, min_devices=180, dim_limit=1 << 16)), "r1"))
    finally:
        loop.close()
    parts = RunParts.load(row)
    codes = parts.tree.codec.encode_many(["apple", "berry"]).codes
    ledger = parts.ledger
    devices = [store.add_device(bytes(32), i.to_bytes(32, "big"),
                                XSS_LABEL if i in (0, 199) else f"user-{i}") for i in range(200)]
    store.charge_devices("r1", devices, 64.0, 1e-6)
    store.abort_round("r1", 1, store.open_round("r1", 1), "only 12 devices checked in "
                      "(min_devices 200)")
    for round_ in (1, 2):
        attempt = store.open_round("r1", round_)
        started = 1_800_000_000.0 + 60 * round_
        steps = [["check-in", started], ["secure aggregation", started + 2],
                 ["SHARE_KEYS", started + 3], ["MASKED_INPUT", started + 4],
                 ["CONSISTENCY_CHECK", started + 5], ["UNMASK", started + 6],
                 ["releasing", started + 7]]
        store.annotate_round("r1", round_, attempt, {"members": devices, "steps": steps,
                                                      "stage_devices": STAGES})
        ledger = ledger.record(round_ - 1, 190)
        store.charge_round("r1", round_, attempt, "releasing", 190, ledger.to_dict())
        found = tuple(Found(int(c), e, 2) for c, e in zip(codes, (61.5, 48.25), strict=True)) \
            if round_ == 2 else ()
        state = TreeState(next_round=round_ + 1, prefix_bits=10 * round_,
                          prefixes=(1, 2), segment_bits=5, discovered=found, done=round_ == 2)
        store.release_round("r1", round_, attempt, state.to_dict(),
                            {"kept": 3, "finished": len(found), "threshold": 20.5,
                             "expected_false_positives": 0.4, "impossible": 1, "denied": 0,
                             "participants": 190}, done=round_ == 2)


@dataclass
class Served:
    base: str
    host: str
    port: int
    tls: TlsFiles
    db: Path
    views: Views
    call: Callable[..., Any]  # run a coroutine function on the server's loop

    def request(self, method: str, path: str, form: dict[str, str] | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, http.client.HTTPMessage,
                                                                 bytes]:
        context = ssl.create_default_context(cafile=str(self.tls.ca))
        connection = http.client.HTTPSConnection(self.host, self.port, context=context,
                                                 timeout=30)
        body = urlencode(form).encode() if form is not None else None
        sent = dict(headers or {})
        if body is not None:
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            return response.status, response.headers, response.read()
        finally:
            connection.close()

    def sign_in(self) -> str:
        status, headers, _ = self.request("POST", "/login", {"token": TOKEN.decode(),
                                                             "next": "/"})
        assert status == 303, status
        cookie = headers["Set-Cookie"].split(";")[0]
        return cookie


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
        dashboard = Dashboard(views, Sessions(TOKEN, login_burst=5), tls, interval_s=0.2)
        await dashboard.start("127.0.0.1", 0)
        return dashboard, views

    dashboard, views = call(build)
    try:
        yield Served(f"https://127.0.0.1:{dashboard.port}", "127.0.0.1", dashboard.port, tls,
                     db, views, call)
    finally:
        call(dashboard.close)
        done: Future[None] = Future()
        loop.call_soon_threadsafe(lambda: (loop.stop(), done.set_result(None)))
        done.result(30)
        thread.join(30)
        loop.close()
        views.reader.close()
        store.close()


def spki_pin(cert_pem: Path) -> str:
    """Base64 SHA-256 of a certificate's public key: Chromium trusts exactly this key
    (--ignore-certificate-errors-spki-list), not every certificate."""
    cert = x509.load_pem_x509_certificate(cert_pem.read_bytes())
    der = cert.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


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
@dataclass
class System:
    topo: Any
    data: Path
    base: str  # the dashboard's address

    @property
    def ca(self) -> Path:
        return Path(self.topo.workdir) / "tls" / "ca.pem"

    @property
    def server_pem(self) -> Path:
        return Path(self.topo.workdir) / "tls" / "server.pem"


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
