"""Every service process starts through one piece, ``fedhh.rpc.serving.run_service``: uvloop,
the cycle collector run seldom, the soft open-file limit raised to the hard one. Before, each
service's ``run`` had its own copy, and the combiner's installed uvloop alone."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# The entry module of each service process (its ``run`` is what ``fedhh <command>`` calls).
ENTRIES = {
    "coordinator": "server/fedhh_coordinator/main.py",
    "selector": "server/fedhh_coordinator/selector_main.py",
    "aggregator": "aggregator/fedhh_aggregator/main.py",
    "combiner": "aggregator/fedhh_aggregator/combiner_main.py",
    "device": "device/fedhh_device/main.py",
}


def _calls(node: ast.AST) -> list[str]:
    """The dotted names called anywhere under ``node`` (``serving.run_service``)."""
    found = []
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            parts, func = [], call.func
            while isinstance(func, ast.Attribute):
                parts.append(func.attr)
                func = func.value
            if isinstance(func, ast.Name):
                found.append(".".join([func.id, *reversed(parts)]))
    return found


@pytest.mark.parametrize("service", sorted(ENTRIES))
def test_each_service_process_starts_through_run_service(service: str) -> None:
    tree = ast.parse((ROOT / ENTRIES[service]).read_text())
    run = next(node for node in tree.body
               if isinstance(node, ast.FunctionDef) and node.name == "run")
    assert "serving.run_service" in _calls(run)


# (that no service, device process or command starts an event loop of its own, beside
# run_service, is tests/unit/test_layers.py's ONE_PIECE: asyncio.run in fedhh.rpc.serving only)


CHILD = """
import asyncio, gc, json, resource
from fedhh.rpc import serving
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
lowered = soft == hard and hard > 64
if lowered:  # (so that the raise is seen where the limits start equal)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
async def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {"loop": type(asyncio.get_running_loop()).__module__,
            "threshold": list(gc.get_threshold()), "frozen": gc.get_freeze_count() > 0,
            "raised": soft == hard}
print(json.dumps(serving.run_service(main())))
"""


def test_run_service_prepares_the_process_and_returns_what_main_returns() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["loop"].startswith("uvloop")
    assert seen["threshold"][0] == 1_000_000 and seen["frozen"]
    assert seen["raised"]
