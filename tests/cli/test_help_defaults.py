"""A new operator reads a default off `--help`: every option that has one says it."""

import argparse
import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from fedhh.cli.main import build_parser


def options(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from options(sub, f"{path} {name}")
        elif action.option_strings:
            yield path, action


def states_no_default(action: argparse.Action) -> bool:
    if isinstance(action, (argparse._HelpAction, argparse._VersionAction,
                           argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return False  # a switch: its default is its absence
    if action.default in (None, False, "", [], argparse.SUPPRESS):
        return False  # nothing to state
    return "default" not in (action.help or "").lower()


def test_every_option_with_a_default_states_it() -> None:
    """Before: the services' --listen (127.0.0.1:7000, :7100, :7200), the coordinator's --db and
    --signing-key, the device's --users (every user) and --drop-stage (random), data inspect
    --top and data warm-start --size named none."""
    silent = [f"{path} {action.option_strings[0]} (default {action.default!r})"
              for path, action in options(build_parser(), "fedhh")
              if states_no_default(action)]
    assert silent == []


def test_the_listen_default_is_the_real_one(capsys: pytest.CaptureFixture[str]) -> None:
    """The stated default is the parser's own, not a copy that can drift."""
    for command, default in [("coordinator", "127.0.0.1:7000"), ("aggregator", "127.0.0.1:7100"),
                             ("combiner", "127.0.0.1:7200")]:
        with contextlib.suppress(SystemExit):
            build_parser().parse_args([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert f"OS-chosen; default {default})" in text, command


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from parsers(sub)


def test_no_help_sends_a_reader_to_an_issue_number() -> None:
    """A user has the docs, not this project's tracker: `fedhh experiments --help` said "(issue
    15, docs/utility.md)" and "(issue 27)"; it names the pages."""
    named = [f"{parser.prog}: {found.group(0)}" for parser in parsers(build_parser())
             for found in re.finditer(r"\bissue \d+", parser.format_help(), re.IGNORECASE)]
    assert named == []


ROOT = Path(__file__).resolve().parents[2]
# Dated logs of what was measured when; they may say which issue a stop worked on.
LOGS = {"docs/benchmarks.md", "docs/testing.md"}


def pages() -> list[Path]:
    return sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])


def page_lines(page: Path) -> Iterator[tuple[int, str]]:
    """The page's lines outside code blocks, numbered as in the file: a `#` inside a block is a
    shell's comment, not a heading, and a block quotes a command, not the page's prose."""
    inside = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            inside = not inside
        elif not inside:
            yield number, line


def test_no_docs_heading_names_an_issue_number() -> None:
    """A heading says what its section is about: "Sharded rounds (issue 17)" and "Issue 30's
    rows at the fifty-first stop" named this project's tracker, which a reader of the docs
    does not have."""
    named = [f"{page.relative_to(ROOT)}:{number}: {line}" for page in pages()
             for number, line in page_lines(page)
             if line.startswith("#") and re.search(r"\bissue\b", line, re.I)]
    assert named == []


def test_no_docs_prose_names_an_issue_number() -> None:
    """The prose says what a figure or a rule refers to: "Issue 12 expected: ... 0.30", "issue
    30's 2 ms", "before issue 28 every replica mounted ..." meant nothing to a reader without
    this project's tracker. "issue" and its number may fall on two lines."""
    named = []
    for page in pages():
        if page.relative_to(ROOT).as_posix() in LOGS:
            continue
        lines = list(page_lines(page))
        for (number, line), (_, following) in zip(lines, [*lines[1:], (0, "")], strict=True):
            for found in re.finditer(r"\bissue\s+\d+", f"{line} {following}", re.I):
                if found.start() < len(line):
                    named.append(f"{page.relative_to(ROOT)}:{number}: {found.group(0)}")
    assert named == []
