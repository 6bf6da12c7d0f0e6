"""A Docker engine, an offline image build and a compose project for the deployment test.

The engine is the one already running, or a `dockerd` this module starts (Debian's docker.io)
and stops again. Images build without any network (`--network=none`, classic builder): the base
image comes from Debian packages (deploy/base-image.sh) and Python packages from a wheelhouse
filled by the host's pip (deploy/wheels.sh). Build artefacts are cached between runs, keyed by
the scripts that make them: the base image's root filesystem and the wheelhouse under
$FEDHH_DEPLOY_CACHE (default ~/.cache/fedhh/deploy, outside the repository; the wheelhouse is
keyed by deploy/wheels.sh itself and linked into the checkout's deploy/wheelhouse, ignored by
git), and image layers in the engine's own cache.

Every wait polls a condition (a health status, a log line, a restart count) with a deadline.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
POLL_S = 0.2
T = TypeVar("T")


class DeployTestError(RuntimeError):
    pass


def wait_until(check: Callable[[], T | None], timeout_s: float, what: str,
               diagnose: Callable[[], str] = lambda: "") -> T:
    """Poll ``check`` until it returns something other than None or False."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise DeployTestError(f"timed out after {timeout_s:.0f} s waiting for {what}\n"
                                  f"{diagnose()}")
        time.sleep(POLL_S)


def run(args: Sequence[str], *, timeout_s: float = 600, check: bool = True,
        env: dict[str, str] | None = None, cwd: Path | None = None
        ) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout_s,
                          env=env, cwd=cwd, stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise DeployTestError(f"{' '.join(args)} exited with {done.returncode}:\n"
                              f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def cache_dir() -> Path:
    root = os.environ.get("FEDHH_DEPLOY_CACHE") or \
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fedhh" / "deploy"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


# ---- the engine ------------------------------------------------------------------------------
class Engine:
    """The running Docker engine, or one started here. A started engine is stopped on
    ``close()`` unless another test session still uses it (each session holds a shared lock)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.process: subprocess.Popen[bytes] | None = None
        self._users: IO[bytes] | None = None

    @staticmethod
    def answers() -> bool:
        return shutil.which("docker") is not None and run(
            ["docker", "info", "--format", "{{.ServerVersion}}"], check=False,
            timeout_s=30).returncode == 0

    def start(self) -> Engine:
        missing = [tool for tool in ("docker", "dockerd", "mmdebstrap") if not shutil.which(tool)]
        if missing:
            raise DeployTestError(
                f"the deployment test needs {', '.join(missing)}: apt-get install docker.io "
                f"docker-compose mmdebstrap (python3 bootstrap.py test does it as root)")
        self._users = open(cache_dir() / "engine.users", "ab")  # noqa: SIM115 - held all session
        fcntl.flock(self._users, fcntl.LOCK_SH)
        if self.answers():
            return self
        if os.geteuid() != 0:
            raise DeployTestError("no Docker engine answers and only root can start dockerd")
        log = open(self.log_dir / "dockerd.log", "ab")  # noqa: SIM115 - the daemon's stdout
        self.process = subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

        def ready() -> bool:
            if self.answers():
                return True
            if self.process is not None and self.process.poll() is not None:
                if self.answers():  # another session's dockerd won the race: use that one
                    self.process = None
                    return True
                raise DeployTestError(f"dockerd exited with {self.process.returncode}; see "
                                      f"{self.log_dir / 'dockerd.log'}")
            return False

        wait_until(ready, 120, "dockerd to answer")
        return self

    def close(self) -> None:
        if self._users is None:
            return
        if self.process is not None:
            try:
                fcntl.flock(self._users, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shared = False
            except BlockingIOError:
                shared = True  # another session's test uses this engine: leave it running
            if not shared and self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(60)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        self._users.close()
        self._users = None


def compose_cli() -> list[str]:
    """Compose v1 (Debian's docker-compose 1.29) or the v2 plugin; $FEDHH_COMPOSE overrides."""
    if os.environ.get("FEDHH_COMPOSE"):
        return os.environ["FEDHH_COMPOSE"].split()
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if run(["docker", "compose", "version"], check=False).returncode == 0:
        return ["docker", "compose"]
    raise DeployTestError("no compose CLI: apt-get install docker-compose")


# ---- the image -------------------------------------------------------------------------------
def _digest(*paths: Path) -> str:
    sha = hashlib.sha256()
    for path in paths:
        sha.update(path.read_bytes())
    return sha.hexdigest()[:16]


def image_exists(tag: str) -> bool:
    return run(["docker", "image", "inspect", tag], check=False).returncode == 0


def base_image() -> str:
    """The Debian-built base image, made once per version of deploy/base-image.sh (the root
    filesystem tarball is kept, so a pruned engine re-imports it without downloading)."""
    key = _digest(DEPLOY / "base-image.sh")
    tag = f"fedhh-base:{key}"
    if not image_exists(tag):
        env = {**os.environ, "FEDHH_BASE_TAR": str(cache_dir() / f"base-{key}.tar")}
        run([str(DEPLOY / "base-image.sh"), tag], env=env, timeout_s=1200)
    return tag


def wheelhouse(script: Path = DEPLOY / "wheels.sh", target: Path = DEPLOY / "wheelhouse"
               ) -> Path:
    """``target`` (the build context's deploy/wheelhouse) holding what ``script`` (wheels.sh)
    fills it with. The script fills a wheelhouse under cache_dir() (it downloads nothing while
    its key is unchanged), whose wheels are then hard-linked into ``target``: the same bytes, so
    the image's dependency layer is the engine's cached one. Before, every fresh checkout ran
    the script on its own empty deploy/wheelhouse: pip resolved and copied all 70 wheels again
    (~28 s, 18 s of CPU, at load 5)."""
    cached = cache_dir() / "wheelhouse"
    with open(cache_dir() / "wheelhouse.lock", "wb") as lock:  # sessions of other checkouts
        fcntl.flock(lock, fcntl.LOCK_EX)
        run([str(script), str(cached)], timeout_s=1200)
        key = (cached / ".key").read_text()
        wheels = sorted(path.name for path in cached.glob("*.whl"))
        if (target / ".key").is_file() and (target / ".key").read_text() == key and \
                sorted(path.name for path in target.glob("*.whl")) == wheels:
            return target
        # As the script refills a stale wheelhouse: its wheels and key go, then the new ones
        # come, the key last (an interrupted fill is stale, not taken as up to date).
        target.mkdir(parents=True, exist_ok=True)
        for path in [target / ".key", *target.glob("*.whl")]:
            path.unlink(missing_ok=True)
        for name in wheels:
            try:
                os.link(cached / name, target / name)
            except OSError:  # another file system
                shutil.copyfile(cached / name, target / name)
        (target / ".key").write_text(key)
    return target


def build(tag: str, base: str) -> None:
    """deploy/Dockerfile, offline: no network at all during the build."""
    run(["docker", "build", "--quiet", "--network=none", "--build-arg", f"BASE_IMAGE={base}",
         "--build-arg", "OFFLINE=1", "-f", str(DEPLOY / "Dockerfile"), "-t", tag, str(ROOT)],
        env={**os.environ, "DOCKER_BUILDKIT": "0"}, timeout_s=1800)


def context_listing(base: str, tag: str, workdir: Path) -> list[str]:
    """Every path of the build context the engine receives (after .dockerignore)."""
    dockerfile = workdir / "Dockerfile.context"
    dockerfile.write_text(f"FROM {base}\nCOPY . /context\n")
    run(["docker", "build", "--quiet", "--network=none", "-f", str(dockerfile), "-t", tag,
         str(ROOT)], env={**os.environ, "DOCKER_BUILDKIT": "0"}, timeout_s=600)
    try:
        found = run(["docker", "run", "--rm", "--network=none", tag, "find", "/context",
                     "-mindepth", "1"]).stdout
    finally:
        run(["docker", "rmi", "--force", tag], check=False)
    return sorted(line.removeprefix("/context/") for line in found.splitlines())


# ---- a compose project -----------------------------------------------------------------------
class Project:
    """One compose project: ``cli -p NAME -f FILE...`` run in the environment ``env``."""

    def __init__(self, cli: list[str], name: str, files: list[Path], env: dict[str, str]
                 ) -> None:
        self.cli, self.name, self.files, self.env = cli, name, files, env

    def compose(self, *args: str, timeout_s: float = 600, check: bool = True
                ) -> subprocess.CompletedProcess[str]:
        files = [arg for path in self.files for arg in ("-f", str(path))]
        return run([*self.cli, "-p", self.name, *files, *args], env=self.env,
                   timeout_s=timeout_s, check=check, cwd=DEPLOY)

    def admin(self, *args: str, timeout_s: float = 900) -> Any:
        """`fedhh admin ...` in the project's admin service; its JSON reply."""
        out = self.compose("run", "--rm", "-T", "admin", *args, timeout_s=timeout_s).stdout
        return json.loads(out[out.index("{"):])

    def containers(self, service: str) -> list[str]:
        """The names of the service's containers, running or not (what `compose ps -q SERVICE`
        lists), from the labels compose gives them: one `docker ps` (~0.01 s) rather than a
        compose CLI process and an inspect per container (compose v1, ~0.5 s of CPU and ~1 s
        at load 5 each time: the waits for health polled it)."""
        return sorted(run(["docker", "ps", "--all", "--format", "{{.Names}}",
                           "--filter", f"label=com.docker.compose.project={self.name}",
                           "--filter", f"label=com.docker.compose.service={service}",
                           "--filter", "label=com.docker.compose.oneoff=False"]).stdout.split())

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail=60", check=False).stdout


def inspect(container: str, template: str) -> str:
    return run(["docker", "inspect", "--format", template, container]).stdout.strip()


def health(container: str) -> str:
    return inspect(container, "{{if .State.Health}}{{.State.Health.Status}}{{end}}")


def restarts(container: str) -> int:
    return int(inspect(container, "{{.RestartCount}}"))


def crash(container: str) -> None:
    """SIGKILL the container's main process from the host, as a crash would: the restart policy
    applies (`docker kill` would count as a deliberate stop and disable it)."""
    pid = int(inspect(container, "{{.State.Pid}}"))
    if pid <= 0:
        raise DeployTestError(f"{container} is not running")
    os.kill(pid, signal.SIGKILL)


def log_lines(container: str) -> list[dict[str, Any]]:
    """The container's JSON log lines (the services log JSON lines on stderr)."""
    done = run(["docker", "logs", container])
    lines = []
    for text in (done.stdout + done.stderr).splitlines():
        if text.startswith("{"):
            try:
                lines.append(json.loads(text))
            except ValueError:
                continue
    return lines
