"""A joiner (U+200D, U+200C) is shown as it is only between two characters it joins: two
emoji (a ZWJ sequence), or two characters of a script whose words hold joiners (a conjunct, a
Persian half-space). Before, one after an emoji or such a letter was kept whatever followed:
``👨\\u200d7`` (the unicode codebook's noise after the man and the joiner, a cut prefix of a
networked run) showed as ``👨‍7``, which a terminal, the dashboard and a sheet draw as ``👨7``,
another item; so did ``क\\u200da`` as ``कa``."""

from __future__ import annotations

import pytest

from fedhh.codec.shown import printable, printable_rows


@pytest.mark.parametrize(("joined", "plain", "shown"), [
    ("👨\u200d7", "👨7", "👨\\u200d7"),
    ("👨\u200dab", "👨ab", "👨\\u200dab"),
    ("👍🏽\u200dx", "👍🏽x", "👍🏽\\u200dx"),  # (after a skin tone)
    ("❤️\u200d1", "❤️1", "❤️\\u200d1"),  # (after VS16)
    ("क\u200da", "कa", "\\u0915\\u200da"),  # (क escaped too: Devanagari and Latin in one word)
    ("क\u200d1", "क1", "क\\u200d1"),
    ("می\u200c7", "می7", "می\\u200c7"),
    # (before, the first joiner was kept before the second's escape: 👨‍\u200c7 read as
    # 👨\u200c7, the item 👨 ZWNJ 7 as shown)
    ("👨\u200d\u200c7", "👨\u200c7", "👨\\u200d\\u200c7"),
    # (no emoji sequence holds ZWNJ: between two emoji it was kept, and read 👨👩)
    ("👨\u200c👩", "👨👩", "👨\\u200c👩"), ("❤️\u200c🔥", "❤️🔥", "❤️\\u200c🔥"),
    # (beside a symbol shown escaped a joiner joins nothing drawn: before, kept, it read as the
    # item without it)
    ("\u2800\u200d👨", "\u2800👨", "\\u2800\\u200d👨"),
    ("👨\u200d\u2800", "👨\u2800", "👨\\u200d\\u2800"),
    ("\ufffd\u200d👨", "\ufffd👨", "\\ufffd\\u200d👨"),
])
def test_a_joiner_that_joins_nothing_is_escaped(joined: str, plain: str, shown: str
                                                 ) -> None:
    # (``plain`` is what the joined item read as before)
    assert printable(joined) == shown
    assert printable_rows([(joined, False), (plain, False)]) == [shown, printable(plain)]


@pytest.mark.parametrize("item", [
    "👨\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "🏳️\u200d⚧️", "🤷\u200d♂️", "👨🏽\u200d🦰",
    "🧑\u200d🤝\u200d🧑", "👁️\u200d🗨️", "❤️\u200d🔥", "🐻\u200d❄️", "😮\u200d💨",
    "क्\u200dष", "می\u200cخواهم",
    # (emoji whose category is Sm, not So: ↔ of head shaking, RGI since Emoji 15.1; before,
    # its joiner was escaped)
    "🙂\u200d↔️", "🙂\u200d↕️", "🏃\u200d➡️", "👩🏽\u200d💻", "🧑🏿\u200d🤝\u200d🧑🏻",
])
def test_a_joiner_that_joins_is_kept(item: str) -> None:
    assert printable(item) == item


@pytest.mark.parametrize(("old", "atomic", "shown"), [
    ("ന്\u200dറ", "ൻറ", "ന്\\u200dറ"),  # (before: both shown as ൻറ)
    ("ക്\u200dഷ", "ൿഷ", "ക്\\u200dഷ"),
    ("അവന്\u200d", "അവൻ", "അവന്\\u200d"), ("അവന്\u200d വന്നു", "അവൻ വന്നു", "അവന്\\u200d വന്നു"),
])
def test_a_chillus_old_spelling_shows_its_joiner(old: str, atomic: str, shown: str) -> None:
    """A Malayalam chillu spelt as before Unicode 5.1 (consonant, virama, ZWJ) draws as the
    atomic chillu: its ZWJ is escaped wherever it stands, the atomic letter shows as it is.
    Before, only one at the end of a word or before a space was; inside a word the two
    spellings showed alike."""
    assert printable(old) == shown
    assert printable(atomic) == atomic
    assert printable_rows([(old, False), (atomic, False)]) == [shown, atomic]


@pytest.mark.parametrize("item", ["ന്\u200cറ", "ച്\u200dച", "ന്റ"])
def test_a_malayalam_joiner_that_spells_no_chillu_is_kept(item: str) -> None:
    # (ZWNJ keeps the virama visible; ച has no chillu)
    assert printable(item) == item
