"""The dashboard in headless Chromium against real services (LocalTopology: the aggregator, the
coordinator and 200 devices of a planted population over TLS): the round timeline advances
while the run goes, without reloading the page; the heavy-hitter table matches `fedhh admin
results`; the filter and the downloads; a missing or wrong token gets the sign-in page and no
data; user strings render as text; every page fits a phone's width.

Every wait is for a condition in the page (WebDriverWait), never for a time. With
FEDHH_DASHBOARD_SCREENSHOTS=DIR the pages are also saved there as PNG (docs/dashboard-*.png)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from dashboard_kit import (
    HTML_ITEM,
    RUN,
    TOKEN,
    XSS_LABEL,
    LiveRun,
    Served,
    problems,
    screenshot,
    sign_in,
    synced,
    wait,
)
from selenium.webdriver.common.by import By

from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.device_users import enroll_request
from fedhh.rpc.tls import ca_credentials
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow


def test_the_round_timeline_advances_while_the_run_goes(live_run: LiveRun) -> None:
    first, past_check_in, second, final = live_run.seen
    assert set(first) == {"1.1"} and first["1.1"]["ADVERTISE_KEYS"] == "pending"
    assert past_check_in["1.1"]["ADVERTISE_KEYS"] in ("active", "done")
    assert "2.1" in second
    assert live_run.marker_kept, "the page was reloaded: the timeline did not update live"
    released = [key for key, steps in final.items() if steps["end"] == "done"]
    assert len(released) == sum(r.state == "released" for r in live_run.results.rounds) >= 2
    assert all(set(final[key].values()) == {"done"} for key in released)


def test_the_heavy_hitter_table_matches_fedhh_admin_results(live_run: LiveRun) -> None:
    topo, driver = live_run.system.topo, live_run.driver
    done = subprocess.run(
        [sys.executable, "-m", "fedhh.cli.main", "admin", "--coordinator",
         topo.address("coordinator"), "--ca", str(live_run.system.ca), "--token-file",
         str(Path(topo.workdir) / "admin.token"), "results", RUN],
        capture_output=True, text=True, timeout=120, check=True)
    cli = json.loads(done.stdout)["heavyHitters"]
    assert {h["item"] for h in cli} >= {"apple", "berry", "cherr"}
    driver.get(f"{live_run.system.base}/runs/{RUN}")
    rows = wait(driver, lambda d: d.execute_script("""
        return Array.from(document.querySelectorAll("table.hits tbody tr")).map(
          r => Array.from(r.cells).map(c => c.textContent));"""), "the table")
    assert [r[0] for r in rows] == [str(i) for i in range(1, len(cli) + 1)]
    assert [r[1] for r in rows] == [h["item"] for h in cli]
    assert [r[2].split(" ± ")[0] for r in rows] == [f"{h['estimate']:,.1f}" for h in cli]
    assert [r[3] for r in rows] == [str(h["round"]) for h in cli]
    downloaded = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch(document.getElementById("hh-json").href).then(r => r.json()).then(
          done, error => done({fetch_failed: String(error)}));""")
    assert "fetch_failed" not in downloaded, downloaded
    assert [(h["item"], h["estimate"], h["round"]) for h in downloaded["heavy_hitters"]] == \
        [(h["item"], h["estimate"], h["round"]) for h in cli]
    screenshot(driver, "run")
    screenshot(driver, "run-phone", width=390)


def test_the_filter_narrows_the_table_and_the_downloads(live_run: LiveRun) -> None:
    driver = live_run.driver
    driver.get(f"{live_run.system.base}/runs/{RUN}")
    synced(driver)
    box = wait(driver, lambda d: d.find_elements(By.ID, "hh-filter"), "the filter")[0]
    items = [h.item for h in live_run.results.heavy_hitters]
    expected = [item for item in items if "err" in item]
    assert 0 < len(expected) < len(items)  # berry and cherr, not apple
    box.send_keys("ERR")
    wait(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-shown")
         == str(len(expected)), "the matching rows")
    shown = driver.execute_script("""
        return Array.from(document.querySelectorAll("table.hits tbody tr")).filter(
          r => !r.hidden).map(r => r.querySelector("td.item").textContent);""")
    assert shown == expected
    assert driver.find_element(By.ID, "hh-csv").get_attribute("href").endswith(
        "/heavy-hitters.csv?q=err")
    csv_text = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch(document.getElementById("hh-csv").href).then(r => r.text()).then(
          done, error => done("fetch failed: " + error));""")
    lines = csv_text.splitlines()
    assert lines[0] == ("rank,item,estimate,std,round,truncated_at_bits,prefix_bytes,cause,kind,"
                        "note,run_id,run_state")
    assert [line.split(",")[1] for line in lines[1:]] == expected


def test_every_page_renders_and_fits_a_phone(live_run: LiveRun) -> None:
    driver, base = live_run.driver, live_run.system.base
    for name, path, marker in (("runs", "/", "table.runs"), ("budgets", "/budgets",
                                                             "table.devices"),
                               ("fleet", "/fleet", "table.dropout")):
        driver.get(base + path)
        wait(driver, lambda d, m=marker: d.find_elements(By.CSS_SELECTOR, m), name)
        if name != "budgets":  # the one page without live parts
            synced(driver)
        assert problems(driver) == [], name
        screenshot(driver, name)
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
        try:
            driver.get(base + path)
            wait(driver, lambda d, m=marker: d.find_elements(By.CSS_SELECTOR, m), name)
            width = driver.execute_script("return document.documentElement.scrollWidth")
            assert width <= 390, f"{name} is {width} px wide on a 390 px phone"
        finally:
            driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    driver.get(base + "/fleet")
    cells = wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "table.dropout td"),
                 "the dropout table")
    assert cells


def test_without_a_token_or_with_a_wrong_one_there_is_only_the_sign_in_page(
        live_run: LiveRun, chromium: Callable[..., Any]) -> None:
    system = live_run.system
    driver = chromium(system.server_pem)  # a fresh profile: no cookie
    for path in ("/", f"/runs/{RUN}", "/fleet", "/budgets"):
        driver.get(system.base + path)
        wait(driver, lambda d: d.find_elements(By.ID, "token"), "the sign-in form")
        assert "/login" in driver.current_url
        source = driver.page_source
        assert "apple" not in source and "<table" not in source
    status = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch("/runs/planted/heavy-hitters.json").then(r => done(r.status),
                                                       error => done(String(error)));""")
    assert status == 401
    screenshot(driver, "sign-in")
    driver.find_element(By.ID, "token").send_keys("not-the-admin-token-at-all")
    driver.find_element(By.CSS_SELECTOR, "form[action='/login'] button").click()
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".login .error"), "the refusal")
    assert "That is not the admin token." in driver.page_source
    assert "apple" not in driver.page_source
    assert not [c for c in driver.get_cookies() if "session" in c["name"]]


def test_a_device_label_renders_as_text(live_run: LiveRun) -> None:
    """A device chooses its own label at enrollment: user data, shown on the fleet page."""
    topo, driver = live_run.system.topo, live_run.driver
    with AdminClient(topo.address("coordinator"), topo.token("admin"),
                     live_run.system.ca) as admin:
        token = admin.mint_tokens(1)[0].encode()
    key = Ed25519PrivateKey.generate()
    with grpc.secure_channel(topo.address("coordinator"), ca_credentials(live_run.system.ca)
                             ) as channel:
        pb_grpc.DeviceServiceStub(channel).Enroll(enroll_request(key, token, label=XSS_LABEL),
                                                  timeout=30)
    driver.get(live_run.system.base + "/fleet")
    synced(driver)
    shown = driver.execute_script("""
        const cell = document.querySelector("table.enrollments td.label");
        return [cell.textContent, cell.querySelectorAll("*").length, window.pwned];""")
    assert shown == [XSS_LABEL, 0, None]
    assert problems(driver) == []


def test_a_heavy_hitter_item_renders_as_text(served: Served,
                                             chromium: Callable[..., Any]) -> None:
    """Heavy hitters are user data: an item that is markup, discovered in the stored run,
    renders as its text."""
    driver = chromium(served.tls.cert)
    try:
        sign_in(driver, served.base, TOKEN.decode(), "/runs/r1")
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "table.hits td.item"), "hits")
        synced(driver)  # the live stream rendered the table again: that copy is checked too
        shown = driver.execute_script("""
            const cells = [...document.querySelectorAll("table.hits td.item")];
            return cells.map(c => [c.textContent, c.querySelectorAll("*").length,
                                   c.querySelectorAll("bdi > *").length]);""")
        # (one element, the <bdi> that isolates the item's direction; none from the item)
        assert [HTML_ITEM, 1, 0] in shown
        assert problems(driver) == []
    finally:
        # The page's live stream ends with the page: the dashboard's close then has no
        # stream to wait out (4 s, its shutdown grace, with the page left open).
        driver.get("about:blank")
