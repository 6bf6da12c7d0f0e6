"""Benchmark: the real services under load (issue 5).

Runs `fedhh loadtest` for the two target configurations and writes docs/benchmarks/loadtest.md:

- N = 1000 devices, D = 2^16, 10% dropout, one round: target at most 10 s wall for the round;
- N = 10,000 devices, D = 2^12: the round completes.

    .venv/bin/python bench/bench_loadtest.py            # both
    .venv/bin/python bench/bench_loadtest.py --quick    # the first only

Devices, coordinator and aggregator all share this machine's 2 cores. The "profile" is where
the CPU time goes (per service) and where the round's wall time goes (per protocol call, as the
devices see it).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks" / "loadtest.md"
sys.path.insert(0, str(ROOT))

CONFIGS = [
    ("1000 devices, D = 2^16, 10% dropout", dict(devices=1000, dim=1 << 16, dropout=0.1,
                                                  stage_ms=2500)),
    ("10,000 devices, D = 2^12, 10% dropout", dict(devices=10_000, dim=1 << 12, dropout=0.1,
                                                    stage_ms=40_000)),
]


def main() -> int:
    from fedhh.rpc.loadtest import LoadSpec, render, run_load

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sections = []
    for name, params in CONFIGS[:1] if args.quick else CONFIGS:
        print(f"running: {name}", flush=True)
        spec = LoadSpec(**params)  # type: ignore[arg-type]
        report = run_load(spec)
        text = render(report)
        print(text, flush=True)
        command = (f"fedhh loadtest --devices {spec.devices} --dim {spec.dim} "
                   f"--dropout {spec.dropout} --stage-ms {spec.stage_ms}")
        released = [r for r in report["rounds"] if r["state"] == "released"]
        cpu = report["usage"]
        total_cpu = sum(u.get("cpu_s", 0.0) for u in cpu.values())
        profile = ", ".join(f"{k} {u['cpu_s']:.1f} s ({100 * u['cpu_s'] / total_cpu:.0f}%)"
                            for k, u in cpu.items() if u)
        sections += [
            f"## {name}", "", f"Command: `{command}`", "",
            "```", text, "```", "",
            f"CPU split: {profile}.",
            f"Round wall time (check-in through release): "
            f"{released[0]['seconds']:.2f} s." if released else "No round was released.",
            "",
        ]
    lines = [
        "# Load test benchmark", "",
        f"Command: `.venv/bin/python bench/bench_loadtest.py{' --quick' if args.quick else ''}` "
        f"({time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}); devices, coordinator and aggregator share the "
        "machine.", "",
        "Dropouts are injected at random stages, so each stage that lost a device waits for its "
        "deadline: the round's wall time is then set by the stage deadlines (`--stage-ms` "
        "apart), which must leave the live devices time to finish each stage.", "",
        *sections,
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
