"""Benchmark of the web device (clients/web) in headless Chromium: one device's time in a real
SecAgg+ round at D = 4096.

The real aggregator and coordinator (Connect ports, TLS from a dev CA) run one round of
``--total`` devices: Python devices on gRPC and ``--web`` web devices in one Chromium page
(test/web_devices.ts bundled, each device under its own host name, as in
tests/web/test_web_discovery.py). Reported per web device and round:

* own work by step, wall milliseconds of the device's own computation (src/round.ts
  ``timings``: the state machine's call and the signing of its submission, not the calls on
  the wire): "config" (verify the signed config, the floors, the lying-server bound, build the
  device), "report" (codec, selection, randomizer over D words), "advertise", "shares" (2k
  X25519 agreements, Shamir shares, share encryption), "masked" (k + 1 mask expansions by
  AES-CTR, the masked vector, its digest), "consistency", "unmask";
* the page's main-thread CPU over the whole round (Chromium's ``TaskDuration`` from the
  DevTools Performance domain), divided by the page's devices; WebCrypto's work off the main
  thread is not in it, but is in the wall figures;
* the round's wall time as the coordinator saw it.

``--rounds`` rounds are run, one run each, so the page's first (cold) round is reported
apart from the later (warm) ones. Each round needs every device (min_devices = ``--total``).
The page's devices check in until the bench stops them, after the runs: an attempt that aborts
(a device late on a loaded machine: give more ``--stage-ms``) is made again with the page's
devices in it, as with the Python devices, and only the attempts that released are reported.
Before, the page's devices stopped after ``--rounds`` tasks, one an attempt, so an aborted
attempt left the last run's later attempts without them, each aborting with ``--total`` -
``--web`` devices. A run that fails still ends the bench, with the coordinator's log.

Usage (from the repository root, Node >= 20.19, chromium and chromedriver installed):
    python bench/bench_web_device.py            # -> docs/benchmarks/web-device.md
    python bench/bench_web_device.py --web 4 --out /tmp/web.md
    python bench/bench_web_device.py --cpu-throttle 20 --rounds 2 --out /tmp/web-slow.md
    python bench/bench_web_device.py --hidden 330 --rounds 3 --out /tmp/web-hidden.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import http.server
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "web"), str(ROOT / "tests" / "integration")]

import grpc  # noqa: E402
import webkit  # noqa: E402
from networked_kit import COORDINATOR_FLAGS, run_config, short_dataset  # noqa: E402

from fedhh.config import Mode  # noqa: E402
from fedhh.data.registry import resolve_dataset  # noqa: E402
from fedhh.errors import ConfigError  # noqa: E402
from fedhh.rpc.admin_client import AdminClient  # noqa: E402
from fedhh.rpc.run_config import from_proto  # noqa: E402
from fedhh.rpc.topology import LocalTopology  # noqa: E402
from fedhh.v1 import coordinator_pb2 as pb  # noqa: E402
from fedhh_device.secagg_run import Floors  # noqa: E402

OUT = ROOT / "docs" / "benchmarks" / "web-device.md"
STEPS = ("config", "report", "advertise", "shares", "masked", "consistency", "unmask")
HOSTS = "devices.test"
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>fedhh web device bench</title></head>
<body>starting<script type="module" src="devices.js"></script></body></html>
"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _host(address: str, user: int) -> str:
    return f"https://d{user}.{HOSTS}:{address.rsplit(':', 1)[1]}"


def _fleet(coordinator: str, aggregator: str, users: range, tokens: list[str],
           items: list[list[str]], counts: list[list[int]]) -> dict[str, Any]:
    """The page's fleet (test/web_devices.ts ``Fleet``), given the two Connect addresses: each
    web device under its own host name, checking in until the bench stops it (fedhhStop), so
    it takes part in every attempt of every run, an attempt made again among them."""
    return {"coordinator": f"https://{coordinator}", "aggregator": f"https://{aggregator}",
            "coordinators": [_host(coordinator, u) for u in users],
            "aggregators": [_host(aggregator, u) for u in users],
            "tokens": tokens, "items": items, "counts": counts,
            "timings": True, "untilStopped": True}


def _config(total: int, dimension_bits: int, stage_ms: int) -> pb.RunConfig:
    """Each round's run: every one of ``total`` devices needed (min_devices = total)."""
    return run_config(rounds=1, max_bits=dimension_bits, dim_limit=1 << dimension_bits,
                      target_devices=total, min_devices=total, stage_ms=stage_ms)


def _refusal(total: int, dimension_bits: int, stage_ms: int) -> str | None:
    """Why the coordinator would refuse the run (its own check of a run's config), or why
    every device would refuse its rounds, or None."""
    try:
        from_proto(_config(total, dimension_bits, stage_ms)).validate(Mode.NETWORK)
    except ConfigError as error:
        return str(error)
    # (n_min is min_devices, --total: below the devices' floor each attempt aborted with no
    # device in it, five times, before the bench ended on the failed run)
    if total < (floor := Floors().min_cohort):
        return (f"every device refuses a round whose n_min (--total, {total}) is below its "
                f"floor of {floor} (the Python devices' --min-cohort, the web device's "
                "minCohort)")
    return None


def _least_total(dimension_bits: int, stage_ms: int, above: int, most: int = 1000) -> int | None:
    """The least --total over ``above`` (at most ``most``) whose run is taken, if any is."""
    if _refusal(most, dimension_bits, stage_ms) is not None:
        return None  # (no cohort size is what is refused)
    return next(n for n in range(above + 1, most + 1)
                if _refusal(n, dimension_bits, stage_ms) is None)


def measure(total: int, web: int, dimension_bits: int, rounds: int,
            cpu_throttle: float = 1.0, stage_ms: int = 20_000,
            hidden_s: float | None = None) -> dict[str, Any]:
    dist = webkit.build()
    with tempfile.TemporaryDirectory(prefix="fedhh-web-bench-") as tmp:
        work = Path(tmp)
        root = work / "page"
        root.mkdir()
        shutil.copy(dist / "browser" / "devices.js", root / "devices.js")
        (root / "devices.html").write_text(PAGE)
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        origin = f"http://127.0.0.1:{server.server_address[1]}"
        data = short_dataset(work / "users.txt")
        dataset = resolve_dataset(str(data), cache_dir=work / "cache")
        web_users = range(total - web, total)
        flags = ["--web-listen", "127.0.0.1:0", "--web-origin", origin]
        try:
            with LocalTopology(work / "topology", env={"FEDHH_CACHE": str(work / "cache")}
                               ) as topo:
                topo.start_aggregator(flags)
                topo.start_coordinator([*COORDINATOR_FLAGS, *flags, "--aggregator-web-url",
                                        f"https://{topo.web_address('aggregator')}"])
                topo.start_devices("devices-grpc", str(data), f"0:{total - web}")
                topo.wait_for_devices()
                admin = AdminClient(topo.address("coordinator"), topo.token("admin"),
                                    topo.workdir / "tls" / "ca.pem")
                with admin, webkit.chromium("--ignore-certificate-errors",
                                     f"--host-resolver-rules=MAP *.{HOSTS} 127.0.0.1") as browser:
                    held = [dataset.user_items(user) for user in web_users]
                    fleet = _fleet(topo.web_address("coordinator"),
                                   topo.web_address("aggregator"), web_users,
                                   admin.mint_tokens(web),
                                   [[dataset.vocabulary[i] for i in items.tolist()]
                                    for items, _ in held],
                                   [[int(c) for c in counts] for _, counts in held])
                    (root / "fleet.json").write_text(json.dumps(fleet))
                    browser.get(f"{origin}/devices.html")
                    _wait(browser, "return window.fedhhDevices || null", 60)
                    if cpu_throttle != 1.0:  # a slow CPU, as DevTools' "CPU throttling"
                        browser.execute_cdp_cmd("Emulation.setCPUThrottlingRate",
                                                {"rate": cpu_throttle})
                    browser.execute_cdp_cmd("Performance.enable", {})
                    page = browser.current_window_handle
                    browser.execute_script(
                        "window.fedhhVisibility = [document.visibilityState]; "
                        "document.addEventListener('visibilitychange', "
                        "() => window.fedhhVisibility.push(document.visibilityState))")
                    if hidden_s is not None:
                        # Another tab on top: the page is hidden (document.visibilityState),
                        # and Chromium throttles a page hidden for 5 minutes the most.
                        browser.switch_to.new_window("tab")
                        time.sleep(hidden_s)
                    runs, cpu = [], []
                    for index in range(rounds):
                        before = _task_seconds(browser) if hidden_s is None else 0.0
                        try:
                            admin.start_run(_config(total, dimension_bits, stage_ms),
                                            run_id=f"bench-{index}")
                        except grpc.RpcError as error:
                            raise SystemExit("the coordinator refused the run: "
                                             f"{error.details()}") from None
                        runs.append(admin.wait(f"bench-{index}", 600))
                        if runs[-1].state != "done":
                            print(browser.execute_script("return window.fedhhDevices"),
                                  (topo.workdir / "coordinator.log").read_text()[-3000:],
                                  file=sys.stderr)
                            break
                        cpu.append(_task_seconds(browser) - before if hidden_s is None else 0.0)
                    browser.switch_to.window(page)
                    visibility = browser.execute_script("return window.fedhhVisibility || null")
                    attempts = _released_attempts(runs)
                    _wait(browser, "return window.fedhhDevices", 120,
                          until=lambda s: "error" in s or _ended(s["tasks"], attempts))
                    browser.execute_script("window.fedhhStop()")
                    state = _wait(browser, "const s = window.fedhhDevices; "
                                  "return s && (s.results || s.error) ? s : null", 120)
        finally:
            server.shutdown()
            server.server_close()
    if "error" in state:
        raise SystemExit(f"the page failed: {state['error']}")
    for run in runs:
        if run.state != "done":
            raise SystemExit(f"the run failed: {run.error}")
    released = [r for run in runs for r in run.rounds if r.state == "released"]
    own = _released_tasks([device["tasks"] for device in state["results"]],
                          _released_attempts(runs))
    tasks = [task for device in own for task in device]
    if not all(t["outcome"] in ("completed", "late") and t["contributed"] for t in tasks):
        raise SystemExit(f"a web device did not complete: {json.dumps(tasks)}")
    # The first released round of each device (cold: the page's code not yet optimised; an
    # aborted attempt before it may have warmed part of it), the others.
    cold = [device[0]["timings"] for device in own]
    warm = [t["timings"] for device in own for t in device[1:]]
    return {"total": total, "web": web, "rounds": rounds, "cpu_throttle": cpu_throttle,
            "stage_ms": stage_ms, "hidden_s": hidden_s, "visibility": visibility,
            "dimension": released[0].domain_size,
            "participants": [r.participants for r in released],
            "round_s": [r.seconds for r in released],
            "cold_ms": {step: [t.get(step, 0.0) for t in cold] for step in STEPS},
            "warm_ms": {step: [t.get(step, 0.0) for t in warm] for step in STEPS},
            "main_thread_cpu_ms_per_device": [1000 * c / web for c in cpu]}


def _released_attempts(runs: list[Any]) -> set[tuple[str, int, int]]:
    """(run id, round, attempt) of each attempt that released, as a web task names its own."""
    return {(run.run_id, r.round, r.attempt) for run in runs for r in run.rounds
            if r.state == "released"}


def _attempt(task: dict[str, Any]) -> tuple[str, int, int]:
    return (task["runId"], task["round"], task["attempt"])


def _ended(tasks: list[list[dict[str, Any]]], released: set[tuple[str, int, int]]) -> bool:
    """Whether every web device (its ended tasks) has ended its task of each released attempt
    (every device is in each: min_devices = --total)."""
    return all(released <= {_attempt(t) for t in device} for device in tasks)


def _released_tasks(tasks: list[list[dict[str, Any]]], released: set[tuple[str, int, int]]
                    ) -> list[list[dict[str, Any]]]:
    """Each web device's tasks of the attempts that released, in the order it ended them."""
    return [[t for t in device if _attempt(t) in released] for device in tasks]


def _wait(browser: Any, script: str, timeout_s: float,
          until: Callable[[Any], bool] = bool) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    def ready(driver: Any) -> Any:
        value = driver.execute_script(script)
        return value if value and until(value) else None

    return WebDriverWait(browser, timeout_s, poll_frequency=0.2).until(ready)


def _task_seconds(browser: Any) -> float:
    metrics = browser.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
    return float(next(m["value"] for m in metrics if m["name"] == "TaskDuration"))


def _chromium_version() -> str:
    done = subprocess.run([webkit.CHROMIUM, "--version"], capture_output=True, text=True)
    return done.stdout.strip() or "chromium"


def report(figures: dict[str, Any]) -> str:
    def mean(values: list[float]) -> str:
        return f"{statistics.fmean(values):.1f}" if values else "-"

    cold, warm = figures["cold_ms"], figures["warm_ms"]
    cpu = figures["main_thread_cpu_ms_per_device"]

    lines = [
        "# The web device in headless Chromium: one device's time in a round",
        "",
        f"Measured {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `bench/bench_web_device.py` "
        f"on {platform.machine()} ({_chromium_version()}, "
        f"Python {platform.python_version()}), {os.cpu_count()} cores shared with the services "
        "and the Python devices of the round.",
        "",
        f"{figures['rounds']} real rounds (one run each) of {figures['total']} devices at "
        f"D = {figures['dimension']}: {figures['total'] - figures['web']} Python devices on "
        f"gRPC and {figures['web']} web device(s) in one Chromium page over the Connect ports "
        "(TLS); lying-server (k, t) and the consistency check, as the coordinator always "
        "chooses."
        + (f" The page's CPU slowed {figures['cpu_throttle']:g} times (DevTools' "
           "Emulation.setCPUThrottlingRate), as a slow phone's."
           if figures.get("cpu_throttle", 1.0) != 1.0 else "")
        + f" Each stage's window was {figures.get('stage_ms', 20_000) / 1000:g} s."
        + (f" The page was in a background tab (hidden) from {figures['hidden_s']:g} s before "
           "the first round to the last." if figures.get("hidden_s") is not None else "")
        + " Rounds took " + ", ".join(f"{s:.1f}" for s in figures["round_s"])
        + " s, released over " + ", ".join(map(str, figures["participants"])) + " devices.",
        "",
        "Own work of a web device by step (wall ms, the mean over devices): the first round "
        "of the page (cold: its code not yet optimised by V8) and the later ones (warm).",
        "",
        "| step | cold | warm |",
        "| --- | --- | --- |",
        *[f"| {step} | {mean(cold[step])} | {mean(warm[step])} |" for step in STEPS],
        f"| **all steps** | **{mean([sum(v) for v in zip(*cold.values(), strict=True)])}** | "
        f"**{mean([sum(v) for v in zip(*warm.values(), strict=True)])}** |",
        "",
        ("Main-thread CPU of the page: not measured (the page was hidden, another tab the "
         "current one)." if figures.get("hidden_s") is not None else
         "Main-thread CPU of the page per device and round (Chromium's TaskDuration, which "
         "includes the wire's encoding and fetch handling and excludes WebCrypto's AES work off "
         "the main thread): " + ", ".join(f"{c:.0f}" for c in cpu) + " ms."),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total", type=int, default=200, help="devices in the round")
    parser.add_argument("--web", type=int, default=1, help="of them, web devices in the page")
    parser.add_argument("--rounds", type=int, default=4, help="rounds, one run each (4)")
    parser.add_argument("--dimension-bits", type=int, default=12, help="D = 2^bits (12)")
    parser.add_argument("--cpu-throttle", type=float, default=1.0,
                        help="slow the page's CPU this many times (DevTools' CPU throttling)")
    parser.add_argument("--stage-ms", type=int, default=20_000,
                        help="each SecAgg+ stage's window (20000; a run's default is 10000)")
    parser.add_argument("--hidden", type=float, default=None, metavar="SECONDS",
                        help="put the page in a background tab SECONDS before the first round "
                        "(over 300: Chromium's intensive throttling of hidden pages)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    started = time.perf_counter()
    if not 1.0 <= args.cpu_throttle <= 100.0:
        parser.error(f"--cpu-throttle must be from 1 to 100, got {args.cpu_throttle:g}")
    if not 1 <= args.web <= args.total:
        parser.error(f"--web must be from 1 to --total ({args.total}), got {args.web}")
    # (before any service, the page or Chromium starts: the coordinator refused a small
    # --total only at the first round, as a gRPC traceback)
    if (refusal := _refusal(args.total, args.dimension_bits, args.stage_ms)) is not None:
        least = _least_total(args.dimension_bits, args.stage_ms, args.total)
        parser.error(f"the coordinator would refuse this run: {refusal}"
                     + ("" if least is None else f"; the least --total it takes is {least}"))
    figures = measure(args.total, args.web, args.dimension_bits, args.rounds, args.cpu_throttle,
                      args.stage_ms, args.hidden)
    text = report(figures)
    print(text)
    print(json.dumps(figures))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
