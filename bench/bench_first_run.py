"""Benchmark: a new user's first `fedhh simulate` (issue 13, "the first hour").

Runs the default `fedhh simulate` twice on a pseudo-terminal, as a user at a terminal sees it:
first with an empty cache folder (the 1.6M-user dataset is generated, checked, its ground truth
counted), then again (everything read from the cache). For each run it reports

- wall time, and each step's time as its progress meter showed it;
- the longest silence: the longest time the terminal received nothing;
- peak resident memory: of the largest single process (``wait4``'s ``ru_maxrss``, what
  ``/usr/bin/time -v`` reports) and of the whole process tree, the generator's worker processes
  included (/proc sampled every 0.2 s): its PSS (shared pages counted once) and its RSS (each
  process's resident pages, shared ones in every process that maps them).

    .venv/bin/python bench/bench_first_run.py                 # cache in a temporary folder
    .venv/bin/python bench/bench_first_run.py --cache DIR     # keep the generated dataset

Results are printed and written to docs/benchmarks/first-run.md.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import platform
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks" / "first-run.md"
FEDHH = ROOT / ".venv" / "bin" / "fedhh"
SAMPLE_S = 0.2
# A meter's line: "<description>: <percent>%|" (or "<description>: <count> <unit> [" without a
# total); the description is the step.
METER = re.compile(r"^(?P<step>[^\r\n|]+?):\s+\d+%\|")


@dataclass
class Run:
    label: str
    wall_s: float = 0.0
    peak_process_mib: float = 0.0
    peak_tree_mib: float = 0.0
    peak_tree_pss_mib: float = 0.0
    longest_silence_s: float = 0.0
    silence_after: str = ""
    steps: dict[str, list[float]] = field(default_factory=dict)  # step -> [first, last] seen
    exit_status: int = 0


def tree_memory_mib(root: int) -> tuple[float, float]:
    """(RSS, PSS) of ``root`` and all its descendants, in MiB. RSS counts a page shared by
    several processes (the generator's workers share the parent's tables copy-on-write) once
    per process; PSS splits it between them, so PSS adds up to the memory actually used."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    rss_kib = pss_kib = 0
    stack = [root]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss_kib += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss_kib += int(line.split()[1])
        except OSError:
            continue
    return rss_kib / 1024, pss_kib / 1024


def run_on_terminal(label: str, argv: list[str], env: dict[str, str]) -> Run:
    """Run ``argv`` on a pseudo-terminal of 120 columns; collect what the terminal shows."""
    result = Run(label)
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, on the terminal
        os.execve(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    start = last_output = time.monotonic()
    last_sample = 0.0
    screen = ""
    while True:
        ready, _, _ = select.select([fd], [], [], SAMPLE_S)
        now = time.monotonic()
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the terminal closed: the command ended
                break
            if not data:
                break
            gap = now - last_output
            if gap > result.longest_silence_s:
                result.longest_silence_s = gap
                result.silence_after = _last_line(screen) or "(start)"
            last_output = now
            text = data.decode("utf-8", "replace")
            screen += text
            for piece in re.split(r"[\r\n]", text):
                match = METER.match(piece.strip())
                if match:
                    seen = result.steps.setdefault(match["step"], [now - start, now - start])
                    seen[1] = now - start
        if now - last_sample >= SAMPLE_S:
            last_sample = now
            rss, pss = tree_memory_mib(pid)
            result.peak_tree_mib = max(result.peak_tree_mib, rss)
            result.peak_tree_pss_mib = max(result.peak_tree_pss_mib, pss)
    _, status, usage = os.wait4(pid, 0)
    result.wall_s = time.monotonic() - start
    result.exit_status = os.waitstatus_to_exitcode(status)
    result.peak_process_mib = usage.ru_maxrss / 1024  # KiB on Linux
    tail = now - last_output
    if tail > result.longest_silence_s:
        result.longest_silence_s = tail
        result.silence_after = _last_line(screen)
    return result


def _last_line(screen: str) -> str:
    pieces = [p.strip() for p in re.split(r"[\r\n]", screen) if p.strip()]
    return pieces[-1][:90] if pieces else ""


def report(runs: list[Run], command: str, cache: Path) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    lines = [
        "# A new user's first `fedhh simulate`",
        "",
        "Command: `.venv/bin/python bench/bench_first_run.py` (this page is written by it). It "
        f"runs `{command}` on a pseudo-terminal, first with an empty cache folder, then again "
        f"(commit {commit}).",
        f"Machine: {os.cpu_count()} cores, {platform.machine()}, Python "
        f"{platform.python_version()}; load average at the end "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} (the machine is shared).",
        "",
        "| run | wall (s) | peak RSS, largest process (GiB) | peak PSS, all processes (GiB) "
        "| peak RSS, all processes (GiB) | longest silence (s) | exit |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in runs:
        lines.append(f"| {run.label} | {run.wall_s:.0f} | {run.peak_process_mib / 1024:.2f} | "
                     f"{run.peak_tree_pss_mib / 1024:.2f} | {run.peak_tree_mib / 1024:.2f} | "
                     f"{run.longest_silence_s:.1f} | {run.exit_status} |")
    lines += ["", "The longest silence is the longest time the terminal received nothing; it "
              "came after:", ""]
    lines += [f"- {run.label}: `{run.silence_after}`" for run in runs]
    for run in runs:
        lines += ["", f"Steps of the {run.label} run, as their meters showed them (seconds "
                  "from the start):", "", "| step | shown from | to |", "| --- | --- | --- |"]
        lines += [f"| {step} | {a:.1f} | {b:.1f} |" for step, (a, b) in run.steps.items()]
    lines += ["", f"Cache folder: a fresh `{cache.name}` (removed afterwards unless --cache)."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, help="cache folder to use and keep (must not "
                        "hold the default dataset yet)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    if not FEDHH.exists():
        raise SystemExit(f"{FEDHH} is missing: run `python3 bootstrap.py test` first")
    cache = args.cache or Path(tempfile.mkdtemp(prefix="fedhh-first-run-"))
    if any(cache.glob("synthetic-reddit-v*")):
        raise SystemExit(f"{cache} already holds the default dataset: use an empty folder")
    env = {**os.environ, "FEDHH_CACHE": str(cache), "TERM": os.environ.get("TERM", "xterm")}
    work = Path(tempfile.mkdtemp(prefix="fedhh-first-run-out-"))
    argv = [str(FEDHH), "simulate", "--json", str(work / "out.json")]
    try:
        runs = [run_on_terminal(label, argv, env) for label in ("first", "second")]
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if args.cache is None:
            shutil.rmtree(cache, ignore_errors=True)
    text = report(runs, "fedhh simulate --json out.json", cache)
    print(text)
    if not args.no_write:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(text)
    return 0 if all(run.exit_status == 0 for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
