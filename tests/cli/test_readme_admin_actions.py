"""The README's one line on `fedhh admin` names every action it has (before, it left out
`wait` and `list`, the two a new operator needs first after `start`)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from fedhh.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_names_every_admin_action() -> None:
    parser = build_parser("admin")
    admin = next(a for a in parser._actions  # (argparse keeps its subparsers private)
                 if isinstance(a, argparse._SubParsersAction)).choices["admin"]
    actions = next(a for a in admin._actions
                   if isinstance(a, argparse._SubParsersAction)).choices
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    listed = re.search(r"`fedhh admin` is the operator's client of the coordinator \(([^)]*)\)",
                       text)
    assert listed is not None
    named = {w.strip() for w in listed[1].split(":")[0].split(",")}
    assert named == set(actions)
