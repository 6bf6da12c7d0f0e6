"""`fedhh simulate --eps-local`: completion rounds dropped because a round's own local epsilon,
eps_local + ln(its weight), would not be positive at the eps_local given say so, and what
fits more (a larger --eps-local or --completion-weight). A given eps_local is not solved for
the devices: before, the privacy line said the rounds "cannot be budgeted among 400 devices"
and the note advised a larger --eps-agg or more devices, neither of which changes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedhh.cli.main import main

LONG = "https://example.com/" + "abcdefghij" * 4  # past the main rounds' 60 bits


@pytest.mark.parametrize(("eps_local", "kept", "said"), [
    ("1", "0 of 32", "cannot run at --eps-local 1: the first would run at 1 + ln 0.2 <= 0"),
    ("3", "3 of 32", "cannot run at --eps-local 3: the next would run at 3 + ln 0.0125 <= 0"),
])
def test_rounds_dropped_at_a_given_eps_local_say_it_is_the_cause(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, eps_local: str, kept: str,
        said: str) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    users = tmp_path / "users.jsonl"
    users.write_text("".join(json.dumps([LONG, "alice@example.com"] if u % 2 else [LONG])
                             + "\n" for u in range(400)), encoding="utf-8")
    out = tmp_path / "r.json"
    assert main(["simulate", "--dataset", str(users), "--eps-local", eps_local, "--seed", "1",
                 "--quiet", "--json", str(out)]) == 0
    payload = json.loads(out.read_text(encoding="utf-8"))
    dropped = str(payload["privacy"]["completion_rounds"])
    assert dropped.startswith(f"{kept}: ") and said in dropped, dropped
    assert "devices" not in dropped and "--completion-weight" in dropped
    note = payload["completion_note"]
    if kept.startswith("0 of"):  # (the list's cut prefix ran out of rounds: the note names why)
        assert "--eps-local sets eps_local" in note and "--eps-agg" not in note, note


def test_a_cut_items_note_names_eps_local_as_what_dropped_the_completion_rounds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """The note under a list with an item cut at the codes said the completion rounds 'could
    not be budgeted among so few devices' and advised more devices or a larger --eps-agg."""
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    users = tmp_path / "users.jsonl"
    users.write_text("".join(json.dumps([LONG]) + "\n" for _ in range(400)), encoding="utf-8")
    assert main(["simulate", "--dataset", str(users), "--eps-local", "1", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert ("completion rounds, which complete long items, cannot run at --eps-local 1 (the "
            "privacy line): a larger --eps-local or --completion-weight fits them; --max-bits "
            "widens the codes") in out, out
    assert "so few devices" not in out and "more devices" not in out, out
