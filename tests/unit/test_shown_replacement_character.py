"""U+FFFD, the replacement character, is shown escaped (``caf\\ufffd``). In an item it is the
mark of text a decoder lost before the item was counted, and terminals, browsers and sheets
draw the same glyph for bytes they cannot read themselves: shown raw, ``caf�`` did not say
whether the item holds it or the viewer failed. Before, it was shown as it is."""

from __future__ import annotations

from fedhh.codec.shown import printable, printable_rows


def test_the_replacement_character_is_escaped() -> None:
    assert printable("caf\ufffd") == "caf\\ufffd"
    assert printable("\ufffd") == "\\ufffd"
    assert printable("\ufffd\ufffd x") == "\\ufffd\\ufffd x"
    assert printable_rows([("caf\ufffd", False), ("café", False)]) == ["caf\\ufffd", "café"]
    # (a cut prefix's text: its \xNN escapes are the bytes of a character it stops inside)
    assert printable("caf\ufffd\\xe2\u2026", cut=True) == "caf\\ufffd\\xe2\u2026"


def test_a_selector_after_it_acts_on_nothing_drawn() -> None:
    # (kept raw, VS16 would follow the escape's last letter: the item read as caf\ufffd)
    assert printable("caf\ufffd\ufe0f") == "caf\\ufffd\\ufe0f"
