"""Shared helpers of the web device tests (not a test module): finding Node and npm, building
clients/web once per lock file (fedhh.cli.webclient, which `fedhh up --web-devices` builds
through too, under a file lock so that two pytest-xdist workers or two sessions never run npm ci
or tsc over each other), headless Chromium and a page server."""

from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fedhh.cli import webclient
from fedhh.cli.webclient import ROOT, WEB, BuildError, build, run

__all__ = ["NODE", "NPM", "PATIENCE_S", "ROOT", "WEB", "BuildError", "build", "chromium",
           "run", "serve_directory", "skip_reason"]

NODE, NPM = webclient.node_and_npm()
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# The bound on each wait for a page's condition (a deadline, not a window: a hung page fails
# the test, and a page on a busy CI machine, WebCrypto and IndexedDB included, is waited for;
# tests/integration/dashboard_kit.py's PATIENCE_S likewise).
PATIENCE_S = 300.0


def skip_reason() -> str | None:
    """Why the web tests cannot run here, or None."""
    return webclient.missing()


@contextlib.contextmanager
def chromium(*flags: str) -> Iterator[Any]:
    """Debian's headless Chromium through chromedriver (selenium), with a throw-away profile;
    ``flags`` are added to its command line."""
    import pytest
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for program in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(program) is None:
            pytest.fail(f"{program} is missing: `apt-get install chromium chromium-driver` "
                        "(python3 bootstrap.py test installs them)")
    with tempfile.TemporaryDirectory(prefix="fedhh-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update",
                     "--disable-sync", f"--user-data-dir={profile}", *flags):
            options.add_argument(flag)
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        try:
            yield driver
        finally:
            driver.quit()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serve_directory(root: Path) -> Iterator[str]:
    """``root``'s files over HTTP on 127.0.0.1 (a port of the OS's choice) for the test pages;
    yields the origin, and stops the server on exit."""
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


IDENTITY_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>fedhh web identity</title></head>
<body>running<script type="module" src="identity.js"></script></body></html>
"""


@contextlib.contextmanager
def identity_page(root: Path) -> Iterator[tuple[Path, str]]:
    """The identity test page (the bundle's identity.js) built into ``root`` and served from
    it; yields ``root`` and the origin. A build that fails raises BuildError."""
    dist = build()
    shutil.copy(dist / "browser" / "identity.js", root / "identity.js")
    (root / "index.html").write_text(IDENTITY_PAGE)
    with serve_directory(root) as origin:
        yield root, origin
