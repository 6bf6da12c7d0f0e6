"""fedhh simulate names a deny-list item whose other normalization form (NFC or NFD) is an item
of the dataset, whether or not a user holds the item listed, and one that no user holds while
the same without a leading byte-order mark is an item: a deny list matches items exactly, so
that form is not denied (before, nothing said so, and where the data held both forms nothing
said so either)."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import numpy as np
import pytest

from fedhh.cli.main import main
from fedhh.cli.simulate import warn_deny_twins
from fedhh.data.wordlists import load_item_list

NFC = "caf\u00e9"
NFD = unicodedata.normalize("NFD", NFC)


def test_a_deny_item_whose_other_form_is_held_is_named(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    warn_deny_twins([NFC, "apple"], ("apple", NFD, "band"), np.array([0.5, 0.25, 0.25]))
    err = capsys.readouterr().err
    assert err == ("fedhh simulate: warning: deny-list item caf\u00e9 is no user's item, but "
                   "its NFD form cafe\\u0301 is an item of the dataset, held by 25.0% of the "
                   "users, and is not denied: a deny list matches items exactly "
                   "(docs/datasets.md); list that form too\n")
    warn_deny_twins([NFD], (NFC,), None)
    assert "deny-list item cafe\\u0301 is no user's item, but its NFC form caf\u00e9 is an " \
           "item of the dataset, and is not denied" in capsys.readouterr().err


def test_a_held_deny_item_whose_other_form_is_held_too_is_named(
        capsys: pytest.CaptureFixture[str]) -> None:
    # (devices of two systems write the word in two forms: the list denied the one it names
    # and let the other through, unsaid, because a user held the one named)
    warn_deny_twins([NFC, "apple"], (NFC, "apple", NFD), np.array([0.25, 0.5, 0.25]))
    assert capsys.readouterr().err == (
        "fedhh simulate: warning: deny-list item caf\u00e9 denies that form alone: its NFD "
        "form cafe\\u0301 is an item of the dataset, held by 25.0% of the users, and is not "
        "denied: a deny list matches items exactly (docs/datasets.md); list that form too\n")
    # (past the lines, the count says what they are whether held or not)
    items = [f"caf\u00e9{i}" for i in range(12)]
    warn_deny_twins(items, (*items, *(unicodedata.normalize("NFD", i) for i in items)))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 11 and err[0].startswith("fedhh simulate: warning: deny-list item "
                                                "caf\u00e90 denies that form alone")
    assert err[-1].startswith("fedhh simulate: warning: 2 more deny-list items leave an item "
                              "of the dataset undenied: their other normalization form")


def test_simulate_names_the_other_form_where_the_data_holds_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "users.jsonl"
    data.write_text(f'["{NFC}"]\n["{NFD}"]\n["tea"]\n["tea"]\n', encoding="utf-8")
    listed = tmp_path / "deny.txt"
    listed.write_text(f"{NFC}\n", encoding="utf-8")
    main(["simulate", "--dataset", str(data), "--deny-list", str(listed), "--eps-agg", "8",
          "--seed", "1", "--quiet"])
    assert (f"fedhh simulate: warning: deny-list item {NFC} denies that form alone: its NFD "
            "form cafe\\u0301 is an item of the dataset, held by 25.0% of the users, and is "
            "not denied") in capsys.readouterr().err


@pytest.mark.parametrize("items, vocabulary", [
    ([NFC, NFD], (NFD,)),     # both forms denied
    ([NFC, NFD], (NFC, NFD)),
    ([NFC], (NFC,)),          # the other form held by no user
    ([NFC], ("apple",)),      # no form held
    (["apple"], ("apple",)),  # no other form
    ([], (NFD,)),
])
def test_nothing_is_said_otherwise(items: list[str], vocabulary: tuple[str, ...],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    warn_deny_twins(items, vocabulary)
    assert capsys.readouterr().err == ""


def test_many_are_counted_past_the_lines(capsys: pytest.CaptureFixture[str]) -> None:
    items = [f"caf\u00e9{i}" for i in range(12)]
    warn_deny_twins(items, tuple(unicodedata.normalize("NFD", i) for i in items), lines=10)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 11 and err[-1].startswith("fedhh simulate: warning: 2 more deny-list")


def test_a_deny_item_held_without_its_leading_mark_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (two lists joined with cat: the second's byte-order mark begins line 2, kept as the
    # item's own by the reader, so the list named "\ufeffa", which no user holds, and "a" went
    # through unsaid)
    listed = tmp_path / "deny.txt"
    listed.write_bytes(b"\xef\xbb\xbfok\n\xef\xbb\xbfa\n")
    items = load_item_list(listed)
    assert items == ["ok", "\ufeffa"]
    warn_deny_twins(items, ("a", "b"), np.array([0.75, 0.25]))
    assert capsys.readouterr().err == (
        "fedhh simulate: warning: deny-list item \\ufeffa is no user's item, but a, the same "
        "without the byte-order mark (U+FEFF) it begins with, is an item of the dataset, held "
        "by 75.0% of the users, and is not denied: a deny list matches items exactly "
        "(docs/datasets.md); delete the mark (a file joined after another, with cat, brings "
        "its own there)\n")
    warn_deny_twins(["\ufeffa", "a"], ("a",))  # (both denied)
    warn_deny_twins(["\ufeffa"], ("a", "\ufeffa"))  # (the item with the mark is held)
    warn_deny_twins(["\ufeff"], ("a",))  # (a mark alone)
    assert capsys.readouterr().err == ""


def test_fedhh_up_warns_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    # (before anything starts: here the two users are refused as too few for a round after it)
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "users.jsonl"
    data.write_text(f'["{NFD}", "a"]\n["a"]\n', encoding="utf-8")
    listed = tmp_path / "deny.txt"
    listed.write_bytes(f"{NFC}\n".encode() + b"\xef\xbb\xbfa\n")
    with pytest.raises(SystemExit):
        main(["up", "--dataset", str(data), "--deny-list", str(listed), "--insecure"])
    err = capsys.readouterr().err
    assert (f"fedhh up: warning: deny-list item {NFC} is no user's item, but its NFD form "
            "cafe\\u0301 is an item of the dataset, and is not denied") in err
    assert ("fedhh up: warning: deny-list item \\ufeffa is no user's item, but a, the same "
            "without the byte-order mark") in err
    assert "a round needs at least 3 devices" in err
