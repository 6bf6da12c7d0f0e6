"""Packaging invariants: the library imports without a network stack, and the checked-in
protobuf code is exactly what proto/ generates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_library_does_not_import_the_network_stack() -> None:
    code = (
        "import sys, fedhh, fedhh.simulation.runner, fedhh.privacy, fedhh.secagg, fedhh.data, "
        "fedhh.cli.main; fedhh.cli.main.build_parser(); "
        # the network stack of docs/architecture.md (before, grpc alone was looked for)
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'asyncio_grpc', "
        "'grpc_health', 'grpc_reflection', 'aiohttp', 'uvloop', 'prometheus_client', "
        "'psycopg') or m.startswith(('fedhh.v1', 'fedhh.rpc'))); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_device_facing_services_start_without_scipy_or_aiohttp() -> None:
    """A selector and an aggregator worker compute no privacy bound and, unless their Connect
    port is asked for, serve no HTTP: scipy and aiohttp took most of a selector's start-up."""
    code = (
        "import sys, fedhh_coordinator.selector_main, fedhh_aggregator.main; "
        "bad = sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'aiohttp'}); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_generated_protobuf_code_has_not_drifted() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "proto" / "generate.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
