"""``fedhh simulate --json FILE`` writes items as they are (UTF-8), but every character a
terminal acts on as its JSON escape: the C1 controls (CSI, U+009B, is ESC's 8-bit form), the
bidi overrides and isolates, U+2028/U+2029. So ``cat results.json`` sends the terminal no
control, while the JSON values, items among them, read back exact (before, an item's U+009B
and U+202E were written raw; ESC never was, JSON escapes the C0 controls)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedhh.cli.main import main
from fedhh.cli.simulate import terminal_safe_json

ACTED_ON = ["a\x9b31mb", "\u202eevil", "x\u2066y\u2069", "\x85", "\u2028"]
KEPT = ["caf\u00e9", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\u05e9\u05dc\u05d5\u05dd",
        "\u00a0", "a\u200bb", "\x1b[31m"]


def test_acted_on_characters_are_escaped_and_read_back(tmp_path: Path) -> None:
    text = terminal_safe_json(json.dumps({"items": ACTED_ON + KEPT}, ensure_ascii=False))
    assert json.loads(text) == {"items": ACTED_ON + KEPT}
    assert not any(char in text for item in ACTED_ON for char in item if not char.isascii())
    for item in KEPT[:4]:  # (emoji sequences, letters and spaces as they are)
        assert json.dumps(item, ensure_ascii=False) in text


def test_simulate_json_file_holds_no_raw_control(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:
    # (the deny list is written to the JSON as given: a cheap way to put items in it)
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "users.jsonl"
    data.write_text('["a", "b"]\n["a"]\n["b"]\n', encoding="utf-8")
    deny = tmp_path / "deny.json"
    deny.write_text(json.dumps(["a\x9b31mb", "\u202eevil", "caf\u00e9"]), encoding="utf-8")
    out = tmp_path / "out.json"
    assert main(["simulate", "--dataset", str(data), "--deny-list", str(deny), "--rounds", "4",
                 "--completion-rounds", "0", "--eps-agg", "8", "--quiet", "--json",
                 str(out)]) == 0
    raw = out.read_text(encoding="utf-8")
    assert "\x9b" not in raw and "\u202e" not in raw and "caf\u00e9" in raw
    assert json.loads(raw)["deny_list"] == ["a\x9b31mb", "\u202eevil", "caf\u00e9"]
