"""fedhh simulate (and fedhh up) names a deny-list item that no user holds while an item of the
dataset is the same but for case, compatibility forms or invisible characters (Unicode's
NFKC_Casefold, near enough) or whitespace at either end: a deny list matches items exactly, so
a list written in the data's original case denied nothing of a ``--lowercase`` import, one
copied from a web page with a no-break space or a zero-width space denied nothing, and one
whose cells a spreadsheet exported with a space at an end denied nothing, unsaid (before:
``Paris`` listed, ``paris`` found with no word; `` Paris`` listed, ``Paris`` found)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedhh.cli.simulate import warn_deny_twins
from fedhh.codec.shown import printable
from fedhh.data.dataset import load_dataset
from fedhh.data.text import import_text


def test_a_deny_item_held_in_another_case_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    warn_deny_twins(["Paris", "apple"], ("apple", "band", "paris"), np.array([0.5, 0.25, 0.25]))
    assert capsys.readouterr().err == (
        "fedhh simulate: warning: deny-list item Paris is no user's item, but paris, the same "
        "but for case, is an item of the dataset, held by 25.0% of the users, and is not "
        "denied: a deny list matches items exactly (docs/datasets.md); list that form too\n")


@pytest.mark.parametrize("listed, held", [
    ("STRASSE", "straße"), ("ΟΔΟΣ", "οδος"), ("paris", "PARIS"),
])
def test_full_case_folding_is_what_pairs_them(
        listed: str, held: str, capsys: pytest.CaptureFixture[str]) -> None:
    warn_deny_twins([listed], (held,))
    assert (f"deny-list item {listed} is no user's item, but {held}, the same but for case"
            in capsys.readouterr().err)


@pytest.mark.parametrize("listed, held", [
    ("new\xa0york", "new york"), ("x\u200b", "x"), ("\u2060x", "x"), ("ｐａｙｐａｌ", "paypal"),
    ("\ufb01nance", "Finance"), ("\u263a\ufe0e", "\u263a"),
])
def test_compatibility_forms_and_invisible_characters_pair_them(
        listed: str, held: str, capsys: pytest.CaptureFixture[str]) -> None:
    warn_deny_twins([listed], (held,))
    assert (", the same but for case, compatibility forms (width, ligatures, spaces) or "
            "invisible characters, is an item of the dataset" in capsys.readouterr().err)


@pytest.mark.parametrize("listed, held, what", [
    (" Paris", "Paris", "whitespace at either end"),  # (a cell exported from a sheet)
    ("paris", "Paris\t", "case and whitespace at either end"),
    ("new\xa0york\u3000", "new york", "case, compatibility forms (width, ligatures, spaces) or "
                                      "invisible characters, and whitespace at either end"),
])
def test_whitespace_at_either_end_pairs_them(
        listed: str, held: str, what: str, capsys: pytest.CaptureFixture[str]) -> None:
    warn_deny_twins([listed], (held,))
    assert (f"is no user's item, but {printable(held)}, the same but for {what}, is an item of "
            "the dataset" in capsys.readouterr().err)


def test_a_lowercase_import_of_turkish_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "users.txt"
    source.write_text("İstanbul\nİstanbul Ankara\n", encoding="utf-8")
    dataset = load_dataset(import_text(source, tmp_path / "ds", lowercase=True))
    warn_deny_twins(["İstanbul", "Ankara"], dataset.vocabulary)
    err = capsys.readouterr().err.splitlines()
    assert [line.split(", the same")[0] for line in err] == [
        "fedhh simulate: warning: deny-list item Ankara is no user's item, but ankara",
        "fedhh simulate: warning: deny-list item İstanbul is no user's item, but "
        "i\\u0307stanbul"]


@pytest.mark.parametrize("items, vocabulary", [
    (["paris"], ("Paris", "paris")),  # the item is held: the list does what it says
    (["Paris", "paris"], ("paris",)),  # both denied
    (["Paris"], ("london",)),
    ([" "], ("\u200b",)),  # (whitespace alone is kept: not an invisible item's twin)
    (["\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"],
     ("\U0001f3f4",)),  # (a flag's tags draw it: the black flag alone is another item)
])
def test_nothing_is_said_otherwise(items: list[str], vocabulary: tuple[str, ...],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    warn_deny_twins(items, vocabulary)
    assert capsys.readouterr().err == ""
