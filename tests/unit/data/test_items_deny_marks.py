"""An item list line that begins or ends with an invisible direction mark is refused: the
console sets a Hebrew or Arabic item between two left-to-right marks (so that its row keeps
its columns), and an item copied from there into a --deny-list file named another item, which
then went through undenied."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fedhh.codec.shown import ljust, page_isolated, printable
from fedhh.data.wordlists import load_item_list, write_item_list
from fedhh.errors import DatasetError


def _console_row(item: str) -> str:
    return ljust(printable(item), 30).strip()  # (what a mouse takes from the row)


def _page_list(item: str) -> str:
    return page_isolated(printable(item))  # (the demo page's list sets it between isolates)


@pytest.mark.parametrize(("copy", "item", "refusal"), [
    *((_console_row, item, r"\(\\u200e\).*from --json")
      for item in ("שלום", "مرحبا", "https://example.com/مرحبا")),
    *((_page_list, item, r"\(\\u2068\).*web demo page") for item in ("שלום", "٣٤")),
])
def test_an_item_copied_from_where_it_is_shown_is_refused(
        tmp_path: Path, copy: Callable[[str], str], item: str, refusal: str) -> None:
    copied = copy(item)
    assert copied != item
    path = tmp_path / "deny.txt"
    path.write_text(f"plain\n{copied}\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"line 2: .* begins with an invisible direction "
                                           r"mark " + refusal):
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
