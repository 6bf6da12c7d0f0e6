"""The compose stack's first discovery is one command in the README and in docs/networked.md
("A discovery"), at ``fedhh up``'s eps_agg, which the README's privacy paragraph explains
(before, docs/networked.md asked for --eps-agg 8 where the README asked for 2)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from fedhh.cli.main import build_parser
from fedhh.cli.up import UP_DEFAULTS

ROOT = Path(__file__).resolve().parents[2]
START = "docker compose run --rm admin start "


def _start_options(doc: str) -> dict[str, object]:
    """The parsed options of the one ``admin start`` of the compose stack in ``doc``."""
    text = (ROOT / doc).read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [line for line in text.splitlines() if line.startswith(START)]
    assert len(lines) == 1, (doc, lines)
    words = shlex.split(re.sub(r"\s+", " ", lines[0][len(START):]))
    return vars(build_parser("admin").parse_args(["admin", "start", *words]))


def test_the_readme_and_networked_md_start_the_same_discovery() -> None:
    readme, networked = _start_options("README.md"), _start_options("docs/networked.md")
    assert readme == networked
    assert readme["eps_agg"] == UP_DEFAULTS["eps_agg"] == 2.0
