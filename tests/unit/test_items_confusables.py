"""Rows of a list that read alike by Unicode's confusables (UTS #39), not only by a hand list.

``printable_rows`` told rows apart by what a hand list said a character reads as, so rows whose
lookalike it missed still read alike: ``http://a.com╱x`` (a box-drawing diagonal) beside
``http://a.com/x``, and the katakana ``ノ``, the modifier and Hebrew colons ``˸`` ``׃``, the
Arabic-Indic zero ``٠`` as a full stop, the modifier minus ``˗``. Now a row's reading is its
UTS #39 skeleton, from confusables.txt, and such rows show their lookalikes escaped."""

from __future__ import annotations

import random
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

import fedhh.codec.shown as shown_module
from fedhh.codec.shown import printable_rows

TABLE = Path(shown_module.__file__).with_name("confusables.txt")


def _prototypes() -> dict[str, str]:
    """confusables.txt's mapping, read here apart from the module under test."""
    table = {}
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            source, target = line.split(";")
            table[chr(int(source, 16))] = "".join(chr(int(c, 16)) for c in target.split())
    return table


PROTOTYPES = _prototypes()


def _skeleton(text: str) -> str:
    """UTS #39, section 4: NFD, each character to its prototype, NFD again."""
    mapped = "".join(PROTOTYPES.get(c, c) for c in unicodedata.normalize("NFD", text))
    return unicodedata.normalize("NFD", mapped)


@pytest.mark.parametrize(("lookalike", "plain", "shown"), [
    ("http://a.com\u2571x", "http://a.com/x", "http://a.com\\u2571x"),  # ╱
    ("a\u30ceb", "a/b", "a\\u30ceb"),  # ノ
    ("10\u02f830", "10:30", "10\\u02f830"),  # ˸
    ("10\u05c330", "10:30", "10\\u05c330"),  # ׃
    ("a\u0660com", "a.com", "a\\u0660com"),  # ٠
    ("e\u02d7mail", "e-mail", "e\\u02d7mail"),  # ˗
])
def test_rows_that_read_alike_by_unicodes_confusables_read_apart(
        lookalike: str, plain: str, shown: str) -> None:
    assert printable_rows([(plain, False), (lookalike, False)]) == [plain, shown]
    # alone, as it is
    assert printable_rows([(lookalike, False), ("other", False)]) == [lookalike, "other"]


def test_ascii_stays_raw_and_what_ascii_reads_as_is_escaped() -> None:
    # rn and m, 1 and l read alike, but ASCII is the escapes' own alphabet: nothing to escape
    assert printable_rows([("rn", False), ("m", False), ("1", False), ("l", False)]) == [
        "rn", "m", "1", "l"]
    # % reads as º/₀ (UTS #39): the non-ASCII row shows its lookalikes escaped
    assert printable_rows([("%", False), ("\u00ba/\u2080", False)]) == ["%", "\\xba/\\u2080"]


def test_every_sampled_confusable_pair_reads_apart() -> None:
    """A seeded sample of confusables.txt's pairs, each a row of the character beside one of
    its prototype (between underscores, so that no letter of another script makes the row
    mixed): the two rows, as shown, have different skeletons. Deterministic."""
    rng = random.Random(20261205)
    pairs = [(source, target) for source, target in PROTOTYPES.items()
             if not (source + target).isascii()]
    alike = 0
    for source, target in rng.sample(pairs, 1500):
        rows = [(f"_{source}_", False), (f"_{target}_", False)]
        alike += _skeleton(rows[0][0]) == _skeleton(rows[1][0])
        first, second = printable_rows(rows)
        assert _skeleton(first) != _skeleton(second), (ascii(source), ascii(target))
    assert alike > 1400  # (the sample's rows did read alike as written)


def test_the_table_is_read_when_a_list_is_first_shown_not_at_import() -> None:
    code = ("import fedhh.codec.shown as s; s.printable('\u0441'); "
            "print(s._prototypes.cache_info().currsize); "
            "s.printable_rows([('a', False)]); print(s._prototypes.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["0", "1"]


def test_the_three_mappings_the_table_lacks_are_named_and_shown_escaped_anyway() -> None:
    """The table is written from confusable-homoglyphs' JSON, which lacks three of Unicode's
    mappings (their glyphs lost in the file's comments): its header names them, as the
    generator writes it, and each of the three is shown escaped regardless."""
    from fedhh.codec import gen_confusables

    lacking = {"\u2028": " ", "\u2029": " ", "\u3164": "\u1160"}
    assert not lacking.keys() & PROTOTYPES.keys()
    header = [line for line in TABLE.read_text(encoding="utf-8").splitlines()
              if line.startswith("#")]
    assert header[-1] == ("# Written from a copy that lacks 2028 ; 0020, 2029 ; 0020 and "
                          "3164 ; 1160 (see the generator).")
    assert gen_confusables.table(PROTOTYPES, "15.1.0", gen_confusables.JSON_LACKS) \
        == TABLE.read_text(encoding="utf-8")
    for source in lacking:
        assert shown_module.printable(f"a{source}b") == f"a\\u{ord(source):04x}b"
