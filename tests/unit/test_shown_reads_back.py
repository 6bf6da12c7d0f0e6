"""What the consoles and the dashboard show of an item reads back to the item, over the
characters the display rules of the fifty-third stop turn on (VS15/VS16 after symbols,
stacked marks, a dot above on soft-dotted letters, marks after escapes, lookalike letters),
so that two different items never show alike; and the words of scripts written with marks
show as they are."""

from __future__ import annotations

import random
import re
import unicodedata

import pytest

from fedhh.codec.shown import printable, printable_rows

NASTY = ("ai\u0131\\ x1u0e\u00e9\u0307\u0301\u0308\u0300\u0316\ufe0e\ufe0f\ufe00\U000e0100"
         "\u263a\u2192\u2139\U0001f44d\u200d\u200c\u200b\x1b\u20e3\u0435\u0430\u27e8\u2026"
         "\u202e\u2068\u00a0\u0e01\u0e34\u0e49\u0915\u094d\u0d23\u0d4d\U0001f3f4\U000e0067"
         "\U000e007f\u1100\u1161\ufffd\u0130\u05e9\u05bc\u05c1\u3099\u304b")
_ESCAPE = re.compile(r"\\\\|\\x([0-9a-f]{2})|\\u([0-9a-f]{4})|\\U([0-9a-f]{8})")


def _read_back(shown: str) -> str:
    return _ESCAPE.sub(lambda m: "\\" if m.group(0) == "\\\\" else chr(int(
        m.group(1) or m.group(2) or m.group(3), 16)), shown)


def _items(rng: random.Random, count: int, longest: int) -> list[str]:
    return ["".join(rng.choice(NASTY) for _ in range(rng.randint(1, longest)))
            for _ in range(count)]


def test_every_item_shown_reads_back_to_itself() -> None:
    """20,000 seeded items of 1 to 5 characters: each escape reads back one way, a backslash
    of the item's own is the one shown doubled, so no two items show alike."""
    for item in _items(random.Random(53), 20_000, 5):
        assert _read_back(printable(item)) == item, ascii(item)


def test_a_lists_rows_read_back_to_their_items() -> None:
    """Rows read against each other (lookalike letters escaped) still read back."""
    rng = random.Random(54)
    for _ in range(2_000):
        rows = _items(rng, 4, 4)
        shown = printable_rows([(row, False) for row in rows])
        assert [_read_back(text) for text in shown] == rows, ascii(rows)


@pytest.mark.parametrize("word", [
    "Tiếng", "Việt", "người", "đường", "ưỡn",  # Vietnamese, stacked diacritics
    "Ẹ̀kọ́", "Yorùbá", "ọ̀rọ̀", "ẹ́",  # Yoruba: a dot below and a tone mark
    "שָׁלוֹם", "בְּרֵאשִׁ֖ית", "אֱלֹהִ֑ים",  # Hebrew: niqqud, a cantillation mark
    "नमस्ते", "क्षत्रिय", "श्रृंखला", "अ॒ग्निमी॑ळे",  # Devanagari, Vedic accents
    "น้ำ", "ก๊ก", "ผู้ใหญ่", "กี้",  # Thai tone marks
    "똠방각하", "안녕하세요",  # Korean
    "がぎぐ", "パピプ", "か゚", "葛󠄀城",  # Japanese: dakuten, a semi-voiced kana, an ideograph variant
    "молоко́", "ą́ą́", "i̇́", "ཧཱུྃ", "ᾠδή", "ŋ̊",  # a stress mark, Navajo, Lithuanian, Tibetan
])
def test_words_written_with_marks_show_as_they_are(word: str) -> None:
    word = unicodedata.normalize("NFC", word)  # (as items usually are)
    assert printable(word) == word
    assert printable_rows([(word, False)]) == [word]
