"""`fedhh data inspect` says which items are longer than the codes can be (4,096 bits at the
default codebook), which a run can only show cut: an item of 1,023 small letters and one of
1,024 were listed alike, the one a run finds whole and the other it never can."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_kit import run_cli

from fedhh.codec import MAX_SUPPORTED_BITS, Codec

FITS = "a" * 1023
PAST = "a" * 1024
ZWJ = "\U0001f469\u200d\U0001f4bb"  # (woman technologist: a ZWJ sequence)


def _write(tmp_path: Path, users: list[list[str]]) -> Path:
    path = tmp_path / "long.jsonl"
    path.write_text("".join(json.dumps(user, ensure_ascii=False) + "\n" for user in users),
                    encoding="utf-8")
    return path


def test_the_items_a_run_cannot_give_whole_are_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    codec = Codec("unicode", MAX_SUPPORTED_BITS)
    zwj_fits, zwj_past = ZWJ * 49, ZWJ * 50
    assert codec.encode_many([FITS, PAST, zwj_fits, zwj_past]).truncated.tolist() == [
        False, True, False, True]
    users = [[FITS]] * 3 + [[PAST]] * 2 + [[zwj_fits]] + [[zwj_past, "word"]] * 4 + [["word"]]
    data = _write(tmp_path, users)
    code, out, _ = run_cli(["data", "inspect", str(data)], capsys)
    assert code == 0
    note = next(line for line in out.splitlines() if "longer than the codes" in line)
    assert note.startswith("  2 items are longer than the codes can be with the unicode "
                           "codebook (4,096 bits): a run shows each cut there")
    # (the more held first, each cut to the note's columns, with its share of the users)
    assert note.index(ZWJ * 3) < note.index("a" * 30)
    assert "(36.36% of the users)" in note and "(18.18% of the users)" in note
    code, out, _ = run_cli(["data", "inspect", str(data), "--json"], capsys)
    past = json.loads(out)["past_the_codes"]
    # (the shape `fedhh simulate --json` gives at a run's own codes: users holding one,
    # and each item's whole code's bits, null past the codes' limit)
    assert past == {"codec": "unicode", "bits": 4096, "items": 2,
                    "users": pytest.approx(6 / 11), "heaviest": [
                        {"item": zwj_past, "unweighted": pytest.approx(4 / 11),
                         "needs_bits": None},
                        {"item": PAST, "unweighted": pytest.approx(2 / 11),
                         "needs_bits": None}]}


def test_nothing_is_said_when_every_item_fits(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    users = [[FITS], ["word", ZWJ * 49], ["\u00e9" * 200]]
    assert not Codec("unicode", MAX_SUPPORTED_BITS).encode_many(
        [item for user in users for item in user]).truncated.any()
    data = _write(tmp_path, users)
    code, out, _ = run_cli(["data", "inspect", str(data)], capsys)
    assert code == 0 and "longer than the codes" not in out
    code, out, _ = run_cli(["data", "inspect", str(data), "--json"], capsys)
    assert json.loads(out)["past_the_codes"] == {"codec": "unicode", "bits": 4096, "items": 0,
                                                 "users": 0.0, "heaviest": []}


def test_the_byte_bound_skips_no_item_past_the_codes() -> None:
    """Only items of enough UTF-8 bytes to need the codes' bits at the book's dearest byte are
    encoded: a run of that byte just long enough to be cut is found, one byte less is not."""
    from fedhh.data.long_items import past_codes

    codec = Codec("unicode", MAX_SUPPORTED_BITS)
    dear = chr(max(range(128), key=lambda b: len(codec.book.item_bits(chr(b)))))
    low, high = 1, MAX_SUPPORTED_BITS  # (the least run of it that is cut, by bisection)
    while low < high:
        middle = (low + high) // 2
        if codec.encode_many([dear * middle]).truncated[0]:
            high = middle
        else:
            low = middle + 1
    vocabulary = (dear * (low - 1), dear * low)
    assert past_codes(vocabulary, codec).tolist() == [1]
