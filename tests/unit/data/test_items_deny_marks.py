"""An item list line that begins or ends with an invisible direction mark is refused: the
console sets a Hebrew or Arabic item between two left-to-right marks (so that its row keeps
its columns), and an item copied from there into a --deny-list file named another item, which
then went through undenied."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.codec.shown import ljust, page_isolated, printable
from fedhh.data.wordlists import load_item_list, write_item_list
from fedhh.errors import DatasetError


@pytest.mark.parametrize("item", ["שלום", "مرحبا", "https://example.com/مرحبا"])
def test_an_item_copied_from_a_console_row_is_refused(tmp_path: Path, item: str) -> None:
    copied = ljust(printable(item), 30).strip()  # (what a mouse takes from the row)
    assert copied != item
    path = tmp_path / "deny.txt"
    path.write_text(f"plain\n{copied}\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"line 2: .* begins with an invisible direction "
                                           r"mark \(\\u200e\).*from --json"):
        load_item_list(path)


@pytest.mark.parametrize("item", ["שלום", "٣٤"])
def test_an_item_copied_from_the_web_demo_page_is_refused(tmp_path: Path, item: str) -> None:
    copied = page_isolated(printable(item))  # (the demo page's list sets it between isolates)
    assert copied != item
    path = tmp_path / "deny.txt"
    path.write_text(f"plain\n{copied}\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"line 2: .* begins with an invisible direction "
                                           r"mark \(\\u2068\).*web demo page"):
        load_item_list(path)


@pytest.mark.parametrize("mark", ["\u200e", "\u200f", "\u061c", "\u2066", "\u2067", "\u2068",
                                  "\u2069"])
def test_direction_marks_at_either_end_are_refused_inside_kept(tmp_path: Path,
                                                               mark: str) -> None:
    for item, end in ((f"{mark}abc", "begins"), (f"abc{mark}", "ends")):
        path = tmp_path / "deny.txt"
        path.write_text(item + "\n", encoding="utf-8")
        with pytest.raises(DatasetError, match=f"{end} with an invisible direction mark"):
            load_item_list(path)
        with pytest.raises(DatasetError, match="direction mark"):
            write_item_list([item], tmp_path / "out.txt")
    inside = f"a{mark}b"
    assert load_item_list(write_item_list([inside, "שלום"], tmp_path / "ok.txt")) == [
        inside, "שלום"]
