"""A dataset build stopped by SIGTERM (docker stop, systemd, `kill`, `timeout`) as by Ctrl-C:
exit 130, one line, and no scratch folder left, whether `fedhh data generate` or `fedhh
experiments` builds it (before: SIGTERM killed either outright and left its scratch folder, tens
of MB to gigabytes, and experiments' pool workers' BrokenPipeError tracebacks). The Dask modes
of experiments are tested in tests/unit/experiments/test_cluster.py.

Each command runs in a process of its own, forked from a helper that built the generator's word
tables (seed 1, the default shape: dev-reddit-400k's, and the `data generate` run's with --seed
1) before it forked: the command's `main(argv)` then exits the interpreter as `python -m
fedhh.cli.main` does, without building the tables again (~20 s a build, quiet; before, each
test's interpreter built them)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

DEADLINE_S = 600.0  # a deadline, not a window: the word tables take ~20 s on a quiet machine

# Reads one command a line (JSON: argv, extra environment, stderr's file), forks a process for
# it, writes its pid, then its exit code once it has ended.
HELPER = """\
import json, os, sys
from fedhh.data.synthetic import SyntheticShape, cached_tables

cached_tables(1, SyntheticShape())
print("ready", flush=True)
for line in sys.stdin:
    argv, env, err = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.environ.update(env)
        fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 2)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        from fedhh.cli.main import main

        sys.exit(main(argv))  # out of the loop: the interpreter ends as the CLI's does
    print(pid, flush=True)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class Forker:
    """The helper process: ``start`` forks a command, ``ended`` says whether it has."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HELPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            bufsize=0, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert self.process.stdout is not None
        self.fd = self.process.stdout.fileno()
        self.buffer = b""  # read from the pipe, not yet taken as lines
        assert self.line(DEADLINE_S) == "ready"

    def line(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            assert left > 0, "the helper said nothing within the deadline"
            if select.select([self.fd], [], [], left)[0]:
                chunk = os.read(self.fd, 4096)
                assert chunk, f"the helper ended (exit {self.process.wait()})"
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode().strip()

    def start(self, argv: list[str], env: dict[str, str], stderr: Path) -> int:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps([argv, env, str(stderr)]) + "\n").encode())
        return int(self.line(DEADLINE_S))

    def ended(self) -> bool:
        """Whether the command's exit code is waiting (it has ended)."""
        return b"\n" in self.buffer or bool(select.select([self.fd], [], [], 0)[0])

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def forker() -> Iterator[Forker]:
    helper = Forker()
    try:
        yield helper
    finally:
        helper.close()


def terminated_while_generating(forker: Forker, arguments: list[str], scratch_parent: Path,
                                stderr_file: Path, env: dict[str, str] | None = None
                                ) -> tuple[int, str]:
    """``fedhh ARGUMENTS`` sent SIGTERM once its users are being generated (a scratch folder
    in ``scratch_parent``): its exit code and stderr."""
    pid = forker.start(arguments, env or {}, stderr_file)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not list(scratch_parent.glob(".gen-*")):
            assert not forker.ended(), stderr_file.read_text()
            assert time.monotonic() < deadline, "no scratch folder within the deadline"
            time.sleep(0.05)
        os.kill(pid, signal.SIGTERM)
        code = int(forker.line(DEADLINE_S))
    except BaseException:
        if not forker.ended():
            os.kill(pid, signal.SIGKILL)
        forker.line(DEADLINE_S)  # its exit code: the helper is ready for the next command
        raise
    return code, stderr_file.read_text()


def test_sigterm_during_generation_leaves_nothing_behind(forker: Forker, tmp_path: Path
                                                         ) -> None:
    out = tmp_path / "datasets" / "reddit"
    code, stderr = terminated_while_generating(
        forker, ["data", "generate", "synthetic-reddit-small", "--users", "400000", "--seed",
                 "1", "--out", str(out), "--cache-dir", str(tmp_path / "cache")], out.parent,
        tmp_path / "stderr")
    assert code == 130, stderr
    assert stderr.strip().endswith("fedhh data: interrupted"), stderr
    assert list(out.parent.iterdir()) == []


def test_sigterm_while_experiments_build_a_dataset_leaves_nothing_behind(
        forker: Forker, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # dev-reddit-400k: the synthetic-reddit generator at 400,000 users, built into the cache
    # before the first run (seconds of generation: time for the signal to find it at work).
    code, stderr = terminated_while_generating(
        forker, ["experiments", "segmentation", "--dataset", "dev-reddit-400k", "--seeds", "1",
                 "--quiet", "--store", str(tmp_path / "store"), "--out",
                 str(tmp_path / "out")], cache, tmp_path / "stderr",
        {"FEDHH_CACHE": str(cache)})
    assert code == 130, stderr
    assert stderr == "fedhh experiments: interrupted\n"
    # (the build's lock file stays, as after `fedhh data generate`: it holds no data)
    assert [p.name for p in cache.iterdir() if p.suffix != ".lock"] == []
