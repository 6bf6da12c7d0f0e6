"""The experiment reports point a reader at what they can open (the docs), not at the numbers
of the project's tracker issues they were built under. Before, the utility report's title read
"utility levers beyond the paper's algorithm (issue 15)" and its studies' *Paper:* lines "Not
in the paper: issue 15" (study 9: "issue 13", study 11: "issue 12", study 23: "issue 27"), in
the generator and in the committed reports."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fedhh.experiments.report import _header
from fedhh.experiments.studies import STUDIES, Study

ISSUE = re.compile(r"\bissue \d+", re.IGNORECASE)
DOCS = Path(__file__).resolve().parents[3] / "docs"


@pytest.mark.parametrize("study", STUDIES, ids=lambda s: s.name)
def test_no_study_names_a_tracker_issue(study: Study) -> None:
    for text in (study.title, study.description, study.paper):
        assert not ISSUE.search(text), text


@pytest.mark.parametrize("utility", [False, True])
def test_no_report_title_names_a_tracker_issue(utility: bool) -> None:
    title = _header({"command": "fedhh experiments all"}, [], utility=utility).splitlines()[0]
    assert title.startswith("# Experiments: ") and not ISSUE.search(title), title


@pytest.mark.parametrize("report", ["experiments/README.md", "utility/README.md"])
def test_the_committed_reports_name_no_tracker_issue(report: str) -> None:
    text = (DOCS / report).read_text(encoding="utf-8")
    assert [line for line in text.splitlines() if ISSUE.search(line)] == []
