"""Items on the console: what could drive the terminal or hide is escaped, what makes up a
script or an emoji sequence is not (fedhh.codec.shown)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.cli.main import main
from fedhh.codec.codec import Decoded
from fedhh.codec.shown import columns, ljust, printable, rjust


@pytest.mark.parametrize(
    ("item", "shown"),
    [
        ("esc\x1b[31mred", "esc\\x1b[31mred"),  # would turn the terminal red
        ("nul\x00byte", "nul\\x00byte"),  # would read "nulbyte"
        ("tab\there", "tab\\x09here"),
        ("line\u2028break", "line\\u2028break"),
        ("abc\u202edef", "abc\\u202edef"),  # would reverse the rest of the line
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("\ufeffmark", "\\ufeffmark"),
        ("c1\x9bcontrol", "c1\\x9bcontrol"),
        # marks or joiners alone take no room: an empty cell, or one joined to the cell before
        ("\u0652", "\\u0652"), ("\u200d", "\\u200d"), ("\ufe0f\u0301", "\\ufe0f\\u0301"),
        ("\u0943taebno", "\\u0943taebno"),  # a mark that begins an item draws on what is before
        # drawn as nothing or a box (before: "pua", "abc", "" beside the real "pua", "abc")
        ("\ue000pua", "\\ue000pua"), ("abc\U000e0061", "abc\\U000e0061"),
        ("x\U000e007fy", "x\\U000e007fy"), ("\uffff", "\\uffff"), ("a\ufdd0", "a\\ufdd0"),
        # not in NFC: what NFC would change (before: two rows that both read café / 한국)
        ("cafe\u0301", "cafe\\u0301"), ("\u2126", "\\u2126"),
        ("\u1112\u1161\u11ab", "\\u1112\\u1161\\u11ab"),
        # only the runs NFC changes: the Hebrew points beside the accent are NFC's own
        ("cafe\u0301 \u05e9\u05b8\u05c1", "cafe\\u0301 \u05e9\u05b8\u05c1"),
        # a language tag; tags after a black flag that are no flag fonts draw (before: both
        # shown as the black flag alone)
        ("a\U000e0001b", "a\\U000e0001b"),
        ("\U0001f3f4\U000e0065\U000e0076\U000e0069\U000e006c\U000e007f",
         "\U0001f3f4\\U000e0065\\U000e0076\\U000e0069\\U000e006c\\U000e007f"),
        # a backslash is doubled: an item of the four characters \x1b is not one holding ESC
        ("a\\x1b[31m", "a\\\\x1b[31m"), ("cafe\\u0301", "cafe\\\\u0301"), ("C:\\", "C:\\\\"),
        # joiners and selectors that join nothing (before: all read "ab")
        ("a\u200cb", "a\\u200cb"), ("a\u200db", "a\\u200db"), ("a\ufe0fb", "a\\ufe0fb"),
        ("a\u034fb", "a\\u034fb"), ("a\u3164b", "a\\u3164b"), ("x\u180by", "x\\u180by"),
        ("e\U000e0100", "e\\U000e0100"), ("1\ufe0f", "1\\ufe0f"),
        # the text and emoji selectors after a letter with no emoji form (before: read 東, ש)
        ("\u6771\ufe0f", "\u6771\\ufe0f"), ("\u05e9\ufe0e", "\u05e9\\ufe0e"),
        ("\u0915\ufe0f", "\u0915\\ufe0f"),
        # VS16 after an emoji drawn as one without it (before: read as the bare emoji)
        ("\U0001f44d\ufe0f", "\U0001f44d\\ufe0f"), ("\u231a\ufe0f", "\u231a\\ufe0f"),
        # format characters away from their script's letters (before: read ab)
        ("a\U00013430b", "a\\U00013430b"), ("\U00013000\U00013430", "\U00013000\\U00013430"),
        ("a\u070fb", "a\\u070fb"), ("\u0710\u070f", "\u0710\\u070f"),
        # the Khitan small script filler, a mark that draws nothing (before: read ab, a)
        ("a\U00016fe4b", "a\\U00016fe4b"), ("a\U00016fe4", "a\\U00016fe4"),
        ("\U00016fe4\U00018b00", "\\U00016fe4\U00018b00"),
        # ... nor at an end, nor twice: "👨" and "👨\u200d" read alike
        ("\U0001f468\u200d", "\U0001f468\\u200d"), ("\u200d\U0001f468", "\\u200d\U0001f468"),
        # (both: the first joins nothing it draws beside, test_shown_joiners.py)
        ("\U0001f468\u200d\u200d\U0001f469", "\U0001f468\\u200d\\u200d\U0001f469"),
    ],
)
def test_what_drives_or_hides_is_escaped(item: str, shown: str) -> None:
    assert printable(item) == shown


@pytest.mark.parametrize("item", [
    "plain", "naïve", "Москва", "こんにちは", "नमस्ते", "می‌خواهم",  # ZWNJ in Persian
    "👨\u200d👩\u200d👧\u200d👦", "❤️", "1️⃣", "👍🏽",
    "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # a subdivision flag
    "New York", "https://example.com/a?b=c",  # (New\u00a0York: tests/unit/test_shown_spaces.py)
    "\U0001f3f3\ufe0f\u200d\U0001f308", "\U0001f469\U0001f3fd\u200d\U0001f4bb", "#\ufe0f\u20e3",
    "\u203c\ufe0f", "\u2139\ufe0f", "\u0915\u094d\u200d\u0937", "\u1820\u180b\u1821",
    "\u845b\U000e0100", "\U00013000\U00013430\U00013001", "\u070f\u0710\u0712",
    "\U00018b00\U00016fe4\U00018b01",  # the Khitan filler in its cluster
    "\u303d\ufe0f", "\U0001f237\ufe0f", "\U0001f43b\u200d\u2744\ufe0f",  # (text by default)
    "café", "한국", "Ω", "שָׁלוֹם", "ﬁ",  # in NFC, as items usually are
])
def test_scripts_and_emoji_are_shown_as_they_are(item: str) -> None:
    assert printable(item) == item


def test_a_cut_prefix_keeps_its_escapes_and_escapes_the_rest() -> None:
    """A cut prefix is written with its backslashes doubled and its partial bytes as \\xNN
    (Decoded.shown_cut): printable leaves those as they are, and escapes what hides."""
    shown = printable("a\\\\x1b\u200b\\xf0\\x9f\u2026", cut=True)
    assert shown == "a\\\\x1b\\u200b\\xf0\\x9f\u2026"
    literal = Decoded("a\\xf0", ended=False, possible=True, trailing_bits=0)
    partial = Decoded("a", ended=False, possible=True, trailing_bits=4, partial=b"\xf0")
    assert printable(literal.shown_cut, cut=True) == "a\\\\xf0\u2026"
    assert printable(partial.shown_cut, cut=True) == "a\\xf0\u2026"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=12), st.text(max_size=12))
def test_two_items_never_show_alike(one: str, other: str) -> None:
    """Every escape reads back one way, so the shown forms of different items differ."""
    if one != other:
        assert printable(one) != printable(other)


def test_data_inspect_escapes_items(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "users.txt"
    source.write_text("evil\x1b]0;owned\x07 fine\nfine\n", encoding="utf-8")
    assert main(["data", "inspect", str(source)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "evil\\x1b]0;owned\\x07" in out


@pytest.mark.parametrize(("item", "width"), [
    ("hello", 5), ("東京", 4), ("안녕하세요", 10), ("e\u0301", 1), ("naïve", 5),
    ("Москва", 6), ("नमस्ते", 4),
    # emoji sequences are one emoji's two columns (UTS #51; before: 1, 4, 3, 8)
    ("❤️", 2), ("👍🏽", 2), ("🏳️\u200d🌈", 2), ("👨\u200d👩\u200d👧\u200d👦", 2), ("1️⃣", 2),
    ("🇩🇪", 2), ("😂😂", 4),
    # a text-default symbol joined to an emoji, with its VS16 (before: 4 each)
    ("🤷\u200d♀️", 2), ("🏳️\u200d⚧️", 2), ("😶\u200d🌫️", 2), ("🐻\u200d❄️", 2),
    ("👁️\u200d🗨️", 2),
    ("क्\u200dष", 2),  # a joiner between letters joins no columns
])
def test_columns_count_the_room_a_terminal_gives(item: str, width: int) -> None:
    assert columns(item) == width
    assert columns(ljust(item, 12)) == columns(rjust(item, 12)) == 12


def test_the_simulate_table_lines_up_wide_items(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `東京` padded to as many characters as `hello`, two columns too wide."""
    from fedhh.cli.simulate import _table

    _table([("rank", "item"), (1, "hello"), (2, "東京"), (3, "안녕하세요")])
    lines = capsys.readouterr().out.splitlines()
    assert len({columns(line) for line in lines}) == 1


def test_data_inspect_widens_its_item_column_for_long_items(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the column stayed 24 wide and a long URL pushed its row's figures out of line."""
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    url = "https://www.example.com/" + "a/" * 40
    source = tmp_path / "users.txt"
    source.write_text(f"{url} x\nshort x\n東京 x\n", encoding="utf-8")
    assert main(["data", "inspect", str(source)]) == 0
    rows = capsys.readouterr().out.splitlines()
    table = rows[next(i for i, row in enumerate(rows) if "weighted" in row and "rank" in row):]
    assert len({columns(row) for row in table}) == 1, table  # every row as wide
