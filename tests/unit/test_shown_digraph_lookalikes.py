"""A list's rows (``printable_rows``) read apart where one item is a digraph letter with a caron
(``Ǆ``, U+01C4) and another the two letters it reads as (``DŽ``, D and U+017D). Unicode's
confusables map ``Ǆ`` to ``D`` and the precomposed ``Ž``, whose NFD caron itself reads as a
breve: one pass of the mapping read the two items differently, so the list showed them alike
(``Ǆ`` and ``DŽ``) while ``Ǳ`` beside ``DZ`` was escaped. The reading is now mapped until it
settles; the same held for 12 other characters of confusables.txt (Arabic presentation forms
among them), and for each the list tells its pair apart."""

from __future__ import annotations

import pytest

from fedhh.codec.shown import _prototypes, printable, printable_rows

PAIRS = [("\u01c4", "D\u017d"), ("\u01c5", "D\u017e"), ("\u01c6", "d\u017e")]


@pytest.mark.parametrize(("digraph", "letters"), PAIRS)
def test_a_digraph_with_a_caron_reads_apart_from_its_letters(digraph: str,
                                                             letters: str) -> None:
    assert printable_rows([(digraph, False), (letters, False)]) == [
        f"\\u{ord(digraph):04x}", f"{letters[0]}\\u{ord(letters[1]):04x}"]


def test_as_the_digraph_without_a_caron_does() -> None:
    assert printable_rows([("\u01f1", False), ("DZ", False)]) == ["\\u01f1", "DZ"]


@pytest.mark.parametrize("char", "\u048b\u321d\ufba4\ufba5\ufbb0\ufbb1\ufe81\ufe82\ufef5\ufef6")
def test_every_character_whose_prototype_reads_on_reads_apart_from_it(char: str) -> None:
    """The others of confusables.txt that one pass read unlike their own prototype (``ҋ``
    beside ``й̦``, ``㈝`` beside ``(오전)``, Arabic presentation forms beside their letters)."""
    prototype = _prototypes()[ord(char)]
    shown = printable_rows([(char, False), (prototype, False)])
    assert shown != [printable(char), printable(prototype)]


def test_alone_each_shows_as_it_is() -> None:
    for item in ("\u01c4", "D\u017d"):
        assert printable_rows([(item, False)]) == [printable(item)]
