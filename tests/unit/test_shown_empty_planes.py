"""Code points of planes 4 to 13, where nothing is assigned, draw as one box in every font:
the noise of the unicode codebook's raw continuations (``http://\\U00099ac4ai``, seen as a
false positive of `fedhh simulate`) showed as its neighbours did. They are escaped
(fedhh.codec.shown.printable); the unassigned code points of the other planes are not, where
this Python's Unicode tables may predate an item's newest emoji or ideographs."""

from __future__ import annotations

import pytest

from fedhh.codec.shown import printable


@pytest.mark.parametrize(("item", "shown"), [
    ("http://\U00099ac4ai", "http://\\U00099ac4ai"),
    ("\U00040000", "\\U00040000"), ("a\U000d1234b", "a\\U000d1234b"),
    ("\U0009abcd\u2026", "\\U0009abcd\\u2026"),
])
def test_empty_planes_are_escaped(item: str, shown: str) -> None:
    assert printable(item) == shown
    escape = next(f"\\U{ord(c):08x}" for c in item if ord(c) >= 0x40000)
    assert escape in printable(item, cut=True)  # (a cut prefix's too)


def test_noise_of_two_such_code_points_shows_apart() -> None:
    assert printable("x\U00099ac4") != printable("x\U00099ac5")


# (an emoji and CJK ideographs newer than some Pythons' tables: plane 1, plane 3)
@pytest.mark.parametrize("item", ["\U0001fae8", "\U0003134b", "\U00031350", "\U0002ebf0"])
def test_other_planes_show_as_they_are(item: str) -> None:
    assert printable(item) == item
