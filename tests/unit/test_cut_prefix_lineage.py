"""Cut prefixes read as parent and child only when they are (``Decoded.shown_cut``).

A prefix that stops inside a codeword showed only its whole characters: ``ab`` and 3 bits that
begin no ``c`` showed ``ab…``, which read as the parent of ``abc…`` (every item starting
``ab``) though no item under it starts ``abc``. It now shows the bits it holds of that codeword
(``ab⟨+3 bits⟩…``), so one shown text begins another's only when its bits begin the other's.
"""

from __future__ import annotations

import pytest

from fedhh.codec.codec import ELLIPSIS, Codec
from fedhh.codec.shown import printable

WIDE = 400
ITEMS = ("abc", "abd", "abz", "+1-555", "+1-5x", "007", "-0", "1e5", "café", "cafe\u0301",
         "東京", "東北", "שלום", "שלו", "👨\u200d👩\u200d👧", "👨🏽", "🇯🇵", "🇯🇴",
         "https://ex.org/a?b=1#frag", "https://ex.org/a?c", "alice@example.com", "alice@ex.org",
         "new york", "new\u00a0york", "a\\xf0b", "a\\b")


def _cut_prefixes(codec: Codec) -> dict[tuple[int, int], str]:
    """Every unended prefix of ``ITEMS``' codes, with its shown text less its ``…``."""
    shown = {}
    for item in ITEMS:
        code = codec.encode(item)
        for length in range(1, WIDE):
            prefix = code >> (WIDE - length)
            if codec.ended(prefix, length):
                break
            text = printable(codec.display(prefix, length), cut=True)
            assert text.endswith(ELLIPSIS)
            shown[(prefix, length)] = text[:-1]
    return shown


# (token codebooks write some texts in two ways: "+1-5" through a lone 5 began "+1-55" in text
# but not in bits, where 55 is a token; it now shows +1-5⟨+0 bits⟩…)
@pytest.mark.parametrize("book", ["english", "bytes", "german", "huffman", "5bit", "unicode",
                                  "general", "tokens"])
def test_a_shown_text_begins_another_only_where_its_bits_do(book: str) -> None:
    shown = _cut_prefixes(Codec(book, WIDE))
    misread = [(a, b) for (p, n), a in shown.items() for (q, m), b in shown.items()
               if a != b and b.startswith(a) and not (m > n and q >> (m - n) == p)]
    assert not misread, misread[:5]


def test_siblings_inside_a_codeword_do_not_read_as_parent_and_child() -> None:
    """The defect: ab and 3 bits of a codeword that is not c's against abc cut after it."""
    codec = Codec("english", WIDE)
    bits = codec.book.item_bits("abz")
    ab = len(codec.book.item_bits("ab")) - len(codec.book.end)
    c = codec.book.byte_bits(ord("c"))
    into = next(k for k in range(1, len(c)) if bits[ab:ab + k] != c[:k])
    sibling = codec.display(int(bits[:ab + into], 2), ab + into)
    abc = codec.book.item_bits("abc")[:ab + len(c) + 1]
    child = codec.display(int(abc, 2), len(abc))
    assert sibling == f"ab⟨+{into} bit{'s' if into > 1 else ''}⟩…"
    assert child.startswith("abc") and not child.startswith(sibling[:-1])
    # (a prefix that stops between characters is the parent of both, and shows so)
    parent = codec.display(int(bits[:ab], 2), ab)
    assert parent == "ab…" and sibling.startswith("ab") and child.startswith("ab")


def test_the_count_is_part_of_the_cut_tail() -> None:
    """printable takes the count as the tail: the joiner and the space before it are escaped
    as before a bare …, never taken into the text."""
    codec = Codec("unicode", WIDE)
    shown = _cut_prefixes(codec)
    family = [text for text in shown.values() if text.startswith("👨\\u200d⟨+")]
    assert family and all(text.endswith(("bit⟩", "bits⟩")) for text in family)
    spaced = [text for text in shown.values() if text.startswith("new\\x20⟨+")]
    assert spaced


@pytest.mark.parametrize("item", ["Москва", "Αθήνα", "pаypal"])
def test_the_counts_letters_are_not_the_items(item: str) -> None:
    """The Latin letters of ``⟨+N bits⟩`` are not the item's: a Cyrillic or Greek prefix
    shows as it is (Моск⟨+2 bits⟩… showed \\u041c\\u043e\\u0441\\u043a⟨+2 bits⟩…, its letters
    outnumbered by "bits" and escaped as a mixed-script item's), and a mixed one escapes
    what it escapes whole."""
    codec = Codec("unicode", WIDE)
    code = codec.encode(item)
    for length in range(1, WIDE):
        prefix = code >> (WIDE - length)
        if codec.ended(prefix, length):
            break
        decoded = codec.decode(prefix, length)
        if not decoded.open_bits or not decoded.text or decoded.partial:
            continue
        shown = printable(decoded.shown_cut, cut=True)
        assert shown.split("⟨+")[0] == printable(decoded.text), shown


def test_the_byte_escapes_letters_are_not_the_items() -> None:
    """Nor is the x of a byte's escape ``\\xd0`` (a guard beside the count's: a tie of one
    Cyrillic letter and that x would escape the letter)."""
    assert printable("М\\xd0…", cut=True) == "М\\xd0…"
    assert printable("Αθ\\xce⟨+2 bits⟩…", cut=True) == "Αθ\\xce⟨+2 bits⟩…"


def test_an_items_own_bracket_is_not_the_count() -> None:
    """The item ``x⟨+3 bits⟩y`` cut after its ``⟩`` showed ``x⟨+3 bits⟩…``, as ``x`` and 3
    bits of the next codeword do: a cut prefix's own ``⟨`` shows as ``\\u27e8``."""
    codec = Codec("unicode", WIDE)
    item = "x⟨+3 bits⟩y"
    code = codec.encode(item)
    shown = {}
    lengths = 0
    for length in range(1, WIDE):
        prefix = code >> (WIDE - length)
        if codec.ended(prefix, length):
            break
        shown[printable(codec.display(prefix, length), cut=True)] = length
        lengths += 1
    assert "x\\u27e8+3 bits⟩…" in shown and "x⟨+3 bits⟩…" in shown
    x = len(codec.book.item_bits("x")) - len(codec.book.end)
    assert shown["x⟨+3 bits⟩…"] == x + 3
    assert len(shown) == lengths  # (no two prefixes show alike)


@pytest.mark.parametrize("book", ["unicode", "general", "tokens"])
def test_a_lone_codeword_a_token_could_run_across_shows_it(book: str) -> None:
    """The defect: on token codebooks ``+1-5…``, a lone ``5`` codeword, read as the parent of
    ``+1-55…`` (a token ``55``), whose bits it does not begin. It shows ``+1-5⟨+0 bits⟩…``;
    ``+1-55``'s own prefix ends with a token that another (``555``?) may run across, or not,
    and a prefix no token can run across shows no count (``+1-…`` has ``-`` before a digit)."""
    codec = Codec(book, WIDE)
    assert b"55" in codec.book.tokens

    def cut_at(item: str, symbols: int) -> str:
        bits = "".join(codec.book.symbol_bits(s)
                       for s in codec.book.symbols_of(item.encode())[:symbols])
        return codec.display(int(bits, 2), len(bits))

    lone = cut_at("+1-5x", 4)
    assert codec.book.symbols_of(b"+1-5x")[3] == b"5"
    assert lone == "+1-5⟨+0 bits⟩…"
    token = cut_at("+1-555-0100", 4)
    assert token.startswith("+1-55") and not token.startswith(lone[:-1])
    # (the count is the cut's tail: printable leaves it as it is)
    assert printable(lone, cut=True) == lone
    # (a whole item is shown as it is, and a byte codebook never shows the count)
    assert codec.display(codec.encode("+1-5"), WIDE) == "+1-5"
    english = Codec("english", WIDE)
    bits = english.book.item_bits("+1-5x")[:-len(english.book.end)]
    five = len(bits) - len(english.book.byte_bits(ord("x")))
    assert english.display(int(bits[:five], 2), five) == "+1-5…"


def test_the_consoles_note_says_what_the_zero_count_means() -> None:
    """``fedhh simulate`` and ``fedhh up`` explain ``⟨+0 bits⟩`` under a list that shows it."""
    from fedhh.codec.shown import cut_marks_note

    assert "⟨+0 bits⟩: it ends between two codewords" in cut_marks_note(["+1-5⟨+0 bits⟩…"])
    assert "⟨+0 bits⟩" not in cut_marks_note(["ab⟨+3 bits⟩…"])
    assert cut_marks_note(["ab…"]) == ""
