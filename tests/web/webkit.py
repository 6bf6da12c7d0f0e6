"""Shared helpers of the web device tests (not a test module): finding Node and npm, and
building clients/web once per lock file, under a file lock so that two pytest-xdist workers
(or two sessions) never run npm ci or tsc over each other."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import http.server
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "clients" / "web"
NODE, NPM = shutil.which("node"), shutil.which("npm")
MIN_NODE = (20, 19)
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def _node_version() -> tuple[int, ...]:
    if NODE is None:
        return ()
    out = subprocess.run([NODE, "--version"], capture_output=True, text=True, check=True)
    return tuple(int(p) for p in out.stdout.strip().lstrip("v").split(".")[:2])


def skip_reason() -> str | None:
    """Why the web tests cannot run here, or None."""
    if NODE is None or NPM is None:
        return ("node and npm are not installed (bootstrap.py test installs the Debian packages "
                "nodejs and npm)")
    found = _node_version()
    if found < MIN_NODE:
        return (f"the web device needs Node >= {'.'.join(map(str, MIN_NODE))}, found "
                f"{'.'.join(map(str, found))} (Debian 12's nodejs is 18; Debian 13's or "
                "NodeSource's 20 will do)")
    return None


class BuildError(RuntimeError):
    pass


def run(*command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=WEB, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NO_UPDATE_NOTIFIER": "1"})
    if done.returncode != 0:
        raise BuildError(f"`{' '.join(command)}` exited {done.returncode}:\n"
                         f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def build() -> Path:
    """npm ci (only when package-lock.json changed since the last one), tsc and the browser
    bundle (only when a source changed); returns clients/web/dist."""
    assert NPM is not None
    with open(WEB / ".build.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        lock = hashlib.sha256((WEB / "package-lock.json").read_bytes()).hexdigest()
        stamp = WEB / "node_modules" / ".fedhh-lock-sha256"
        if not stamp.exists() or stamp.read_text() != lock:
            run(NPM, "ci", "--no-audit", "--no-fund", timeout=600)
            stamp.write_text(lock)
        # tsc takes 10-20 s on a loaded machine: build only when an input changed, so a second
        # test module (or a second run) reuses the first one's dist/.
        built = WEB / "dist" / ".fedhh-sources-sha256"
        sources = _sources_digest()
        if not built.exists() or built.read_text() != sources:
            run(NPM, "run", "build", timeout=300)
            run(NPM, "run", "bundle", timeout=120)
            built.write_text(sources)
    return WEB / "dist"


def _sources_digest() -> str:
    digest = hashlib.sha256()
    inputs = [WEB / "package.json", WEB / "package-lock.json", WEB / "tsconfig.json",
              *sorted((WEB / "src").rglob("*.ts")), *sorted((WEB / "test").rglob("*.ts"))]
    for path in inputs:
        digest.update(str(path.relative_to(WEB)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


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
