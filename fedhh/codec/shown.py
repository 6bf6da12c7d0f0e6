"""Items as people see them: in a terminal, on the dashboard.

Items are any Unicode strings, and the devices' data is not the operator's: an item may hold an
escape sequence (``\\x1b[31m`` turns a terminal red, others retitle the window or move the
cursor), a right-to-left override that reverses the rest of the line, or characters that take no
room (NUL, a zero-width space), so that two different items look alike. The console output
and the dashboard's pages and CSV show such characters as Python-style escapes (``\\x1b``,
``\\u202e``); ``--json``, ``fedhh admin results`` and the dashboard's JSON keep every item
exact.

Only characters that do harm or hide are escaped, and the backslash itself (``\\\\``), so that
every escape reads back one way: two items never show alike, and ``a\\x1b`` (four characters)
is not shown as an item holding ESC. The joiners and selectors that make up emoji sequences,
Indic and Persian words are shown as they are where they do that (``_kept_in_context``): a
ZWJ (U+200D) between two emoji, a joiner (U+200D, U+200C) between two characters of a script
that joins (not ``👨\\u200d7``, which read ``👨7``, nor ``👨\\u200c👩``), a variation selector
after a character that has variants (an emoji, a symbol, an ideograph; not a cased letter, nor
an ASCII character but a keycap's digit; the text and emoji selectors VS15 and VS16 only
after a character with emoji variation sequences, ``_EMOJI_VARIANTS``, not ``東\\ufe0f``,
``ש\\ufe0e``, ``→\\ufe0f``, which read ``東``, ``ש``, ``→``; there VS16 only after one drawn
as text without it, ``☺️``, not ``👍\\ufe0f``, which read ``👍``, and VS15 only after one
drawn as an emoji, whose text glyph it asks for, ``👍︎``, not ``☺\\ufe0e``, which read ``☺``),
a Mongolian
variation selector in Mongolian, the tag characters of the subdivision flags of England,
Scotland and Wales. Anywhere else they draw nothing (``a\\u200cb`` read ``ab``) and are
escaped, as is every other default-ignorable character (the Hangul filler U+3164, the combining
grapheme joiner U+034F...), a tag character anywhere else (after a black flag too: fonts draw any
other tag sequence as the black flag alone), private-use characters, noncharacters and the
code points of planes 4 to 13, where nothing is assigned (a font draws them as nothing or a
box: ``\\ue000pua`` read ``pua``), and the format characters that
draw only on their own script's letters, away from them (the Syriac abbreviation mark, the
Egyptian hieroglyph format controls, the Khitan small script filler: ``a\\U00013430b`` read
``ab``). The replacement character
U+FFFD is escaped too (``caf\\ufffd``): it draws, but as what a viewer draws for bytes it could
not read, and in an item it marks text a decoder lost before the item was counted.

A Malayalam chillu spelt as before Unicode 5.1, a consonant, the virama and ZWJ (``ന്‍``), draws
as the atomic chillu (``ൻ``) that has replaced that spelling, wherever it stands: its ZWJ is
escaped (``ന്\\u200dറ``, which read as ``ൻറ``), as NFC's changes are below, and the atomic
letter shows as it is.

A mark after a character shown escaped would draw on the escape's last character (``\\x1b́``,
``a\\u200b́b``, the accent over the ``b`` of the escape), so it is escaped too
(``\\x1b\\u0301``).

A nonspacing mark just after the same mark draws over it (``กิิ``, a Thai vowel sign twice,
read ``กิ``; UTS #39 flags such a repeat), so the repeat is escaped (``กิ\\u0e34``).
The combining dot above on i, j or another soft-dotted letter draws as the letter's own dot,
which it replaces (``i̇``, as ``"İ".lower()`` writes the Turkish capital, read ``i``), and on the
dotless ``ı`` it reads as ``i``: it is escaped there (``i\\u0307stanbul``).

And a run of nonspacing or enclosing marks stacks as high as it is long: past the few that
real text puts on one letter, it draws over the rows above and below (the "zalgo" text of a
letter and 50 marks covered its neighbours on the page and in a terminal). UTS #39 (section
5.4) flags a run of more than 4, so each mark of a run past its 4th is escaped
(``q̴̵̶̷\\u0338...``).

A cut prefix (``Decoded.shown_cut``) is already written with escapes: its backslashes doubled,
the bytes of a character it stops inside as ``\\xNN``, then ``…``; ``printable(text, cut=True)``
escapes the rest of it and leaves its backslashes as they are. A character of its text that it
escapes below U+0100 is written ``\\u00NN``, so that ``\\xNN`` in a cut prefix is always a
byte: ``οο\\u00c3…`` (a Latin ``Ã`` among Greek letters) and ``οο\\xc3…`` (cut inside a
character whose first byte is c3) read apart. A joiner just before that tail
joins nothing, so it is escaped: ``👨\\u200d…`` (the prefix of a family emoji), not ``👨‍…``,
which read as the cut prefix ``👨…`` (every item starting with the man, ``👨🏽`` too).

Items may hold spaces (``new york``), and spaces hide too: a space at either end of an item
draws nothing, in a column of padded items least of all, and the no-break space (U+00A0), the
ideographic space (U+3000) and the other spaces of category Zs draw like the ASCII space. So a
space (U+0020) that begins or ends an item (or a cut prefix's text before its tail) is shown as
``\\x20``, and every space but U+0020 is escaped wherever it is (``new\\xa0york``): ``new york``,
``new\\xa0york``, ``new york\\x20`` and ``\\x20new york`` are four items that show as four. The
symbols that draw blank are escaped as those spaces are: the braille pattern blank
(``new\\u2800york``) and the musical null notehead U+1D159.

A cut item ends in ``…`` (``wait…`` stands for every item starting ``wait``), so a whole item
that ends in ``…`` itself, as text cut by its writer does, shows it escaped
(``wait\\u2026``): in a list of heavy hitters that holds cut items (``--max-bits`` without
completion rounds) the two read alike, and the console's note says an item ending in ``…``
was cut.

Letters of different scripts look alike (``a`` and the Cyrillic ``а``, ``o``, the Greek ``ο``,
the Armenian ``օ``, the Georgian ``ყ`` and ``y``), so a word (letters, marks and digits between
spaces, punctuation and symbols: ``paypal`` and ``com`` in ``paypal.com``) that mixes scripts
beyond UTS #39's Highly Restrictive level (section 5.2: one script, or Latin with Han and kana,
with Han and Bopomofo, or with Han and Hangul, as Japanese, Chinese and Korean are written)
shows the letters not of its most frequent script escaped (``p\\u0430ypal``, ``\\u10e7outube``;
on a tie a script set with Latin is kept, else the first letter's): before, ``pаypal`` and
``paypal`` were two rows that read alike. A letter's scripts are its Script_Extensions
(``scripts.txt``, which ``gen_scripts.py`` writes from Unicode's data; a hand list of seven
scripts until the fifty-fifth stop let ``ყoutube`` and ``ᑭaypal`` show as they are). A word of
one script, not all ASCII, all of whose letters read as letters of another word's script (by
Unicode's confusables, below, through letters words are spelt in, whose Identifier_Status is
Allowed, UTS #39 section 3.1, ``identifiers.txt``: not through the Restricted ones, technical,
obsolete or uncommon, ``ĸ``, ``ʙ``, ``ɸ``) is escaped too (``paypal.\\u0441\\u0441``,
``fuß.\\u03b2\\u03b2``: a whole-script confusable within one item);
words of two scripts that read as no one script show as they are (``Ελλάδα Greece``,
``Москва Moscow``, whose Greek or Cyrillic word showed escaped before, ``東京 Tokyo``). An
item of one script (``Москва``, ``café``) shows as it is, but for a Restricted letter that reads
as other text beside Allowed letters of its script (``p\\u0251ypal``, a Latin alpha: section 5.2
admits Allowed characters alone at every level but Unrestricted; ``\\u0162ara``, Romanian's T
with a cedilla, the 8-bit code pages' spelling, which reads as the Allowed ``Țara`` with a comma
below and would split that word's count unseen); a word of Restricted letters
alone (Cherokee ``ᏣᎳᎩ``, of a Limited_Use script) shows as it is. The level is Highly
Restrictive, not Moderately Restrictive (Latin with any one other Recommended script but
Cyrillic and Greek), which would let Latin words with Armenian or Georgian letters pass
(``gօօgle``, ``ყoutube``): a list's viewer tells items apart by eye, in no one language.
A letter's font, width or ligature variant among plain letters of its script is a kind of its
own (``ﬁnance`` with the ligature ``ﬁ``, ``ｐaypal`` with a fullwidth ``ｐ``: ``\\ufb01nance``,
``\\uff50aypal``); an item of variants alone (``ｐａｙｐａｌ``), or of variants beside another
script (``ＰＣゲーム``), shows as it is.
So does an item all of whose letters look like Latin ones (``сосоа``, Cyrillic), unless the
list it is shown in holds another row it reads as (``cocoa``): then its lookalike letters are
escaped (``printable_rows``), where the consoles, the dashboard's page and its CSV list items.
What a row reads as is its skeleton by Unicode's confusables (UTS #39, section 4; the table is
``confusables.txt``, read when a list is first shown), so the same holds for every character
Unicode lists as reading as another: the font and width variants of digits and ASCII symbols
and the Roman numerals (``１２３``, ``𝟷𝟸𝟹`` beside ``123``, ``Ⅻ`` beside ``XII``:
``\\uff11\\uff12\\uff13``, ``\\u216b``), the slashes, colons, dots and dashes that draw as
ASCII's (``http://a.com╱x`` beside ``http://a.com/x``: ``http://a.com\\u2571x``; ``ノ``, ``˸``,
``׃``, ``٠``, ``˗``), what draws as the backslash every escape begins with (``⧵x1b``, the
reverse solidus operator, beside the item ESC, shown ``\\x1b``: ``\\u29f5x1b``; ``a⑊b``, the
OCR double backslash, beside ``a\\b``, shown ``a\\\\b``); alone they show as they are. In
such a row the non-ASCII characters that read as other text are escaped, and those that an
ASCII character reads as (``º/₀``, as ``%`` reads); ASCII is never escaped, since escapes are
written in it, so ``rn`` and ``m``, which UTS #39 reads alike, show as they are.

Items are kept as written, so ``café`` written with a combining accent (NFD) and with ``é``
(NFC) are two items that look alike: in an item that is not in NFC, the marks, jamo and
singletons (the Ohm sign) of each run of characters NFC would change are escaped
(``cafe\\u0301``), and the NFC form, the usual one, shows as it is.

Columns of items are padded by the room a terminal gives each character (``columns``), not by
the count of characters: a CJK character or an emoji takes two columns, a combining mark or a
joiner none, so ``東京`` padded to 20 characters stood two columns out of its column.

A cell of Hebrew or Arabic letters is set between two left-to-right marks (U+200E, no column;
``isolated``, which ``ljust`` and ``rjust`` apply). A terminal or viewer that lays out
bidirectional text (the Unicode Bidirectional Algorithm: Konsole, mintty, VTE, macOS Terminal,
text editors) takes the numbers after a right-to-left word, and the spaces between, into the
word's direction: the row ``שלום  2,666  53  4`` showed as ``4  53  2,666  םולש``, the round
read as the estimate and the item in the round's column; and a row whose first letter is
right-to-left it lays out right to left whole. The marks end the item's run and start the row
left to right, so its columns stay in their order; the item's letters are laid out as before.
On a web page (the demo page's list, a line of plain text) such an item is set between a
first-strong isolate and its pop (U+2068, U+2069; ``page_isolated``), what ``<bdi>`` is in
markup: two right-to-left items side by side took the quotes and the comma between them into
their direction, so that the line listed them in reverse.
"""

from __future__ import annotations

import bisect
import os
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

__all__ = ["columns", "cut_item", "cut_marks_note", "cut_text", "fitted", "fitted_row",
           "fitted_rows", "isolated", "ljust", "message_text", "page_isolated", "partial_bytes",
           "printable", "printable_rows", "rjust"]

ELLIPSIS = "…"  # (as fedhh.codec.codec writes a cut prefix's end)

# Format characters (category Cf) that reorder or hide text and are not default-ignorable
# (those are ``_IGNORABLE``); the Arabic number signs, which draw, are kept. And the symbols
# that draw blank, as a space does (not category Zs, nor default-ignorable): the braille pattern
# blank U+2800 (``new\u2800york`` read ``new york``) and the musical null notehead U+1D159.
_HIDDEN_FORMAT = frozenset("\ufff9\ufffa\ufffb\u2800\U0001d159")
# U+FFFD, what a decoder writes for bytes it cannot read: in an item, the mark of text lost
# before it was counted. Terminals, browsers and sheets draw the same glyph for bytes they cannot
# read themselves, so a raw one does not say whether the item holds it or the viewer failed.
_REPLACEMENT = "\ufffd"

# Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties.txt): drawn as nothing, whatever
# the font, unless they act on the characters around them (``_kept_in_context``).
_IGNORABLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
              (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
              (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
              (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
              (0xE0000, 0xE0FFF))
_JOINERS = "\u200c\u200d"
_KEYCAP = "\u20e3"
_MONGOLIAN = range(0x1800, 0x18B0)
# Scripts whose words hold ZWJ or ZWNJ (conjuncts, Persian half-spaces): Arabic, Syriac, Thaana,
# NKo and the Arabic supplements; the Indic scripts to Sinhala; Tibetan, Myanmar; Khmer and
# Mongolian; the Indic ones of the Brahmi block and after; Arabic presentation forms.
_JOINING_SCRIPTS = ((0x0600, 0x08FF), (0x0900, 0x0DFF), (0x0F00, 0x109F), (0x1780, 0x18AF),
                    (0xA800, 0xA8FF), (0xA980, 0xAAFF), (0xABC0, 0xABFF), (0xFB50, 0xFDFF),
                    (0xFE70, 0xFEFF), (0x10A00, 0x10A5F), (0x11000, 0x11FFF))

# The Malayalam consonants that have an atomic chillu (U+0D7A-U+0D7F since Unicode 5.1, U+0D54-
# U+0D56 since 9.0): ണ ന ര ല ള ക മ യ ഴ. Before, a chillu was spelt the consonant, the virama
# and ZWJ, which fonts draw as the atomic letter: ന്‍ as ൻ.
_CHILLU_BASES = frozenset("\u0d23\u0d28\u0d30\u0d32\u0d33\u0d15\u0d2e\u0d2f\u0d34")
_MALAYALAM_VIRAMA = "\u0d4d"

_TAGS = range(0xE0000, 0xE0080)  # invisible, but in the three subdivision flags fonts draw
# 🏴 and the tags of gbeng, gbsct, gbwls, then the cancel tag: the flags of England, Scotland and
# Wales, the only tag sequences recommended for display (UTS #51, RGI_Emoji_Tag_Sequence).
_SUBDIVISION_FLAGS = re.compile("\U0001f3f4\U000e0067\U000e0062(?:"
                                "\U000e0065\U000e006e\U000e0067|\U000e0073\U000e0063\U000e0074|"
                                "\U000e0077\U000e006c\U000e0073)\U000e007f")


# Format characters that draw only on the letters of their own script, so nothing elsewhere
# (``a\U00013430b`` read ``ab``), each with its script's span and the sides its letters must
# stand on: the Syriac abbreviation mark over the Syriac letters after it, the Egyptian
# hieroglyph format controls between hieroglyphs, and the Khitan small script filler, a mark
# that places the Khitan character before it in its cluster and draws nothing itself
# (``a\U00016fe4b`` read ``ab``; a mark, not default-ignorable, so it was shown raw).
_SCRIPT_FORMAT = {0x070F: (0x0710, 0x074F, (1,)), 0x16FE4: (0x18B00, 0x18CFF, (-1,))} | {
    code: (0x13000, 0x1345F, (-1, 1)) for code in range(0x13430, 0x13440)}


def _script_format_hides(text: str, i: int) -> bool:
    """Whether ``text[i]`` is one of ``_SCRIPT_FORMAT`` without a letter of its script on a
    side it needs one (the Syriac mark: after it; the Khitan filler: before it; the
    hieroglyph controls: before and after, or another control)."""
    span = _SCRIPT_FORMAT.get(ord(text[i]))
    if span is None:
        return False
    lo, hi, sides = span
    return not all(0 <= i + side < len(text) and lo <= ord(text[i + side]) <= hi
                   for side in sides)


def _within(code: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(lo <= code <= hi for lo, hi in ranges)


# The emoji whose category is not So or Sk (UTS #51's emoji-data.txt): their ZWJ sequences
# (🙂‍↔️, head shaking) are emoji sequences too.
_EMOJI_OTHER = frozenset("\u203c\u2049\u303d\u2139\u2194\u25fb\u25fc\u25fd\u25fe\u2934\u2935"
                         "\u3030")


def _emoji(char: str) -> bool:
    """Whether ``char`` is what a ZWJ sequence joins: an emoji or a symbol (So, Sk: the skin
    tones, ♀); not one shown escaped (U+FFFD, the braille blank), which a joiner before it
    would join to nothing drawn."""
    return ((unicodedata.category(char) in ("So", "Sk") or char in _EMOJI_OTHER)
            and _escaped(char) == char)


def _kept_in_context(text: str, i: int) -> bool:
    """Whether the default-ignorable ``text[i]`` acts on its neighbours, so is shown as it is
    (module docstring): a ZWJ between two emoji, a joiner between two characters of a joining
    script; a variation selector after a character with variants; a Mongolian one in
    Mongolian."""
    char = text[i]
    if i == 0:
        return False
    before = text[i - 1]
    code = ord(before)
    if _within(code, _IGNORABLE) and before != _EMOJI_PRESENTATION:
        return False
    if _escaped(before) != before:
        return False  # (shown after an escape, it acts on nothing drawn: \ufffd️ read \ufffd)
    if char in _JOINERS:
        # (a joiner draws only between two characters it joins: 👨‍7 and क‍a read 👨7 and कa)
        if i + 1 == len(text):
            return False
        after = text[i + 1]
        if _emoji(before) or before == _EMOJI_PRESENTATION:
            # (no emoji sequence holds ZWNJ: 👨 ZWNJ 👩 read 👨👩)
            return char == _JOINER and _emoji(after)
        if (char == _JOINER and before == _MALAYALAM_VIRAMA
                and text[i - 2:i - 1] in _CHILLU_BASES):
            return False  # (the chillu's old spelling: ന്‍റ read as ൻറ, module docstring)
        return _within(code, _JOINING_SCRIPTS) and _within(ord(after), _JOINING_SCRIPTS)
    if 0x180B <= ord(char) <= 0x180F:
        return code in _MONGOLIAN
    if 0xFE00 <= ord(char) <= 0xFE0F or 0xE0100 <= ord(char) <= 0xE01EF:
        if before.isascii():  # a keycap (1️⃣): the digit, # or *, VS16, U+20E3
            return before in "0123456789#*" and text[i + 1:i + 2] == _KEYCAP
        if char in _EMOJI_SELECTORS:
            # (a character without an emoji variation sequence is drawn alike with either:
            # 東️ read 東, →️ →; text is how one is drawn without VS15 unless it is an emoji
            # drawn as one, ☺︎ read ☺, after 👍 it asks for the text glyph; and VS16 changes
            # nothing after an emoji drawn as one, 👍️ read 👍)
            return _emoji_variants(before) and _emoji_by_default(before) == (
                char == _TEXT_PRESENTATION)
        return before != _EMOJI_PRESENTATION and unicodedata.category(before) not in (
            "Lu", "Ll", "Lt", "Mn", "Me", "Mc", "Zs")
    return False


@lru_cache(maxsize=4096)
def _escaped(char: str) -> str:
    category = unicodedata.category(char)
    code = ord(char)
    # (not the unassigned: this Python's Unicode tables may predate an item's newest emoji;
    # noncharacters are fixed for ever, and so are planes 4 to 13 empty: nothing is assigned
    # there nor planned, and a font draws their code points as one box, so that noise of the
    # unicode codebook's raw continuations, http://\U00099ac4ai, showed as its neighbours did)
    if (category in ("Cc", "Zl", "Zp", "Co") or char in _HIDDEN_FORMAT or char == _REPLACEMENT
            or (category == "Zs" and char != " ")
            or 0xFDD0 <= code < 0xFDF0 or code & 0xFFFE == 0xFFFE
            or 0x40000 <= code < 0xE0000):
        return _escape(char)
    return char


@lru_cache(maxsize=4096)
def _unnormal(char: str) -> bool:
    """Whether ``char`` is what NFC composes or replaces: a combining mark, a conjoining Hangul
    jamo (a syllable written in parts), a singleton (the Ohm sign for Omega)."""
    code = ord(char)
    return (unicodedata.combining(char) > 0 or unicodedata.normalize("NFC", char) != char
            or 0x1100 <= code < 0x1200 or 0xA960 <= code < 0xA980 or 0xD7B0 <= code < 0xD800)


def _unnormal_runs(text: str) -> list[bool]:
    """Per character of ``text``: whether NFC would change the run it belongs to. A run is a
    character and those NFC would combine with it (its marks, the jamo of its syllable); a
    character starts a new one when NFC leaves it apart from the run before."""
    flags: list[bool] = []
    start = 0
    for i, char in enumerate(text):
        run = text[start:i]
        if run and not (unicodedata.combining(char) == 0
                        and unicodedata.normalize("NFC", run + char)
                        == unicodedata.normalize("NFC", run) + char):
            continue
        if run:
            flags += [unicodedata.normalize("NFC", run) != run] * len(run)
        start = i
    run = text[start:]
    return flags + [unicodedata.normalize("NFC", run) != run] * len(run)


def _escape(char: str) -> str:
    """``char`` as a Python-style escape: ``\\x1b``, ``\\u202e``, ``\\U000e0067``."""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else (
        f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def message_text(text: str) -> str:
    """``text`` (a message, a server's words: not an item) on one line, every character a
    terminal would act on or hide escaped (``str.isprintable``'s), its backslashes as sent:
    `printable` doubles them to keep items apart, which showed a repr's ``'a\\tb'`` as
    ``'a\\\\tb'``."""
    return "".join(char if char.isprintable() else _escape(char) for char in text)


@lru_cache(maxsize=4096)
def _width(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


_EMOJI_PRESENTATION = "\ufe0f"  # VS16: the character before it drawn as an emoji
_TEXT_PRESENTATION = "\ufe0e"  # VS15: the character before it drawn as text
_EMOJI_SELECTORS = "\ufe0e\ufe0f"  # VS15 and VS16: text or emoji presentation
# The wide characters that are drawn as text unless VS16 follows (Emoji_Presentation=No): every
# other wide one is drawn as an emoji (or has no emoji form), so VS16 after it changes nothing.
_WIDE_TEXT_DEFAULT = frozenset((0x3030, 0x303D, 0x3297, 0x3299, 0x1F202, 0x1F237))


def _emoji_by_default(char: str) -> bool:
    """Whether ``char`` is drawn as an emoji without a selector (Emoji_Presentation=Yes, as
    East Asian width tells it apart from the text-default emoji, ``_WIDE_TEXT_DEFAULT`` but):
    VS16 after it changes nothing, VS15 makes it text."""
    return (unicodedata.east_asian_width(char) in ("W", "F")
            and ord(char) not in _WIDE_TEXT_DEFAULT)


# The characters that have emoji variation sequences, the only ones VS15 and VS16 act on
# (Unicode's emoji-variation-sequences.txt, UTS #51; the ASCII ones, keycap bases, apart).
_EMOJI_VARIANT_RANGES = (
    "A9 AE 203C 2049 2122 2139 2194-2199 21A9-21AA 231A-231B 2328 23CF 23E9-23F3 "
    "23F8-23FA 24C2 25AA-25AB 25B6 25C0 25FB-25FE 2600-2604 260E 2611 2614-2615 2618 261D "
    "2620 2622-2623 2626 262A 262E-262F 2638-263A 2640 2642 2648-2653 265F-2660 2663 "
    "2665-2666 2668 267B 267E-267F 2692-2697 2699 269B-269C 26A0-26A1 26A7 26AA-26AB "
    "26B0-26B1 26BD-26BE 26C4-26C5 26C8 26CE-26CF 26D1 26D3-26D4 26E9-26EA 26F0-26F5 "
    "26F7-26FA 26FD 2702 2705 2708-270D 270F 2712 2714 2716 271D 2721 2728 2733-2734 2744 "
    "2747 274C 274E 2753-2755 2757 2763-2764 2795-2797 27A1 27B0 27BF 2934-2935 "
    "2B05-2B07 2B1B-2B1C 2B50 2B55 3030 303D 3297 3299 1F004 1F170-1F171 1F17E-1F17F "
    "1F202 1F21A 1F22F 1F237 1F30D-1F30F 1F315 1F31C 1F321 1F324-1F32C 1F336 1F378 1F37D "
    "1F393 1F396-1F397 1F399-1F39B 1F39E-1F39F 1F3A7 1F3AC-1F3AE 1F3C2 1F3C4 1F3C6 "
    "1F3CA-1F3CE 1F3D4-1F3E0 1F3ED 1F3F3 1F3F5 1F3F7 1F408 1F415 1F41F 1F426 1F43F "
    "1F441-1F442 1F446-1F449 1F44D-1F44E 1F453 1F46A 1F47D 1F4A3 1F4B0 1F4B3 1F4BB 1F4BF "
    "1F4CB 1F4DA 1F4DF 1F4E4-1F4E6 1F4EA-1F4ED 1F4F7 1F4F9-1F4FB 1F4FD 1F508 1F50D "
    "1F512-1F513 1F549-1F54A 1F550-1F567 1F56F-1F570 1F573-1F579 1F587 1F58A-1F58D 1F590 "
    "1F5A5 1F5A8 1F5B1-1F5B2 1F5BC 1F5C2-1F5C4 1F5D1-1F5D3 1F5DC-1F5DE 1F5E1 1F5E3 1F5E8 "
    "1F5EF 1F5F3 1F5FA 1F610 1F687 1F68D 1F691 1F694 1F698 1F6AD 1F6B2 1F6B9-1F6BA 1F6BC "
    "1F6CB 1F6CD-1F6CF 1F6E0-1F6E5 1F6E9 1F6F0 1F6F3")
_EMOJI_VARIANTS = tuple((int(lo, 16), int(hi or lo, 16)) for lo, _, hi in (
    part.partition("-") for part in _EMOJI_VARIANT_RANGES.split()))
_EMOJI_VARIANT_STARTS = [lo for lo, _ in _EMOJI_VARIANTS]


def _emoji_variants(char: str) -> bool:
    """Whether ``char`` has emoji variation sequences (``_EMOJI_VARIANTS``)."""
    at = bisect.bisect_right(_EMOJI_VARIANT_STARTS, ord(char)) - 1
    return at >= 0 and ord(char) <= _EMOJI_VARIANTS[at][1]
_JOINER = "\u200d"
_SKIN_TONES = range(0x1F3FB, 0x1F400)  # Fitzpatrick modifiers, drawn into the emoji before


def _as_written(text: str) -> str:
    """``text`` as standard output writes it. Where its encoding is not Unicode (a Latin-1 or
    ASCII locale, a Windows console redirected to a file), the characters it lacks are written
    as backslash escapes (``fedhh.cli.main`` sets its errors so: ``\\xe9``, ``\\u6771``), and the
    consoles' columns are those of the escapes: before, ``東京`` was padded as 4 columns and
    written as 12, and every row holding such an item stood out of line. Where it lacks ``…``,
    a cut row's mark is written ``\\u2026``, so a whole item's last ``…`` is written
    ``\\U00002026``, the same character's long escape, not the ``\\u2026`` it is elsewhere."""
    encoding = getattr(sys.stdout, "encoding", None)
    if not encoding:
        return text
    if text.endswith(_OWN_ELLIPSIS) and _escapes(text, len(text) - len(_OWN_ELLIPSIS)) \
            and not _writes(encoding, ELLIPSIS):
        # (a whole item's last …, escaped by printable, and a cut row's mark … as the
        # encoding writes it, \u2026, read alike: wait\u2026 was the whole item wait… and
        # every item starting wait; the long form of the same escape keeps them apart)
        text = text[:-len(_OWN_ELLIPSIS)] + f"\\U{ord(ELLIPSIS):08x}"
    if text.isascii() or _writes(encoding, text):
        return text
    return text.encode(encoding, "backslashreplace").decode(encoding)


_OWN_ELLIPSIS = "\\u2026"  # (printable's escape of a whole item's last …)


def _writes(encoding: str, text: str) -> bool:
    """Whether ``encoding`` writes ``text`` as it is (an unknown encoding: taken to)."""
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return False
    except LookupError:
        pass
    return True


def _escapes(text: str, at: int) -> bool:
    """Whether the backslash at ``text[at]`` begins an escape, not the second half of an
    item's own doubled backslash: an even run of backslashes before it."""
    start = at
    while start > 0 and text[start - 1] == "\\":
        start -= 1
    return (at - start) % 2 == 0


def columns(text: str) -> int:
    """The columns a terminal gives ``text`` (``_as_written``: as stdout writes it):
    two for an East Asian wide or fullwidth character
    (CJK, Hangul, most emoji), none for a combining mark or a format character, one otherwise;
    and for emoji sequences one emoji's two (UTS #51): a character made an emoji by VS16
    (``❤️``, ``1️⃣``), an emoji and its skin tone (``👍🏽``), emoji joined by U+200D (``👨‍👩‍👧``,
    ``🏳️‍🌈``), as wcwidth and the terminals that draw such sequences as one glyph count them.
    A joiner between letters (Indic conjuncts) joins nothing here: they keep their columns."""
    text = _as_written(text)
    if text.isascii():
        return len(text)
    total = 0
    last = 0  # the columns of the last character that took any
    joined = False
    for char in text:
        if char == _JOINER:
            joined = last == 2
            continue
        width = _width(char)
        if char == _EMOJI_PRESENTATION and last == 1:
            width = last = 2
            total += 1
            continue
        if (joined and width) or (ord(char) in _SKIN_TONES and last == 2):
            # drawn into the emoji before it, a text-default symbol too (the ♀ of 🤷‍♀️, the
            # ⚧ of 🏳️‍⚧️: its VS16 then adds nothing)
            width = 0
        elif width:
            last = width
        joined = False
        total += width
    return total


_BYTE_ESCAPE = re.compile(r"\\x[0-9a-f]{2}")
_OPEN_MARKER = re.compile(r"⟨\+(?:0|[1-9][0-9]*) bits?⟩$")  # (as fedhh.codec.codec.open_marker)
_LRM = "\u200e"
# The blocks whose unassigned code points are right-to-left (UAX #9's default Bidi_Class R or
# AL): a character newer than this Python's Unicode tables (``bidirectional`` is '') there.
_RTL_BLOCKS = ((0x0590, 0x08FF), (0xFB1D, 0xFDFF), (0xFE70, 0xFEFF), (0x10800, 0x10FFF),
               (0x1E800, 0x1EFFF))


@lru_cache(maxsize=4096)
def _rtl(char: str) -> bool:
    """Whether ``char`` is a strong right-to-left character of the Unicode Bidirectional
    Algorithm (class R or AL: Hebrew, Arabic, Syriac, Thaana, NKo letters...)."""
    kind = unicodedata.bidirectional(char)
    return kind in ("R", "AL") or (not kind and _within(ord(char), _RTL_BLOCKS))


def _cut_tail(text: str) -> int:
    """Where the tail of a cut prefix (``Decoded.shown_cut``) begins: its ``…``, before it the
    count of bits it holds of a codeword it stops inside (``⟨+3 bits⟩``), and before that the
    ``\\xNN`` escapes of the bytes of a character it stops inside. An escape's backslash
    is not itself escaped: it ends a run of an odd number of backslashes (the text's own are
    doubled)."""
    end = len(text) - 1 if text.endswith(ELLIPSIS) else len(text)
    marker = _OPEN_MARKER.search(text, 0, end)
    if marker is not None:
        end = marker.start()
    while end >= 4 and _BYTE_ESCAPE.fullmatch(text, end - 4, end):
        start = end - 4
        while start > 0 and text[start - 1] == "\\":
            start -= 1
        if (end - 4 - start) % 2:  # (an even run before it, with it odd: it is escaped)
            break
        end -= 4
    return end


_CUT_ESCAPE = re.compile(r"\\(\\|u27e8)")
_BITS_ONLY = re.compile(r"⟨[01]*⟩")  # (``Codec.display`` of a prefix without a whole byte)


def cut_item(text: str) -> str:
    """The characters of the items a cut prefix (``Decoded.shown_cut``) stands for, as they
    begin: its text before its tail (``_cut_tail``), its doubled backslashes and its ``⟨``
    escaped ``\\u27e8`` read back; empty for a prefix without a whole byte (``⟨0110⟩…``).
    What a filter of the heavy hitters matches a cut row by, so that ``bits``, ``…`` or ``\\x``
    do not match the marks of every cut row and ``a\\b`` matches the cut ``a\\\\b…``."""
    body = text[:_cut_tail(text)]
    if _BITS_ONLY.fullmatch(body):
        return ""
    return _CUT_ESCAPE.sub(lambda m: "\\" if m.group(1) == "\\" else "⟨", body)


def cut_bytes(text: str) -> int:
    """How many of its items' first bytes a cut row shown ``text`` (``Decoded.shown_cut``)
    holds, as ``Decoded.known_bytes`` counts them: its characters (``cut_item``) and the
    ``\\xNN`` bytes of a character it stops inside. For an output that has the row's text
    alone, a ``Results`` reply's (`fedhh up`, `fedhh admin results`)."""
    return (len(cut_item(text).encode("utf-8", "surrogatepass"))
            + len(_BYTE_ESCAPE.findall(text, _cut_tail(text))))


def partial_bytes(text: str) -> int:
    """How many bytes of a character it stops inside a cut row shown ``text`` (ending in
    ``…``: ``Decoded.shown_cut``, ``fitted``) holds: its ``\\xNN`` escapes of bytes past ASCII
    before its tail's ``⟨+N bits⟩…``; none in a whole item's text (``abc\\x1b``, an ESC shown
    escaped), nor for an ASCII character, which is whole in its one byte."""
    if not text.endswith(ELLIPSIS):
        return 0
    return sum(int(escape[2:], 16) >= 0x80
               for escape in _BYTE_ESCAPE.findall(text, _cut_tail(text)))


def cut_marks_note(cut: Iterable[str]) -> str:
    """What the marks of the cut rows ``cut`` (as shown) mean, for a list that shows one:
    ``⟨+N bits⟩`` before a row's ``…`` (`fedhh.codec.codec.open_marker`), ``⟨+0 bits⟩`` where
    one shows that, and the ``\\xNN`` before them where a row ends in some
    (``partial_bytes``: before, a row ``https://a.example/\\xe2…`` was left unexplained, and
    its byte read as an escape of the item's own); each said after ``, ``; else nothing.
    The one wording of the consoles' lists (`fedhh simulate`, `fedhh up`) and the dashboard's
    page."""
    rows = list(cut)
    said = []
    opened = any(_OPEN_MARK in item for item in rows)
    inside = max(map(partial_bytes, rows), default=0)
    if opened:
        zero = ("; ⟨+0 bits⟩: it ends between two codewords where the codebook has a token "
                "that could have run on across that point (55 after +1-5), and items so "
                "written are not under it" if any(_ZERO_MARK in item for item in rows) else "")
        said.append("⟨+N bits⟩ before the … the bits it holds of the next character's "
                    f"code, not enough to tell which character{zero}")
    if inside:
        said.append("\\xNN before the " + ("⟨+N bits⟩ or " if opened else "")
                    + "… the first byte" + ("s" if inside > 1 else "") + " of the next "
                    "character as UTF-8 writes it (2 to 4 bytes past ASCII), not enough to "
                    "tell which; the row's bytes count them")
    return "".join(f", {words}" for words in said)


_OPEN_MARK = "⟨+"  # (how fedhh.codec.codec.open_marker begins)
_ZERO_MARK = "⟨+0 bits⟩"  # (open_marker where a token could have run across the cut)


def prefix_words(bits: int, known: int) -> str:
    """What a cut row is, in words: ``cut at 121 bits: the first 16 bytes of every item
    starting so``, ``known`` the bytes it holds (``Decoded.known_bytes``; none: ``every item
    starting so``). An item longer than the run can find shows its beginning alone, its end
    never found (two URLs that differ at their end are one row): the count says how much of
    it the row is."""
    held = f"the first {known:,} byte{'' if known == 1 else 's'} of " if known > 0 else ""
    return f"cut at {bits:,} bits: {held}every item starting so"


def isolated(text: str) -> str:
    """``text`` between two left-to-right marks (U+200E) when it holds a right-to-left letter
    (module docstring: a terminal that lays out bidirectional text would otherwise carry the
    numbers after it into the item's direction and show a row's columns in reverse); else
    ``text``. The marks take no column. Both as stdout writes them (``_as_written``): where it
    cannot write the letters, they are escapes, and neither are marks it cannot write set
    around them (before, an ASCII console showed ``\\u200e\\u05e9...\\u200e``)."""
    text = _as_written(text)
    if text.isascii() or not any(map(_rtl, text)) or _as_written(_LRM) != _LRM:
        return text
    return f"{_LRM}{text}{_LRM}"


def page_isolated(text: str) -> str:
    """``text`` between U+2068 and U+2069 (first-strong isolate, pop directional isolate) when it
    holds a right-to-left letter or an Arabic number (``٣٤``: the neutrals between two such
    numbers take the right-to-left direction too, so ``"٣٤", "٥٦"`` was drawn swapped), for
    plain text that a browser lays out (module docstring): the item takes its own direction,
    its first strong letter's, and what stands around it keeps the line's, as ``<bdi>`` does.
    Not for a terminal (``isolated``): few lay out the isolates. ``text`` is shown
    (``printable``): an item's own isolates are escapes, so these two are the page's alone."""
    if any(_rtl(c) or unicodedata.bidirectional(c) == "AN" for c in text):
        return f"\u2068{text}\u2069"
    return text


def cut_text(text: str) -> str:
    """The whole characters of a cut prefix as ``Decoded.shown_cut`` writes them, before its
    tail: backslashes doubled, so that ``\\xNN`` is always a byte, and an ``⟨`` of its own
    ``\\u27e8``, so that ``⟨+3 bits⟩`` is always the tail's (the item ``x⟨+3 bits⟩y`` cut
    after its ``⟩`` showed as ``x`` and 3 bits of the next codeword)."""
    return text.replace("\\", "\\\\").replace("⟨", "\\u27e8")


# A text longer than this many characters a column is wider than the column when shown: an
# emoji sequence, the widest of few columns, is 11 characters (a family with skin tones) for 2.
_CHARACTERS_A_COLUMN = 8


def fitted(text: str, width: int, confusable: bool = False) -> tuple[str, bool]:
    """``(text, False)`` if ``printable(text)`` takes at most ``width`` columns; else a cut
    item, ``(cut, True)``, for ``printable_rows``: the longest beginning of ``text`` that,
    cut as a prefix is (``cut_text``, then ``…``), shows in ``width`` columns. Its ``…`` reads
    as a cut, as a cut prefix's does, and never as the item's own text: a whole item's last
    ``…`` shows escaped (``\\u2026``). A list of whole items whose longest would otherwise
    widen the column of every row, or push its own row's figures on by thousands of columns,
    shows each at most ``width`` wide (``width`` at least 3: a wide character and the ``…``).
    ``confusable``: shown as ``printable_rows`` shows a row that reads as another's."""
    span = _CHARACTERS_A_COLUMN * width
    if len(text) <= span and columns(printable(text, confusable=confusable)) <= width:
        return text, False

    def shown(n: int) -> str:
        return cut_text(text[:n]) + ELLIPSIS

    # (one character at least: a cut prefix is never a bare …)
    lo, hi = 1, min(len(text) - 1, span)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if columns(printable(shown(mid), cut=True, confusable=confusable)) <= width:
            lo = mid
        else:
            hi = mid - 1
    return shown(lo), True


def ljust(text: str, width: int) -> str:
    """``text`` padded on the right to ``width`` columns (``str.ljust`` counts characters),
    `isolated`: a cell of a row that goes on after it."""
    return isolated(text) + " " * max(0, width - columns(text))


def rjust(text: str, width: int) -> str:
    """``text`` padded on the left to ``width`` columns, `isolated`."""
    return " " * max(0, width - columns(text)) + isolated(text)


def printable(text: str, cut: bool = False, confusable: bool = False) -> str:
    """``text`` with every control, line-breaking, reordering or invisible character escaped,
    a space at either end and every space but U+0020 escaped, its backslashes doubled, and, in
    a text not in NFC, what NFC would change (module docstring); the text itself when it has
    none. An item of marks or joiners alone (``\u0652``, ``\u200d``) takes no room and would
    show as an empty cell, or join the cell before it: each of its characters is escaped, as is
    a mark that begins an item (``\\u0943taebno`` read ``taebno``). ``cut``: ``text`` is a cut
    prefix as ``Decoded.shown_cut`` writes it, whose backslashes are escapes already.
    ``confusable``: every non-ASCII character that reads as other text, or that ASCII reads
    as, is escaped too (``_confusable``, for ``printable_rows``)."""
    if (text.isascii() and text.isprintable() and (cut or "\\" not in text)
            and not text.startswith(" ") and not text.endswith(" ")):
        return text
    if text and not columns(text):
        return "".join(map(_escape, text))
    unnormal = ([False] * len(text) if unicodedata.is_normalized("NFC", text)
                else _unnormal_runs(text))
    flags = [range(*m.span()) for m in _SUBDIVISION_FLAGS.finditer(text)]
    # (a cut prefix's joiner before its tail joins nothing: 👨 and a joiner, then …, showed as
    # the cut prefix 👨…, which stands for other items)
    body = text[:_cut_tail(text)] if cut else text
    # (a cut prefix's own escapes, \\ and \u27e8, are characters of its text here: a mark
    # after one draws on the escape's last character, as after one printable writes)
    after_escape = ({m.end() for m in _CUT_ESCAPE.finditer(body)} if cut and "\\" in body
                    else set())
    # (its own letters, not its tail's: the Latin "bits" of ⟨+2 bits⟩ outnumbered Моск's
    # Cyrillic, which showed escaped as the odd script out)
    foreign = _foreign_letters(body) | (_confusable_chars(body) if confusable else set())
    shown = []
    marks = 0  # (of the run of nonspacing or enclosing marks just before text[i])
    for i, char in enumerate(text):
        code = ord(char)
        mark = unicodedata.category(char) in ("Mn", "Me")
        marks, stacked = (marks + 1 if mark else 0), marks >= _MARKS_STACKED
        if char == "\\":
            shown.append(char if cut else "\\\\")
        elif char == " " and (i == 0 or i == len(body) - 1):
            shown.append("\\x20")  # (a space at an end draws nothing there)
        elif char == ELLIPSIS and not cut and i == len(text) - 1:
            shown.append(_escape(char))  # (a cut item's mark: module docstring)
        elif code in _TAGS:
            shown.append(char if any(i in flag for flag in flags) else _escape(char))
        elif (unnormal[i] and _unnormal(char)) or (
                i == 0 and unicodedata.category(char) in ("Mn", "Mc", "Me")):
            # (a leading mark draws on whatever is before the item: a column's padding)
            shown.append(_escape(char))
        elif i and unicodedata.category(char) in ("Mn", "Mc", "Me") and (
                shown[-1] != text[i - 1] or i in after_escape):
            # (after an escape it draws on the escape's last character: \x1b́, \u200b́)
            shown.append(_escape(char))
        elif i and char == text[i - 1] and unicodedata.category(char) == "Mn":
            # (a mark repeated draws over itself: กิิ read กิ, as UTS #39 flags it)
            shown.append(_escape(char))
        elif char == _DOT_ABOVE and _dot_hidden(text, i):
            shown.append(_escape(char))  # (i̇ read i: module docstring)
        elif mark and stacked:
            shown.append(_escape(char))  # (module docstring: a stack that covers other rows)
        elif _within(code, _IGNORABLE):
            shown.append(char if i < len(body) and _kept_in_context(body, i) else _escape(char))
        elif i in foreign or _script_format_hides(text, i):
            shown.append(_escape(char))
        else:
            shown.append(_escaped(char))
        if cut and 0x80 <= code < 0x100 and i < len(body) and shown[-1] != char:
            # (a cut prefix's \xNN is a byte of its tail: the text οοÃ, its Latin Ã escaped
            # as the odd script out, showed as οο and the byte c3, οο\xc3…)
            shown[-1] = f"\\u{code:04x}"
    return "".join(shown)


# Soft_Dotted (Unicode's PropList.txt): letters whose dot a mark above replaces, so that one of
# them and U+0307, the combining dot above, draws as the letter alone (``i\u0307``, which
# ``"İ".lower()`` writes: ``i̇stanbul`` read ``istanbul``); and the dotless ı and ȷ, which a dot
# above makes read as i and j.
_SOFT_DOTTED = frozenset(
    "ij\u012f\u0249\u0268\u029d\u02b2\u03f3\u0456\u0458\u1d62\u1d96\u1da4\u1da8\u1e2d"
    "\u1ecb\u2071\u2148\u2149\u2c7c\U0001df1a\U0001e04c\U0001e04d\U0001e068\u0131\u0237"
    + "".join(chr(code + j) for code in range(0x1D422, 0x1D6A4, 0x34) for j in (0, 1)))
_DOT_ABOVE = "\u0307"


def _dot_hidden(text: str, i: int) -> bool:
    """Whether ``text[i]``, U+0307, stands on a soft-dotted letter (``_SOFT_DOTTED``), only marks
    that are not above between them (Unicode's condition for the dot to be replaced, as CLDR's
    Lithuanian casing reads it), so that it draws as the letter's own dot; not where a mark
    above follows it, whose accent would have taken the letter's dot (Lithuanian ``i̇́``)."""
    j = i - 1
    while j >= 0 and unicodedata.combining(text[j]) not in (0, 230):
        j -= 1
    k = i + 1
    while k < len(text) and unicodedata.combining(text[k]) not in (0, 230):
        k += 1
    return (j >= 0 and text[j] in _SOFT_DOTTED
            and not (k < len(text) and unicodedata.combining(text[k]) == 230))


# The longest run of nonspacing or enclosing marks shown as it is (UTS #39, section 5.4:
# "forbid sequences of more than 4 nonspacing marks (gc=Mn or gc=Me)").
_MARKS_STACKED = 4


_VARIANT_KINDS = ("<font>", "<wide>")  # (and <compat> of several letters: the ligature ﬁ)


@lru_cache(maxsize=4096)
def _letter_variant(char: str) -> str | None:
    """The letters that a font, width or ligature variant of letters is (its NFKC form: ``𝐩``,
    ``ｐ``, ``ﬁ`` are ``p``, ``p``, ``fi``); None for any other character (not the micro sign,
    a single letter's other compatibility form, nor a superscript)."""
    if not unicodedata.category(char).startswith("L"):
        return None
    kind = unicodedata.decomposition(char).partition(" ")
    if kind[0] in _VARIANT_KINDS or (kind[0] == "<compat>" and " " in kind[2]):
        base = unicodedata.normalize("NFKC", char)
        if base != char and all(unicodedata.category(c).startswith("L") for c in base):
            return base
    return None


_SCRIPTS = os.path.join(os.path.dirname(__file__), "scripts.txt")
_IDENTIFIERS = os.path.join(os.path.dirname(__file__), "identifiers.txt")


@lru_cache(maxsize=2)
def _range_table(path: str) -> tuple[list[int], list[int], list[frozenset[str]]]:
    """A table ``gen_scripts.py`` writes (``scripts.txt``, ``identifiers.txt``): its ranges'
    starts, ends and values, read when an item first needs them."""
    starts, ends, values = [], [], []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if not line.startswith("#"):
                span, _, names = line.rstrip("\n").partition(";")
                lo, _, hi = span.partition("..")
                starts.append(int(lo, 16))
                ends.append(int(hi or lo, 16))
                values.append(frozenset(names.split()))
    return starts, ends, values


@lru_cache(maxsize=8192)
def _scripts(char: str) -> frozenset[str]:
    """The scripts a letter is used with (its Script_Extensions, UAX #24; a variant's, its
    letters': ``𝐩``, Common itself, is Latin); empty for one of every script (Common,
    Inherited)."""
    if (base := _letter_variant(char)) is not None and len(base) == 1 and base != char:
        char = base
    return _range_value(_SCRIPTS, char)


def _range_value(path: str, char: str) -> frozenset[str]:
    """``char``'s value in the ``_range_table`` at ``path``; empty where no range holds it."""
    starts, ends, values = _range_table(path)
    at = bisect.bisect_right(starts, ord(char)) - 1
    return values[at] if at >= 0 and ord(char) <= ends[at] else frozenset()


# UTS #39, section 5.2: a string is Highly Restrictive if its characters are of one script, or
# of one of these sets, the scripts Japanese, Chinese with Bopomofo, and Korean are written in
# with Latin; any other mix (Latin with Cyrillic, Greek, Armenian, Georgian, Cherokee,
# Canadian syllabics...) is less restrictive, the mixes spoofs are made of.
_HIGHLY_RESTRICTIVE = (frozenset(("Latn", "Hani", "Hira", "Kana")),
                       frozenset(("Latn", "Hani", "Bopo")), frozenset(("Latn", "Hani", "Hang")))


def _words(text: str) -> list[list[int]]:
    """The positions of each word's letters: a word is a run of letters, marks, digits and
    format characters (a joiner), which a space, a punctuation mark or a symbol ends (``.``,
    ``/``, ``@`` in a URL or an address)."""
    words: list[list[int]] = [[]]
    for i, char in enumerate(text):
        kind = unicodedata.category(char)[0]
        if kind == "L":
            words[-1].append(i)
        elif kind not in "MNC" and words[-1]:
            words.append([])
    return [word for word in words if word]


def _mixed_letters(text: str, word: list[int]) -> set[int]:
    """The positions of the letters of a word that is not Highly Restrictive (UTS #39, section
    5.2) that are not of the scripts it is mostly written in: the one script, or the Highly
    Restrictive set, that most of its letters are of (on a tie, one with Latin, else the first
    letter's); none in a word that is."""
    scripts = [(i, found) for i in word if (found := _scripts(text[i]))]
    groups = Counter(found for _, found in scripts)  # (a word's letters have few script sets)
    if not groups or frozenset.intersection(*groups):
        return set()  # (one script)
    if any(all(found & allowed for found in groups) for allowed in _HIGHLY_RESTRICTIVE):
        return set()
    first = scripts[0][1]
    kinds = [frozenset((name,)) for name in sorted(frozenset.union(*groups))]

    def covered(kind: frozenset[str]) -> int:
        return sum(count for found, count in groups.items() if found & kind)

    kept = max((*kinds, *_HIGHLY_RESTRICTIVE),
               key=lambda kind: (covered(kind), "Latn" in kind, bool(kind & first)))
    return {i for i, found in scripts if not found & kept}


def _variant_letters(text: str, word: list[int]) -> set[int]:
    """The positions of the letters at ``word`` of the kind they have fewer of, where they mix
    font, width or ligature variants (``_letter_variant``) with plain letters of their script
    (``ｐaypal``, ``ﬁnance``, ``a.ﬁ``); on a tie the variants."""
    variants = [i for i in word if _letter_variant(text[i]) is not None]
    if not variants:
        return set()
    their = frozenset().union(*(_scripts(text[i]) for i in variants))
    plain = [i for i in word if _letter_variant(text[i]) is None and _scripts(text[i]) & their]
    return set(variants if len(variants) <= len(plain) else plain) if plain else set()


@lru_cache(maxsize=1)
def _lookalikes() -> dict[str, frozenset[str]]:
    """For each prototype character (``_prototypes``) that words are spelt in (its
    Identifier_Status is Allowed, UTS #39, section 3.1: ``identifiers.txt``), the scripts of
    the letters that read as it (``o``: Latin, Greek, Cyrillic, Armenian...), itself among
    them."""
    found: dict[str, set[str]] = {}
    for code, prototype in list(_prototypes().items()):
        # (a prototype reads as itself: confusables.txt maps none of its characters. Many
        # prototype letters, once NFD has taken their marks, are Restricted: technical,
        # obsolete or uncommon, ɸ, ɾ, ĸ, ʙ, Ϙ, that no word is spelt in, so reading as one is
        # reading as no script's words: through them Москва, Россия and рф read as Latin)
        letters = [each for each in unicodedata.normalize("NFD", prototype)
                   if unicodedata.category(each).startswith("L") and _allowed(each)]
        for each in letters:
            found.setdefault(each, set()).update(_scripts(each))
        char = chr(code)
        if len(letters) == 1 and unicodedata.category(char).startswith("L"):
            # (a letter that reads as one letter; one that reads as several, a ligature, makes
            # none of them a lookalike of its script)
            found[letters[0]].update(_scripts(char))
    return {char: frozenset(scripts) for char, scripts in found.items()}


@lru_cache(maxsize=8192)
def _allowed(char: str) -> bool:
    """Whether ``char``'s Identifier_Status is Allowed (UTS #39, section 3.1)."""
    return bool(_range_value(_IDENTIFIERS, char))


def _restricted_letters(text: str, words: list[list[int]]) -> set[int]:
    """The positions of the Restricted letters (Identifier_Status, ``_allowed``) that read as
    other text (``_confusable``) in a word beside Allowed letters of their script: ``ɑ``, a
    technical letter, in ``pɑypal``, which reads as ``paypal`` (UTS #39, section 5.2: every
    level but Unrestricted takes Allowed characters alone). A word of Restricted letters alone,
    of a Limited_Use script (Cherokee ``ᏣᎳᎩ``) or an uncommon one, shows as it is (nothing of
    it reads as a word of its script), letters of two scripts are ``_mixed_letters``', and
    compatibility forms, Restricted as not NFKC, ``_variant_letters``' (``ｐaypal``; the Hangul
    letters of ``안녕ㅋㅋ`` show as they are)."""
    found: set[int] = set()
    for word in words:
        allowed = [_scripts(text[i]) for i in word if _allowed(text[i])]
        found.update(
            i for i in word if allowed and not _allowed(text[i])
            and unicodedata.is_normalized("NFKC", text[i]) and _confusable(text[i])
            and (not (own := _scripts(text[i])) or any(own & theirs for theirs in allowed)))
    return found


@lru_cache(maxsize=8192)
def _reads_as(char: str, script: str) -> bool:
    """Whether the letter ``char`` reads as a letter of ``script`` (each letter of its reading,
    ``_reading``, is one that letters of ``script`` read as: Cyrillic ``с`` and Latin ``c``)."""
    letters = [each for each in _reading(char) if unicodedata.category(each).startswith("L")]
    return bool(letters) and all(script in _lookalikes().get(each, ()) for each in letters)


def _whole_script_words(text: str, words: list[list[int]], escaped: set[int]) -> set[int]:
    """The positions of the letters of each word of one script, not all ASCII, all of whose
    letters read as letters of a script another word of the item is of (``сс`` in
    ``paypal.сс``, Cyrillic letters that read as the Latin ``cc``; ``ΑΑ``, Greek, in ``x.ΑΑ``:
    a whole-script confusable, UTS #39, section 4, within one item); again over what is left
    until nothing changes. ASCII is what the others are read against, and what escapes are
    written in: an ASCII word is never escaped so (``Москва Moscow``, ``Moscow`` though it reads
    as Cyrillic ``Мoѕсоw``, shows as it is)."""
    found = set(escaped)
    while True:
        left = [mine for word in words
                if (mine := [i for i in word if i not in found and _scripts(text[i])])]
        flagged: set[int] = set()
        for mine in left:
            own = frozenset.intersection(*(_scripts(text[i]) for i in mine))
            if not own or all(text[i].isascii() for i in mine):
                continue
            others = {name for other in left if other is not mine for i in other
                      for name in _scripts(text[i])} - own
            if any(all(_reads_as(text[i], name) for i in mine) for name in sorted(others)):
                flagged.update(mine)
        if not flagged:
            return found - escaped
        found |= flagged


def _foreign_letters(text: str) -> set[int]:
    """The positions of the letters to escape in a text whose words mix scripts that spoofs
    mix (module docstring): Restricted letters among Allowed ones (``_restricted_letters``); of
    each word not Highly Restrictive, the letters not of its main scripts (``_mixed_letters``);
    where variants of letters and plain ones mix, the kind there are fewer of (across words:
    ``a.ﬁ``); and each word of one script that reads as letters of
    another word's (``_whole_script_words``)."""
    # (most items' letters are all Allowed)
    restricted = (_restricted_letters(text, _words(text))
                  if any(char.isalpha() and not _allowed(char) for char in text) else set())
    every = {scripts for char in text if (scripts := _scripts(char))}
    if (not every or frozenset.intersection(*every)) and not any(map(_letter_variant, text)):
        return restricted  # (letters of one script: most items)
    words = _words(text)
    found = restricted.union(*(_mixed_letters(text, word) for word in words))
    found |= _variant_letters(text, [i for word in words for i in word if i not in found])
    return found | _whole_script_words(text, words, found)


_CONFUSABLES = os.path.join(os.path.dirname(__file__), "confusables.txt")


class _Readings(dict[int, str]):
    """Unicode's confusables.txt (UTS #39, section 4), as ``confusables.txt`` beside this module
    holds it (``gen_confusables.py`` writes it): each character that reads as other text, and
    the prototype it reads as (``с`` as ``c``, ``╱`` as ``/``, ``m`` as ``rn``); for the few
    font, width and compatibility variants it leaves out (``＠``, ``．``: identifiers, its use,
    are NFKC'd first), their NFKC form's prototypes, found when first met (``_variant``). For
    ``str.translate``."""

    def __init__(self) -> None:
        with open(_CONFUSABLES, encoding="utf-8") as lines:
            super().__init__(
                (int(char, 16), "".join(chr(int(code, 16)) for code in target.split()))
                for char, _, target in (line.partition(";") for line in lines
                                        if not line.startswith("#")))
        # (so that ASCII, most of most items, is found without __missing__'s LookupError)
        for code in range(0x80):
            self.setdefault(code, chr(code))

    def __missing__(self, code: int) -> str:
        base = _variant(chr(code))
        if base is None:
            raise LookupError(code)  # (translate leaves it as it is; not kept: items are many)
        self[code] = reading = base.translate(self)
        return reading


@lru_cache(maxsize=1)
def _prototypes() -> _Readings:
    """The ``_Readings``, read when a list is first shown, not when the module is imported."""
    return _Readings()


def _variant(char: str) -> str | None:
    """The NFKC form of a font, width or ligature variant of a letter (``_letter_variant``)
    or of ``_ascii_variant``; None for any other character."""
    return _letter_variant(char) or _ascii_variant(char)


@lru_cache(maxsize=4096)
def _ascii_variant(char: str) -> str | None:
    """The ASCII text that a digit's, number's or symbol's font, width or compatibility
    variant reads as, its NFKC form (``𝟷``, ``１``, ``𝟏`` as ``1``; the Roman numeral ``Ⅻ`` as
    ``XII``; ``＠`` as ``@``); None for any other character. Letters are
    ``_letter_variant``'s; the ellipsis, which reads as ``...``, is a cut prefix's mark with
    its own rule (module docstring)."""
    if char.isascii() or char == ELLIPSIS or unicodedata.category(char).startswith("L"):
        return None
    if unicodedata.decomposition(char).partition(" ")[0] not in ("<font>", "<wide>",
                                                                "<compat>"):
        return None  # (a superscript, a circled or a small form draws unlike its base)
    base = unicodedata.normalize("NFKC", char)
    return base if base.isascii() and base.isprintable() and not base.isspace() else None


def _reading(text: str) -> str:
    """What ``text`` reads as: its skeleton (UTS #39, section 4: its NFD form, each character
    mapped to its prototype, ``_prototypes``, then NFD again). So ``сосоа`` reads as
    ``cocoa``, ``１２３`` and ``𝟷𝟸𝟹`` as ``123``, ``Ⅻ`` as ``XII``, ``http://a.com╱x`` as
    ``http://a.com/x``; and ASCII as ASCII: ``1``, ``I`` and ``l`` alike, ``m`` as ``rn``.

    Mapped again until nothing changes: a prototype can hold a character that itself reads as
    another once NFD splits it (``Ǆ`` reads as ``D`` and the precomposed ``Ž``, whose caron
    reads as a breve), so one pass read ``Ǆ`` as ``DŽ`` with a caron and the two letters ``DŽ``
    with a breve, two readings, and the list showed the two items alike; ``Ǳ`` and ``DZ``,
    whose prototype holds no such character, were told apart."""
    reading = unicodedata.normalize("NFD", text)
    for _ in range(_READING_PASSES):
        again = unicodedata.normalize("NFD", reading.translate(_prototypes()))
        if again == reading:
            break
        reading = again
    return reading


# (confusables.txt's prototypes settle in one more pass; a bound, should a later table not)
_READING_PASSES = 4


@lru_cache(maxsize=4096)
def _confusable(char: str) -> bool:
    """Whether the non-ASCII ``char`` reads as other text (``_reading`` changes it: ``с``,
    ``１``, ``ё``), or other text reads as it where ASCII does (``%`` as ``º/₀``); not a letter
    whose NFD form alone differs (``é``)."""
    return not char.isascii() and (
        _reading(char) != unicodedata.normalize("NFD", char) or char in _ascii_prototypes())


@lru_cache(maxsize=1)
def _ascii_prototypes() -> frozenset[str]:
    """The non-ASCII characters that an ASCII one reads as (``%`` as ``º/₀``)."""
    return frozenset(char for code in range(0x20, 0x7F) for char in _reading(chr(code))
                     if not char.isascii())


def _confusable_chars(text: str) -> set[int]:
    """The positions of ``text``'s characters that ``_confusable`` escapes."""
    return {i for i, char in enumerate(text) if _confusable(char)}


def printable_rows(rows: Sequence[tuple[str, bool]],
                   context: Sequence[tuple[str, bool]] = ()) -> list[str]:
    """``printable(text, cut)`` of each of a list's ``(text, cut)`` rows, except where two
    rows would read alike: an item of Cyrillic letters that all look like Latin ones (``сосоа``)
    shows as it is alone, and so read as ``cocoa`` in a list that holds both. A row whose
    shown text reads as another row's different one (``_reading``), or a cut prefix whose text
    (before its tail) reads as the beginning of another row it does not begin (``сос\\xd0…``,
    which stands for items starting ``сос``, beside ``cocoa``: it read as ``cocoa``'s parent),
    shows its non-ASCII characters that read as other text, or that ASCII reads as, escaped
    (``\\u0441\\u043e\\u0441\\u043e\\u0430``; ``_confusable``), so the list's rows read apart;
    a row that reads as no other's, ``Москва`` or ``сосоа`` in a list without ``cocoa``, shows
    as ``printable`` shows it. ASCII is never escaped: it is what escapes are written in, so
    ASCII rows that read alike by UTS #39 (``rn`` and ``m``, ``l`` and ``1``) stay alike. Rows
    of one text (a cut prefix and a whole item, or one item twice) are left alike.
    ``context``: the rows of the lists shown beside this one (the cut prefixes beside the heavy
    hitters), read against, not returned."""
    every = [*rows, *context]
    shown = [printable(text, cut) for text, cut in every]
    reading = [_reading(text) for text in shown]
    flagged: set[int] = set()
    texts: dict[str, set[str]] = {}
    for text, read in zip(shown, reading, strict=True):
        texts.setdefault(read, set()).add(text)
    flagged.update(i for i, read in enumerate(reading) if len(texts[read]) > 1)
    order = sorted(range(len(every)), key=reading.__getitem__)
    keys = [reading[i] for i in order]
    texts_sorted = sorted(shown)
    for i, (text, cut) in enumerate(every):
        body = printable(text[:_cut_tail(text)], cut=True) if cut else ""
        if not body:
            continue
        read = _reading(body)
        # (every row that begins with the body reads as beginning with its reading, a prefix
        # read character by character: when as many rows do each, none reads so apart)
        lo, hi = _starting(keys, read)
        first, last = _starting(texts_sorted, body)
        if hi - lo == last - first:
            continue
        flagged.add(i)
        flagged.update(order[k] for k in range(lo, hi) if not shown[order[k]].startswith(body))
    return [printable(text, cut, confusable=True) if i in flagged else shown[i]
            for i, (text, cut) in enumerate(rows)]


def _starting(texts: list[str], prefix: str) -> tuple[int, int]:
    """The span of the sorted ``texts`` that begin with ``prefix`` (not empty; its last
    character not U+10FFFF, a noncharacter, which ``printable`` escapes)."""
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    return bisect.bisect_left(texts, prefix), bisect.bisect_left(texts, end)


# What a cut between two characters would split: a mark, a selector, a skin tone, a tag or a
# keycap on the character before, a joiner and the emoji it joins (UAX #29's extend rules).
_CLUSTER_GLUE = frozenset((0x200D, 0x20E3, *range(0xFE00, 0xFE10), *_SKIN_TONES,
                           *range(0xE0020, 0xE0080), *range(0xE0100, 0xE01F0)))
_REGIONAL = range(0x1F1E6, 0x1F200)  # (a flag is two of them)


# UAX #29 GB9c (Unicode 15.1): a consonant, a virama (Indic_Conjunct_Break=Linker) and a
# consonant are one cluster (क्ष), which a cut after the virama would show as a half-form.
# The consonants are DerivedCoreProperties.txt's InCB=Consonant, which unicodedata lacks.
_LINKERS = frozenset("\u094d\u09cd\u0acd\u0b4d\u0c4d\u0d4d")
_INDIC_CONSONANTS = frozenset(code for lo, hi in (
    (0x0915, 0x0939), (0x0958, 0x095F), (0x0978, 0x097F),  # Devanagari
    (0x0995, 0x09A8), (0x09AA, 0x09B0), (0x09B2, 0x09B2), (0x09B6, 0x09B9), (0x09DC, 0x09DD),
    (0x09DF, 0x09DF), (0x09F0, 0x09F1),  # Bengali
    (0x0A95, 0x0AA8), (0x0AAA, 0x0AB0), (0x0AB2, 0x0AB3), (0x0AB5, 0x0AB9),
    (0x0AF9, 0x0AF9),  # Gujarati
    (0x0B15, 0x0B28), (0x0B2A, 0x0B30), (0x0B32, 0x0B33), (0x0B35, 0x0B39), (0x0B5C, 0x0B5D),
    (0x0B5F, 0x0B5F), (0x0B71, 0x0B71),  # Oriya
    (0x0C15, 0x0C28), (0x0C2A, 0x0C39), (0x0C58, 0x0C5A),  # Telugu
    (0x0D15, 0x0D3A),  # Malayalam
) for code in range(lo, hi + 1))

# UAX #29 GB6-8: the Hangul_Syllable_Type that may follow each within one syllable. A jamo's
# type is its name's second word; a precomposed syllable is LV or LVT by its decomposition.
_JAMO_TYPES = {"CHOSEONG": "L", "JUNGSEONG": "V", "JONGSEONG": "T"}
_JAMO_FOLLOWING = {"L": {"L", "V", "LV", "LVT"}, "LV": {"V", "T"}, "V": {"V", "T"},
                   "LVT": {"T"}, "T": {"T"}}


def _hangul_type(char: str) -> str:
    """``char``'s Hangul_Syllable_Type (L, V, T, LV or LVT), or '' if it has none."""
    name = unicodedata.name(char, "")
    if name.startswith("HANGUL SYLLABLE "):
        return "LV" if len(unicodedata.normalize("NFD", char)) == 2 else "LVT"
    first, _, rest = name.partition(" ")
    return _JAMO_TYPES.get(rest.partition(" ")[0], "") if first == "HANGUL" else ""


def _conjunct_continues(text: str, n: int) -> bool:
    """Whether the consonant ``text[n]`` follows a consonant, a virama and marks (GB9c)."""
    linked, k = False, n - 1
    while k >= 0 and (text[k] in _LINKERS or text[k] == _JOINER
                      or unicodedata.category(text[k]) in ("Mn", "Me")):
        linked = linked or text[k] in _LINKERS
        k -= 1
    return linked and k >= 0 and ord(text[k]) in _INDIC_CONSONANTS


def _joins_previous(text: str, n: int) -> bool:
    """Whether ``text[n]`` is drawn as one with the character before it, so that a cut
    before it would show part of a grapheme cluster (a flag's first letter, a letter without
    its accent, a conjunct's half-form, a Hangul syllable's first jamo)."""
    char, before = text[n], text[n - 1]
    if ord(char) in _CLUSTER_GLUE or before == _JOINER or unicodedata.category(char) in (
            "Mn", "Me", "Mc"):
        return True
    if ord(char) in _REGIONAL:
        run = n
        while run > 0 and ord(text[run - 1]) in _REGIONAL:
            run -= 1
        return (n - run) % 2 == 1
    if ord(char) in _INDIC_CONSONANTS:
        return _conjunct_continues(text, n)
    kind = _hangul_type(char)
    return bool(kind) and kind in _JAMO_FOLLOWING.get(_hangul_type(before), ())


def fitted_row(text: str, cut: bool, width: int, confusable: bool = False
               ) -> tuple[str, bool]:
    """A row ``(text, cut)`` of ``printable_rows`` shown in at most ``width`` columns
    (``fitted``), a cut prefix (``Decoded.shown_cut``) too: one wider is cut further, to the
    beginning of its text that fits with its ``…``. Either is cut between grapheme clusters
    (not between a flag's two letters, a letter and its marks, an emoji and its joiner), unless
    the first cluster is itself wider (a letter under 500 marks): then between two of its
    characters, whose escapes are never split. ``confusable``: as ``fitted``."""
    if not cut:
        if not fitted(text, width, confusable)[1]:
            return text, False
        body = text
    else:
        if columns(printable(text, cut=True, confusable=confusable)) <= width:
            return text, True
        body = cut_item(text)
    # (a cluster's start may show wider than the characters after it, a joiner before the …
    # escaped: narrow until it fits)
    for narrower in range(width, 2, -1):
        shown, was_cut = fitted(body, narrower, confusable)
        n = len(cut_item(shown)) if was_cut else len(body)
        start = n
        while 0 < start < len(body) and _joins_previous(body, start):
            start -= 1
        shown = cut_text(body[:start or n]) + ELLIPSIS
        if columns(printable(shown, cut=True, confusable=confusable)) <= width:
            return shown, True
    return cut_text(body[:1]) + ELLIPSIS, True


def fitted_rows(rows: Sequence[tuple[str, bool]], width: int) -> list[tuple[str, bool]]:
    """``fitted_row`` of each of a list's rows, such that ``printable_rows`` of them shows
    each in at most ``width`` columns: a row that reads as another's shows its look-alike
    characters escaped, each ``\\uXXXX`` six columns or more, so it is fitted again with them
    counted. Before, ``сосоа…`` beside ``cocoa…``, each cut to 48 columns, showed in 283.
    The rows of every list shown together (one list's ``context``) are fitted at once."""
    shown_rows = [fitted_row(text, cut, width) for text, cut in rows]
    escaped: set[int] = set()
    while True:
        # (a row cut shorter may read as the beginning of another, which is escaped then)
        wide = {i for i, row in enumerate(printable_rows(shown_rows))
                if columns(row) > width} - escaped
        if not wide:
            return shown_rows
        for i in wide:
            shown_rows[i] = fitted_row(*shown_rows[i], width, confusable=True)
        escaped |= wide
