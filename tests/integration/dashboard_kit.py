"""Shared pieces of the dashboard tests (tests/dashboard): a store filled through the store's
own API, an HTTPS client of the dashboard, the Chromium helpers (a key pin, waits for
conditions, the round timeline as the page shows it, screenshots) and what a watched run
leaves behind."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import http.client
import io
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from networked_kit import run_config
from PIL import Image
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from fedhh.rpc.run_config import from_proto
from fedhh.rpc.tls import TlsFiles
from fedhh.server.prefixtree import Found, TreeState
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.dashboard.views import Views
from fedhh_coordinator.runs import RunParts, create_run
from fedhh_coordinator.store import Store

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
TOKEN = b"dashboard-test-admin-token-0123456789"
XSS_LABEL = "<script>window.pwned=1</script><img src=x onerror=pwned=2>"
# A discovered item that is markup (as short as the run's 60-bit 5-bit code can hold whole).
HTML_ITEM = "<i>x"
STAGES = {"ADVERTISE_KEYS": 200, "SHARE_KEYS": 196, "MASKED_INPUT": 190,
          "CONSISTENCY_CHECK": 190, "UNMASK": 150}
PATIENCE_S = 300.0  # an upper bound on each wait for a condition (a busy CI machine)
RUN = "planted"
SCREENSHOTS = os.environ.get("FEDHH_DASHBOARD_SCREENSHOTS")


def fill_store(store: Store) -> None:
    """A run "r1" with two released rounds (their steps and per-stage counts as the link keeps
    them), an attempt aborted at check-in, heavy hitters, and 200 devices charged, the first and
    the last of which have an HTML label."""
    loop = asyncio.new_event_loop()
    try:
        config = from_proto(run_config(rounds=4, max_bits=60, min_devices=180,
                                       dim_limit=1 << 16))
        row = loop.run_until_complete(create_run(store, config, "r1"))
    finally:
        loop.close()
    parts = RunParts.load(row)
    codes = parts.tree.codec.encode_many(["apple", "berry", HTML_ITEM]).codes
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
        found = tuple(Found(int(c), e, 2) for c, e in zip(codes, (61.5, 48.25, 30.0),
                                                          strict=True)) if round_ == 2 else ()
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
    dashboard: Any  # the running fedhh_coordinator.dashboard.Dashboard

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


def spki_pin(cert_pem: Path) -> str:
    """Base64 SHA-256 of a certificate's public key: Chromium trusts exactly this key
    (--ignore-certificate-errors-spki-list), not every certificate."""
    cert = x509.load_pem_x509_certificate(cert_pem.read_bytes())
    der = cert.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


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


def wait(driver: Any, condition: Callable[[Any], Any], what: str) -> Any:
    return WebDriverWait(driver, PATIENCE_S, poll_frequency=0.1).until(condition, what)


def synced(driver: Any) -> None:
    """Wait until the page's live stream has put every region in place (after that, a
    region changes only when what it shows changes)."""
    try:
        wait(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute(
            "data-live-state") == "synced", "the live regions")
    except Exception as error:
        state = driver.execute_script("return document.body.dataset.liveState")
        raise AssertionError(f"{driver.current_url}: live state {state!r}; browser log "
                             f"{driver.get_log('browser')}") from error


def problems(driver: Any) -> list[str]:
    """Script errors and Content-Security-Policy violations the browser logged."""
    return [entry["message"] for entry in driver.get_log("browser")
            if "Content Security Policy" in entry["message"] or "Uncaught" in entry["message"]]


def sign_in(driver: Any, base: str, token: str, path: str = "/") -> None:
    driver.get(base + path)
    wait(driver, lambda d: d.find_elements(By.ID, "token"), "the sign-in form")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "form[action='/login'] button").click()
    wait(driver, lambda d: "/login" not in d.current_url, "leaving the sign-in page")


def timeline(driver: Any) -> dict[tuple[int, int], dict[str, str]]:
    """(round, attempt) -> step -> status, as the page shows it now."""
    return driver.execute_script("""
        const out = {};
        document.querySelectorAll("#timeline article.attempt").forEach(function (a) {
          const steps = {};
          a.querySelectorAll("li.step").forEach(function (s) {
            steps[s.dataset.step] = s.dataset.status;
          });
          out[a.dataset.round + "." + a.dataset.attempt] = steps;
        });
        return out;""")


def screenshot(driver: Any, name: str, width: int = 1100) -> None:
    """A full-page PNG of the current page at ``width`` CSS pixels, when asked for."""
    if not SCREENSHOTS:
        return
    metrics = {"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": width < 700}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {**metrics, "height": height})
    data = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})["data"]
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
    # A 256-colour palette keeps the committed files small (a page has few colours).
    image = Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB").quantize(256)
    image.save(Path(SCREENSHOTS) / f"dashboard-{name}.png", optimize=True)


@dataclass
class LiveRun:
    driver: Any
    system: System
    seen: list[dict[tuple[int, int], dict[str, str]]]  # timelines, in the order observed
    marker_kept: bool  # the page was never reloaded while the run went
    results: pb.Results
