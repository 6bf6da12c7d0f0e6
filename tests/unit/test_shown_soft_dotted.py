"""The combining dot above (U+0307) on i, j or another soft-dotted letter, or on the dotless ı,
is escaped where it draws as the letter's own dot: ``"İstanbul".lower()`` (what ``--lowercase``
makes of the Turkish capital) is ``i\\u0307stanbul``, which read ``istanbul``, so that the
two were rows that read alike in the consoles and on the dashboard. A dot that an accent above
follows is kept (Lithuanian ``i̇́``: there it stays visible), and so is a dot on any other
letter (where NFC would compose it, it is escaped as before)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.codec.shown import printable, printable_rows
from fedhh.data.dataset import load_dataset
from fedhh.data.text import import_text


@pytest.mark.parametrize(("item", "shown"), [
    ("i\u0307stanbul", "i\\u0307stanbul"), ("j\u0307", "j\\u0307"),
    ("\u0131\u0307", "\u0131\\u0307"),  # (the dotless ı and a dot: read i)
    ("\u0456\u0307", "\u0456\\u0307"),  # Cyrillic і
    ("\U0001d422\u0307", "\U0001d422\\u0307"),  # mathematical bold i
    ("i\u0316\u0307", "i\u0316\\u0307"),  # (a mark below between them: the dot still replaces)
])
def test_a_dot_above_that_draws_as_the_letters_own_is_escaped(item: str, shown: str) -> None:
    assert printable(item) == shown


@pytest.mark.parametrize("item", ["i\u0307\u0301", "\u0227", "q\u0307", "\u0130stanbul"])
def test_a_dot_that_shows_is_kept(item: str) -> None:
    assert printable(item) == item


def test_lowered_turkish_reads_apart_from_the_plain_word(tmp_path: Path) -> None:
    source = tmp_path / "users.txt"
    source.write_text("İstanbul\nistanbul\n", encoding="utf-8")
    vocabulary = load_dataset(import_text(source, tmp_path / "ds", lowercase=True)).vocabulary
    assert vocabulary == ("istanbul", "i\u0307stanbul")
    assert printable_rows([(item, False) for item in vocabulary]) == [
        "istanbul", "i\\u0307stanbul"]
