"""deploy/base-image.sh asks the Docker engine first: with none answering it stops at once with
the remedy, before minutes of mmdebstrap, and with one answering it goes on as before. The
`docker` and `mmdebstrap` it finds on PATH are stand-ins here that record their calls, so this
needs no engine and no network."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "base-image.sh"


def stand_ins(tmp_path: Path, *, engine_answers: bool) -> tuple[Path, Path]:
    """A bin directory with a `docker` and an `mmdebstrap` that append their arguments to a
    log; `docker info` fails as the real CLI does without a daemon unless ``engine_answers``."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    info = ('echo 20.10.24' if engine_answers else
            'echo; echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. '
            'Is the docker daemon running?" >&2; exit 1')
    (bin_dir / "docker").write_text(
        "#!/bin/sh\n"
        f'echo "docker $*" >> "{calls}"\n'
        f'if [ "$1" = info ]; then {info}; fi\n')
    # The stand-in mmdebstrap writes a "root filesystem" into the .partial file it is given.
    (bin_dir / "mmdebstrap").write_text(
        "#!/bin/sh\n"
        f'echo "mmdebstrap $*" >> "{calls}"\n'
        'for a in "$@"; do case "$a" in *.partial) echo rootfs > "$a";; esac; done\n')
    for tool in ("docker", "mmdebstrap"):
        (bin_dir / tool).chmod(0o755)
    return bin_dir, calls


def run_script(bin_dir: Path, tar: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "DOCKER_HOST"}
    env.update(PATH=f"{bin_dir}:{os.environ['PATH']}", FEDHH_BASE_TAR=str(tar), **extra)
    return subprocess.run([str(SCRIPT), "fedhh-base:test"], capture_output=True, text=True,
                          env=env, timeout=120, stdin=subprocess.DEVNULL)


def test_no_engine_stops_before_mmdebstrap_with_the_remedy(tmp_path: Path) -> None:
    bin_dir, calls = stand_ins(tmp_path, engine_answers=False)
    tar = tmp_path / "base.tar"
    done = run_script(bin_dir, tar)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == "base-image.sh: no Docker engine answers `docker info`:"
    # The engine's own words, then what to do; no blank line and no trace of a build.
    assert "Cannot connect to the Docker daemon" in lines[1]
    assert "dockerd" in done.stderr and "systemctl start docker" in done.stderr
    assert "DOCKER_HOST" in done.stderr and all(line.strip() for line in lines)
    logged = calls.read_text().splitlines()
    assert logged == ["docker info --format {{.ServerVersion}}"]  # no mmdebstrap, no import
    assert not tar.exists() and not list(tmp_path.glob("base.tar*"))


def test_the_message_names_the_docker_host_it_tried(tmp_path: Path) -> None:
    bin_dir, _ = stand_ins(tmp_path, engine_answers=False)
    done = run_script(bin_dir, tmp_path / "base.tar", DOCKER_HOST="tcp://127.0.0.1:1")
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        "base-image.sh: no Docker engine answers `docker info` at DOCKER_HOST=tcp://127.0.0.1:1:")


@pytest.mark.parametrize("tar_kept", [False, True])
def test_an_answering_engine_builds_and_imports_as_before(tmp_path: Path, tar_kept: bool
                                                          ) -> None:
    bin_dir, calls = stand_ins(tmp_path, engine_answers=True)
    tar = tmp_path / "base.tar"
    if tar_kept:
        tar.write_text("rootfs\n")
    done = run_script(bin_dir, tar)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("base-image.sh: fedhh-base:test from Debian bookworm")
    logged = calls.read_text().splitlines()
    assert logged[0] == "docker info --format {{.ServerVersion}}"
    assert any(line.startswith("mmdebstrap ") for line in logged) is not tar_kept
    assert logged[-1].startswith("docker import ") and logged[-1].endswith(
        f"{tar} fedhh-base:test")
    assert tar.read_text() == "rootfs\n"
