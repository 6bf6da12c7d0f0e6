"""A coordinator served in the test's own process (``fedhh_coordinator.main.serve``), as the
tests of its start and stop run it (not a test module)."""

from __future__ import annotations

import argparse
from pathlib import Path

from fedhh.cli.main import build_parser
from fedhh_coordinator import main as coordinator_main


def in_process(tmp_path: Path) -> tuple[argparse.Namespace, coordinator_main.Checked]:
    """The arguments of a coordinator over ``tmp_path``'s store and signing key, serving on
    ports the OS picks, and what ``check_startup`` would have read for it (its secrets; no
    TLS), for ``serve(args, checked)``."""
    args = build_parser().parse_args([
        "coordinator", "--insecure", "--aggregator", "127.0.0.1:9",
        "--db", str(tmp_path / "c.sqlite"), "--signing-key", str(tmp_path / "signing.pem"),
        "--listen", "127.0.0.1:0", "--metrics-port", "0"])
    return args, coordinator_main.Checked(b"c" * 32, b"a" * 32, None)
