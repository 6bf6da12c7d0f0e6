"""Hebrew and Arabic items on the console keep their rows' columns in order: a terminal that
lays out bidirectional text (the Unicode Bidirectional Algorithm) took the numbers after a
right-to-left item into its direction and showed ``שלום  2,666  53  4`` as
``4  53  2,666  םולש`` (fedhh.codec.shown.isolated)."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import re
from pathlib import Path

import numpy as np
import pytest
from cli_kit import run_cli

from fedhh.codec.shown import columns, isolated, ljust, printable, rjust

LRM = "\u200e"
HEBREW, ARABIC = "שלום", "مرحبا"
RTL_ITEMS = [HEBREW, ARABIC, "https://example.com/مرحبا", "שלום!", "\u05e9\u05b8\u05c1"]
NUMBERS = re.compile(r"[0-9][0-9,.]*")


@pytest.mark.parametrize("item", RTL_ITEMS)
def test_a_right_to_left_cell_is_between_marks(item: str) -> None:
    assert isolated(item) == f"{LRM}{item}{LRM}"
    assert ljust(item, 30) == f"{LRM}{item}{LRM}" + " " * (30 - columns(item))
    assert rjust(item, 30) == " " * (30 - columns(item)) + f"{LRM}{item}{LRM}"
    assert columns(rjust(item, 30)) == 30


@pytest.mark.parametrize("item", ["plain", "東京", "👍🏽", "नमस्ते", "١٢٣", "abc\\u202edef"])
def test_other_cells_are_as_they_were(item: str) -> None:
    # (Arabic-Indic digits alone are numbers, not right-to-left letters: nothing after them
    # changes direction)
    assert isolated(item) == item
    assert rjust(item, 12) == " " * (12 - columns(item)) + item


def test_an_escaped_override_is_not_a_right_to_left_letter() -> None:
    assert isolated(printable("abc\u202edef")) == "abc\\u202edef"


def _bidi() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("fribidi")
    try:
        return ctypes.CDLL(name or "libfribidi.so.0")
    except OSError:
        return None


def _visual(lib: ctypes.CDLL, line: str, base: int) -> str:
    """``line`` in the order a bidirectional terminal draws it (fribidi_log2vis)."""
    size = len(line)
    logical = (ctypes.c_uint32 * size)(*map(ord, line))
    visual = (ctypes.c_uint32 * size)()
    direction = ctypes.c_uint32(base)
    lib.fribidi_log2vis(logical, size, ctypes.byref(direction), visual, None, None, None)
    return "".join(map(chr, visual))


def _population(tmp_path: Path) -> Path:
    rng = np.random.default_rng(5)
    words = [HEBREW, ARABIC, "https://example.com/مرحبا", "plain"]
    lines = [" ".join(rng.choice(words, size=2, replace=False)) for _ in range(3000)]
    data = tmp_path / "users.txt"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return data


def test_simulate_and_inspect_rows_keep_their_columns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row that shows a right-to-left item has it between marks, and, where this
    machine has fribidi (the UBA of VTE and others), draws its numbers in their order with
    the paragraph's direction left to right or found from the line (P2)."""
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    data = _population(tmp_path)
    out_json = tmp_path / "r.json"
    code, stdout, _ = run_cli(["simulate", "--dataset", str(data), "--eps-local", "8",
                               "--dim-limit", "1e6", "--seed", "3", "--json", str(out_json)],
                              capsys)
    assert code == 0
    found = {h["item"]: h for h in json.loads(out_json.read_text())["heavy_hitters"]}
    assert {HEBREW, ARABIC, "https://example.com/مرحبا"} <= set(found)
    shown = [line for line in stdout.splitlines() if any(item in line for item in RTL_ITEMS)]
    code, inspected, _ = run_cli(["data", "inspect", str(data)], capsys)
    assert code == 0
    listed = [line for line in inspected.splitlines() if any(i in line for i in RTL_ITEMS)]
    assert len(shown) == len(listed) == 3, stdout + inspected
    rows = shown + listed
    for row in rows:
        item = next(i for i in sorted(RTL_ITEMS, key=len, reverse=True) if i in row)
        assert f"{LRM}{item}{LRM}" in row
        if row in shown:  # (simulate's row: #, item, estimate, std, round)
            hitter = found[item]
            assert NUMBERS.findall(row.split(item)[1]) == [
                f"{hitter['estimate']:,.0f}", f"{hitter['std']:,.0f}", str(hitter["round"])]
    lib = _bidi()
    if lib is None:
        pytest.skip("no fribidi on this machine to lay the rows out with")
    for row in rows:
        numbers = NUMBERS.findall(row.replace("https://example.com/", ""))
        for base in (0x110, 0x40):  # FRIBIDI_PAR_LTR, FRIBIDI_PAR_ON (found from the text)
            drawn = _visual(lib, row, base).replace("https://example.com/", "")
            assert NUMBERS.findall(drawn) == numbers, (row, drawn)
