"""A list's rows (``printable_rows``) read apart where an item writes an escape with a
character that draws as the backslash: the reverse solidus operator, the big and the small
reverse solidus and the set minus (``⧵x1b``), or the OCR double backslash for the doubled one
(``a⑊b``). Every escape begins with the backslash, and an item's own backslash is shown
doubled, so that an escape reads one way; before, ``⧵x1b`` beside the item ESC (shown
``\\x1b``) and ``a⑊b`` beside ``a\\b`` (shown ``a\\\\b``) were rows that read alike."""

from __future__ import annotations

import pytest

from fedhh.codec.shown import printable, printable_rows


@pytest.mark.parametrize("lookalike", ["\u29f5", "\u29f9", "\ufe68", "\u2216"])
def test_a_backslash_lookalike_before_an_escapes_text_is_escaped_beside_it(
        lookalike: str) -> None:
    spoof = f"{lookalike}x1b"
    assert printable_rows([("\x1b", False), (spoof, False)]) == [
        "\\x1b", f"\\u{ord(lookalike):04x}x1b"]
    assert printable_rows([("a\\b", False), (f"a{lookalike}{lookalike}b", False)]) == [
        "a\\\\b", f"a\\u{ord(lookalike):04x}\\u{ord(lookalike):04x}b"]


def test_the_ocr_double_backslash_is_escaped_beside_a_doubled_one() -> None:
    assert printable_rows([("a\\b", False), ("a\u244ab", False)]) == ["a\\\\b", "a\\u244ab"]


def test_alone_they_show_as_they_are() -> None:
    """As ``сосоа`` does in a list without ``cocoa``: math's set minus is an item's own."""
    for item in ("A\u2216B", "\u29f5x1b", "a\u244ab"):
        assert printable_rows([(item, False)]) == [printable(item)] == [item]
