"""The report's commands and dataset name are code spans that hold any text: a dataset path
with a backtick (``my`data.jsonl``, legal in a file name) ended the one-backtick span early
and the rest of the command, ``|`` and ``*`` included, read as markdown."""

from __future__ import annotations

import re

import pytest

from fedhh.experiments.report import _header, code_span


def _content(span: str) -> str:
    """The text of a code span (CommonMark 6.1): between fences of equal length, one space
    stripped from each side when both sides have one."""
    match = re.fullmatch(r"(`+)(.*?)\1", span, flags=re.S)
    assert match is not None and "`" * len(match.group(1)) not in match.group(2).replace(
        "`" * (len(match.group(1)) + 1), ""), span
    inner = match.group(2)
    if len(inner) > 1 and inner.startswith(" ") and inner.endswith(" ") and inner.strip():
        inner = inner[1:-1]
    return inner


@pytest.mark.parametrize("text", [
    "fedhh simulate --dataset 'my`data.jsonl'", "a``b", "`start", "end`", "plain",
    "fedhh simulate --dataset 'a|b*c_.jsonl'", "🇯🇵 `x` ``y``"])
def test_a_code_span_holds_its_text_whole(text: str) -> None:
    span = code_span(text)
    assert _content(span) == text
    fence = re.match("`+", span).group()  # type: ignore[union-attr]
    assert fence not in span[len(fence):-len(fence)]


def test_a_line_break_is_shown_escaped() -> None:
    assert code_span("a\nb") == "`a\\nb`"


def test_the_header_keeps_a_dataset_path_with_a_backtick_in_one_span() -> None:
    path = "/data/my`data.jsonl"
    header = _header({"command": f"fedhh experiments all --dataset '{path}'",
                      "settings": {"dataset": path}}, [])
    assert f"Dataset {code_span(path)}:" in header
    assert "``" in header  # (the fence outlasts the backtick inside)
