"""Which letters of an item that mixes scripts show escaped (fedhh.codec.shown), by Unicode's
data (scripts.txt, Script_Extensions) and UTS #39's rules, where a hand list of seven scripts
decided before: a Latin word with a Georgian, Canadian syllabic or Tifinagh letter that reads as
a Latin one (``ყoutube``, ``ᑭaypal``) showed as it is, and an item of a Greek and a Latin word
(``Ελλάδα Greece``), which nothing could read as another item, showed its Greek word escaped."""

from __future__ import annotations

import random
import re
import unicodedata
from pathlib import Path

import pytest

from fedhh.codec import gen_scripts
from fedhh.codec.shown import _allowed, _lookalikes, _prototypes, _scripts, printable

ESCAPE = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|\\)")


@pytest.mark.parametrize(("item", "shown"), [
    ("\u10e7outube", "\\u10e7outube"),  # Georgian qar, read as y
    ("\u146daypal", "\\u146daypal"),  # Canadian syllabics ki, read as P
    ("g\u2d54\u2d54gle", "g\\u2d54\\u2d54gle"),  # Tifinagh yar, read as o
    ("p\u0430ypal", "p\\u0430ypal"),  # (Cyrillic a: as before)
    ("ab\u0915", "ab\\u0915"),  # Devanagari in a Latin word: not Highly Restrictive
])
def test_a_word_that_mixes_scripts_shows_the_odd_letters_escaped(item: str, shown: str) -> None:
    assert printable(item) == shown


def _lookalikes_of_latin() -> list[str]:
    """Letters of a script other than Latin (assigned in this Python's Unicode) that UTS #39's
    confusables read as one small Latin letter."""
    found = []
    for code, target in _prototypes().items():
        char = chr(code)
        if (len(target) == 1 and "a" <= target <= "z"
                and unicodedata.category(char) in ("Ll", "Lu", "Lo")
                and (scripts := _scripts(char)) and "Latn" not in scripts
                and not unicodedata.decomposition(char)):
            found.append(char)
    return sorted(found)


def test_every_lookalike_of_a_latin_letter_in_a_latin_word_shows_escaped() -> None:
    """Brute force over Unicode's data: each such letter, put for its Latin letter in a word of
    Latin letters, shows an escape (no seven scripts of a hand list: 25 scripts here)."""
    lookalikes = _lookalikes_of_latin()
    assert len({frozenset(_scripts(char)) for char in lookalikes}) > 15
    words = ["paypal", "google", "youtube", "amazon", "microsoft", "facebook"]
    rng = random.Random(55)
    for char in lookalikes:
        target = _prototypes()[ord(char)]
        word = next((w for w in rng.sample(words, len(words)) if target in w),
                    target + "xyzw")
        item = word.replace(target, char, 1)
        assert ESCAPE.search(printable(item)), (item, printable(item))


@pytest.mark.parametrize("item", [
    "\u0395\u03bb\u03bb\u03ac\u03b4\u03b1 Greece",
    "\u03a3\u03c9\u03ba\u03c1\u03ac\u03c4\u03b7\u03c2 Socrates",
    "Greece (\u0395\u03bb\u03bb\u03ac\u03b4\u03b1)", "\u03a3\u03c0\u03ac\u03c1\u03c4\u03b7-Sparta",
    "\u0411\u0435\u043b\u0430\u0440\u0443\u0441\u044c Belarus",
    "\u0394\u03b5\u03bb\u03c6\u03bf\u03af/Delphi",
    "\u041c\u043e\u0441\u043a\u0432\u0430 Moscow", "\u041a\u0438\u0457\u0432 Kyiv",
    "\u039f\u03bb\u03c5\u03bc\u03c0\u03af\u03b1-Olympia",
    "https://ru.wikipedia.org/wiki/\u0420\u043e\u0441\u0441\u0438\u044f",
    "https://ar.wikipedia.org/wiki/\u0645\u0635\u0631", "user@\u043f\u0440\u0438\u043c"
    "\u0435\u0440.\u0440\u0444",
])
def test_words_of_two_scripts_that_read_as_no_other_show_as_they_are(item: str) -> None:
    """Each word is of one script, and the one not ASCII has a letter that reads as no letter
    of the other (``λ``, ``б``; ``к`` reads only as the Latin kra ``ĸ``, ``и`` as a small
    capital: letters whose Identifier_Status is Restricted, that no word is spelt in): the item
    reads as no item of one script.
    An ASCII word is never escaped so (``Moscow``, though ``Мoѕсоw`` could be Cyrillic)."""
    assert printable(item) == item


@pytest.mark.parametrize("item", [
    "Tokyo\u6771\u4eac", "\uff30\uff23\u30b2\u30fc\u30e0", "BTS\ubc29\ud0c4\uc18c\ub144\ub2e8",
    "iPhone\u30b1\u30fc\u30b9", "\u6ce8\u97f3\u3105\u3106abc", "\u05e9\u05dc\u05d5\u05dd abc",
    "iPhone \u0622\u06cc\u0641\u0648\u0646", "\u0905\u092e\u0947\u091c\u093c\u0928 amazon",
])
def test_highly_restrictive_words_and_words_of_scripts_apart_show_as_they_are(item: str) -> None:
    """UTS #39, section 5.2: Latin with Han and kana, with Han and Bopomofo, with Han and
    Hangul in one word; and words of Hebrew, Arabic, Devanagari beside Latin ones."""
    assert printable(item) == item


@pytest.mark.parametrize(("item", "shown"), [
    ("paypal.\u0441\u0441", "paypal.\\u0441\\u0441"),  # Cyrillic cc read as Latin cc
    ("x.\u0391\u0391", "x.\\u0391\\u0391"),  # Greek AA, the item's most, read as Latin AA
    ("A.\u0391\u0391", "A.\\u0391\\u0391"),  # (not the ASCII A, which reads as Greek A)
    ("ab.\u0585\u0585", "ab.\\u0585\\u0585"),  # Armenian oo
    ("\u0441\u043e\u0441\u043e\u0430 cocoa", "\\u0441\\u043e\\u0441\\u043e\\u0430 cocoa"),
    # (letters beyond ASCII that words are spelt in: Identifier_Status Allowed)
    ("fu\u00df.\u03b2\u03b2", "fu\u00df.\\u03b2\\u03b2"),  # Greek, read as Latin sharp s
    ("Baku \u04d8\u04d9", "Baku \\u04d8\\u04d9"),  # Cyrillic, read as Latin schwas
])
def test_a_word_of_one_script_that_reads_as_another_words_script_is_escaped(
        item: str, shown: str) -> None:
    """A whole-script confusable (UTS #39, section 4) within one item: what is left shown as it
    is never reads as letters of one script while it is of two."""
    assert printable(item) == shown


def test_scripts_txt_is_what_gen_scripts_writes() -> None:
    """The shipped table is the generator's, from the Unicode version its header names
    (fontTools' tables, where they are of that version)."""
    fonttools = pytest.importorskip("fontTools.unicodedata")
    shipped = Path(gen_scripts.OUT).read_text(encoding="utf-8")
    values, version = gen_scripts.from_fonttools()
    if f"version {version};" not in shipped.splitlines()[0]:
        pytest.skip(f"fontTools {fonttools.__name__} holds Unicode {version}")
    assert gen_scripts.table(values, gen_scripts.scripts_header(version)) == shipped


def test_gen_scripts_reads_unicode_files() -> None:
    scripts = ("# Scripts-18.0.0.txt\n0041..005A    ; Latin # L&  [26] A..Z\n"
               "0370..0373    ; Greek # L&   [4]\n00B7 ; Common # Po MIDDLE DOT\n")
    extensions = "00B7          ; Grek Latn # Po       MIDDLE DOT\n"
    aliases = "sc ; Grek ; Greek\nsc ; Latn ; Latin\nsc ; Zyyy ; Common\n"
    values, version = gen_scripts.from_unicode_files(scripts, extensions, aliases)
    assert version == "18.0.0"
    lines = gen_scripts.table(values, gen_scripts.scripts_header(version)).splitlines()
    assert [line for line in lines if not line.startswith("#")] == [
        "0041..005A;Latn", "00B7;Grek Latn", "0370..0373;Grek"]


def test_only_letters_words_are_spelt_in_make_lookalikes() -> None:
    """UTS #39's Identifier_Status (identifiers.txt): a prototype letter that is Restricted
    (technical ``ɸ`` ``ʙ`` ``ɾ``, obsolete ``ĸ`` ``Ϙ``, uncommon, excluded) is no script's
    lookalike; an Allowed one beyond ASCII is (``ß``, ``Ə``, ``ɔ``), where a hand rule had
    dropped every Latin letter beyond ASCII."""
    assert not any(map(_allowed, "\u0278\u0299\u027e\u0138\u03d8\u0460\u1401"))
    assert all(map(_allowed, "aß\u018f\u0254\u03b2\u0430\u0585\u4e00"))
    assert all(map(_allowed, _lookalikes()))
    assert {"Grek", "Latn"} <= _lookalikes()["\u00df"]


def test_gen_scripts_reads_identifier_status() -> None:
    status = ("# Version: 17.0.0\n# @missing: 0000..10FFFF; Restricted\n"
              "0027          ; Allowed    # 1.1        APOSTROPHE\n"
              "0041..005A    ; Allowed    # 1.1   [26] A..Z\n"
              "0061..007A    ; Allowed    # 1.1   [26] a..z\n")
    values, version = gen_scripts.allowed_from_status_file(status)
    assert version == "17.0.0"
    lines = gen_scripts.table(values, gen_scripts.status_header(version)).splitlines()
    assert [line for line in lines if not line.startswith("#")] == [
        "0027;Allowed", "0041..005A;Allowed", "0061..007A;Allowed"]
    assert "Unicode License v3" in "\n".join(lines)
    with pytest.raises(SystemExit, match="IdentifierStatus"):
        gen_scripts.allowed_from_status_file("0041 ; Allowed\n")


def test_identifiers_txt_is_identifier_status() -> None:
    """The shipped table names its version and its license, and holds the Allowed set's
    landmarks: ASCII letters and digits, Latin, Greek, Cyrillic, CJK; not controls."""
    head = Path(gen_scripts.IDENTIFIERS).read_text(encoding="utf-8").splitlines()[:5]
    assert "IdentifierStatus.txt (UTS #39, version" in head[0]
    assert any("Unicode License v3" in line for line in head)
    assert all(map(_allowed, "09AZaz\u00e9\u03b1\u0436\u4e00"))
    assert not any(map(_allowed, "\x00 !\u200b"))


@pytest.mark.parametrize(("item", "shown"), [
    ("p\u0251ypal", "p\\u0251ypal"),  # Latin alpha, a technical letter: reads as paypal
    ("\u0261oogle", "\\u0261oogle"),  # script g
    ("\ua7b5eta", "\\ua7b5eta"),  # Latin beta
    # Romanian's T with a cedilla, the spelling of code pages without its comma-below letters:
    # Restricted (Romanian's own letters, U+021A/U+021B, are Allowed), and read as them
    ("\u0162ara", "\\u0162ara"),
    ("\u0163ar\u0103", "\\u0163ar\u0103"),
])
def test_a_restricted_letter_among_allowed_ones_of_its_script_is_escaped(
        item: str, shown: str) -> None:
    """UTS #39, section 5.2: a word at any level but Unrestricted holds Allowed characters
    (Identifier_Status) alone; these are of one script, and read as an ASCII word."""
    assert printable(item) == shown


@pytest.mark.parametrize("item", [
    "\u13e3\u13b3\u13a9",  # Cherokee, a Limited_Use script: Restricted letters alone
    "\uc548\ub155\u314b\u314b",  # Hangul compatibility letters (Restricted as not NFKC)
    "\U00020bb7\u91ce\u5bb6",  # an uncommon ideograph that reads as no other
    "\u0259\u0254\u025b",  # Latin letters beyond ASCII that are Allowed
    "\u021aar\u0103",  # Romanian's Allowed T with a comma below
    "\u015ecoal\u0103",  # S with a cedilla: Allowed, as Turkish writes it
])
def test_restricted_letters_that_spoof_nothing_show_as_they_are(item: str) -> None:
    assert printable(item) == item
