"""Building the TypeScript web device (``clients/web``) from a source checkout: ``npm ci`` only
when ``package-lock.json`` changed since the last one, ``tsc`` and the esbuild bundles only when
a source changed, under a file lock so that two builders (pytest-xdist workers, a test beside
``fedhh up --web-devices``) never run npm over each other. The web tests (tests/web/webkit.py)
and ``fedhh up --web-devices`` build through here."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from fedhh.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "clients" / "web"
MIN_NODE = (20, 19)


class BuildError(ConfigError):
    """clients/web cannot be built here (no checkout, no Node or npm, or a step failed)."""


def node_and_npm() -> tuple[str | None, str | None]:
    return shutil.which("node"), shutil.which("npm")


def missing() -> str | None:
    """Why clients/web cannot be built here, or None."""
    if not (WEB / "package.json").exists():
        return (f"the web device's sources are not here ({WEB}): building it needs a source "
                "checkout of fedhh")
    node, npm = node_and_npm()
    if node is None or npm is None:
        return ("node and npm are not installed (python3 bootstrap.py test installs the "
                "Debian packages nodejs and npm; Node >= "
                f"{'.'.join(map(str, MIN_NODE))} is needed)")
    out = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    found = tuple(int(p) for p in out.stdout.strip().lstrip("v").split(".")[:2])
    if found < MIN_NODE:
        return (f"the web device needs Node >= {'.'.join(map(str, MIN_NODE))}, found "
                f"{'.'.join(map(str, found))} (Debian 12's nodejs is 18; Debian 13's or "
                "NodeSource's 20 will do)")
    return None


def run(*command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=WEB, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NO_UPDATE_NOTIFIER": "1"})
    if done.returncode != 0:
        raise BuildError(f"`{' '.join(command)}` exited {done.returncode}:\n"
                         f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def build() -> Path:
    """npm ci (only when package-lock.json changed since the last one; it needs
    registry.npmjs.org), tsc and the browser bundles (only when a source changed); returns
    clients/web/dist. Raises BuildError saying why when it cannot."""
    reason = missing()
    if reason is not None:
        raise BuildError(reason)
    npm = node_and_npm()[1]
    assert npm is not None  # missing() checked it
    with open(WEB / ".build.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        lock = hashlib.sha256((WEB / "package-lock.json").read_bytes()).hexdigest()
        stamp = WEB / "node_modules" / ".fedhh-lock-sha256"
        if not stamp.exists() or stamp.read_text() != lock:
            run(npm, "ci", "--no-audit", "--no-fund", timeout=600)
            stamp.write_text(lock)
        # tsc takes 10-20 s on a loaded machine: build only when an input changed.
        built = WEB / "dist" / ".fedhh-sources-sha256"
        sources = sources_digest()
        if not built.exists() or built.read_text() != sources:
            run(npm, "run", "build", timeout=300)
            run(npm, "run", "bundle", timeout=120)
            built.write_text(sources)
    return WEB / "dist"


def sources_digest() -> str:
    digest = hashlib.sha256()
    inputs = [WEB / "package.json", WEB / "package-lock.json", WEB / "tsconfig.json",
              *(path for folder in ("src", "test", "demo")
                for path in sorted((WEB / folder).rglob("*.ts")))]
    for path in inputs:
        digest.update(str(path.relative_to(WEB)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
