"""``wide_encoding_problem`` names UTF-16 text UTF-16, never UTF-32, whatever its characters:
before, UTF-16 text whose every other character is a control character U+0001 to U+0010
(``"\\x02\\n"`` in UTF-16BE is 00 02 00 0A, U+2000A in UTF-32BE) was called UTF-32 by every
reader that sniffs (input files, --codec FILE, deny lists, vocab.txt). Text written in UTF-32
is named UTF-32 as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.data.text import import_text
from fedhh.errors import DatasetError
from fedhh.input_files import wide_encoding_problem

# Text a file holds: assigned characters, no NUL (UTF-8 text with NULs is read as such), no
# private use; control characters U+0001..U+0010 drawn often, as they are what pairs into
# supplementary points.
CONTROLS = st.characters(min_codepoint=1, max_codepoint=0x10)
TEXT_CHARS = st.characters(blacklist_categories=("Cn", "Co", "Cs"), blacklist_characters="\x00")
# A control character every other one, on either side (UTF-16BE pairs the first of two into a
# UTF-32BE unit's high half, UTF-16LE the second): the texts that read as UTF-32 too.
alternating = st.lists(st.tuples(CONTROLS, st.one_of(CONTROLS, TEXT_CHARS)), min_size=1,
                       max_size=40).flatmap(lambda pairs: st.sampled_from([
                           "".join(k + c for k, c in pairs), "".join(c + k for k, c in pairs)]))
texts = st.one_of(st.text(st.one_of(CONTROLS, TEXT_CHARS), min_size=2, max_size=80),
                  alternating)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(text=texts, encoding=st.sampled_from(["utf-16-le", "utf-16-be"]))
def test_utf16_text_is_never_called_utf32(text: str, encoding: str) -> None:
    said = wide_encoding_problem(text.encode(encoding))
    assert said is None or "UTF-32" not in said, (text, said)


@settings(max_examples=400, deadline=None, derandomize=True)
# (U+FEFF first would be the byte order mark)
@given(text=texts, bmp=st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cn", "Cs"),
                                     blacklist_characters="\x00\ufeff"),
       order=st.sampled_from(["LE", "BE"]))
def test_utf32_text_holding_a_bmp_character_is_still_utf32(text: str, bmp: str,
                                                           order: str) -> None:
    said = wide_encoding_problem((bmp + text).encode(f"utf-32-{order.lower()}"))
    assert said is not None and said.startswith(f"it looks UTF-32{order} without"), said


@pytest.mark.parametrize(("text", "encoding", "said"), [
    ("\x02\x02\x02\x02", "utf-16-be", "it looks UTF-16BE without"),  # (was UTF-32BE)
    ("\x02\x02\x02\x02", "utf-16-le", "it looks UTF-16LE without"),  # (was UTF-32LE)
    ("\x01\x02\x03\x04", "utf-16-be", "it looks UTF-16BE without"),  # (was UTF-32BE)
    ("中\x02文\x02", "utf-16-le", "it looks UTF-16LE without"),  # (was UTF-32LE)
    ("\U0001F600\U0001F601", "utf-32-le", "it looks UTF-32LE without"),  # emoji only
    ("\U0001F600\U0001F601", "utf-32-be", "it looks UTF-32BE without"),
])
def test_the_reading_that_is_text_is_named(text: str, encoding: str, said: str) -> None:
    assert (wide_encoding_problem(text.encode(encoding)) or "").startswith(said)


def test_a_text_file_of_control_characters_in_utf16be_is_called_utf16(tmp_path: Path) -> None:
    source = tmp_path / "users.txt"
    source.write_bytes("\x02\n\x03\n".encode("utf-16-be"))
    with pytest.raises(DatasetError, match="it looks UTF-16BE without a byte order mark"):
        import_text(source, tmp_path / "ds")
    assert not (tmp_path / "ds").exists()
