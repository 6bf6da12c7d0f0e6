"""``fedhh simulate``'s lists keep their item column at most 48 columns wide (or the heading's):
a longer item (a URL the completion rounds found whole, up to 1,024 bits) or cut prefix is cut
to it, ending in … (``fitted_row``), with a line saying so, and a row's note comes last,
pushing nothing. Before, every row was padded to the longest, so one 150-column URL made each
row of the list 160 columns, wrapped on any terminal; then the long item pushed its own row's
figures on, out of line with the others'."""

from __future__ import annotations

import pytest

from fedhh.cli.simulate import ITEM_COLUMNS_MAX, print_summary
from fedhh.codec.shown import columns

LONG = "https://example.com/" + "a" * 130


def _payload() -> dict:
    def hit(item: str, estimate: float, round_: int, **more: object) -> dict:
        return {"item": item, "estimate": estimate, "std": 9.0, "round": round_,
                "truncated": False, "ended": True, "bits": 60, "note": "", **more}

    cut = [hit("東京\\xe9…", 90.0, 8, truncated=True, ended=False, cause="lost in round 9"),
           hit("wait…", 80.0, 8, truncated=True, ended=False, cause="no rounds left",
               note="2 cut prefixes show this text (they differ only after its last byte); "
                    "the estimate is their sum")]
    return {"dataset": {"name": "d", "users": 10, "vocabulary": 3},
            "privacy": {"eps_agg": 1.0}, "rounds": [], "earlier_runs": [],
            "heavy_hitters": [hit("new", 100.0, 1), hit(LONG, 95.0, 20), hit("東京", 50.0, 3)],
            "cut_prefixes": cut, "deny_list": [], "metrics": {},
            "timings": {"total_s": 1.0, "rounds_s": 1.0}}


def test_a_long_item_is_cut_to_the_column(capsys: pytest.CaptureFixture[str]) -> None:
    print_summary(_payload(), top=20)
    lines = capsys.readouterr().out.splitlines()
    new = next(line for line in lines if " new " in line)
    head = next(line for line in lines if line.lstrip().startswith("#"))
    long = next(line for line in lines if "https://example.com/" in line)
    # (every row's counts end where the heading's do: the long one's too)
    assert len(new) == len(head) == columns(long)
    assert long.split()[1:] == [LONG[:ITEM_COLUMNS_MAX - 1] + "…", "95", "9", "20"]
    assert LONG not in "\n".join(lines)
    assert ("(1 listed here is wider than the item column's 48 columns, cut to them ending in "
            "…: each stands for its item, which begins so; --json gives it whole)") in lines
    cut_head = next(line for line in lines if line.rstrip().endswith("why"))
    tokyo = next(line for line in lines if "東京\\xe9…" in line)
    assert tokyo.index("東京") < ITEM_COLUMNS_MAX
    assert len(cut_head) <= ITEM_COLUMNS_MAX + 50
    assert "the estimate is their sum" in next(line for line in lines if "wait…" in line)


# (a 2 kB URL, 300 flags, a letter under 500 marks after two, CJK, and a cut prefix of 300
# characters with a character's first byte and 3 bits of the next codeword)
@pytest.mark.parametrize(("item", "truncated", "shown"), [
    ("http://x.io/" + "q" * 2000, False, "http://x.io/" + "q" * 35 + "…"),
    ("\U0001f1fa\U0001f1f8" * 300, False, "\U0001f1fa\U0001f1f8" * 11 + "…"),
    ("ab" + "z" + "\u0300\u0301\u0302\u0303" * 125, False, "ab…"),
    ("東京" * 40, False, "東京" * 11 + "東…"),
    ("x" * 300 + "\\xc3⟨+3 bits⟩…", True, "x" * 47 + "…"),
])
def test_each_long_row_keeps_its_figures_in_line(capsys: pytest.CaptureFixture[str],
                                                 item: str, truncated: bool,
                                                 shown: str) -> None:
    payload = _payload()
    hitters = payload["heavy_hitters"] if not truncated else payload["cut_prefixes"]
    hitters[0].update(item=item, truncated=truncated)
    payload["heavy_hitters"][1]["item"] = "short"
    print_summary(payload, top=20)
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if shown in line)
    assert columns(shown) <= ITEM_COLUMNS_MAX
    if truncated:
        head = next(line for line in lines if line.rstrip().endswith("why"))
        assert columns(row[:row.index("lost in round 9")]) == columns(head[:head.index("why")])
        assert row.split()[1:4] == ["90", "9", "8"]
    else:
        head = next(line for line in lines if line.lstrip().startswith("#"))
        assert columns(row) == len(head) and row.split()[-3:] == ["100", "9", "1"]
    assert sum(line.startswith("(1 listed here is wider than the item column's 48 columns")
               for line in lines) == 1


def test_a_rows_note_keeps_its_counts_in_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A note comes last, after the cause (cut prefixes) or in a note column (heavy
    hitters): in the item's cell it pushed its row's estimate, std and round to the right of
    the other rows'."""
    payload = _payload()
    payload["heavy_hitters"][2]["note"] = ("2 cut prefixes show this text (they differ only "
                                           "after its last byte); the estimate is their sum")
    print_summary(payload, top=20)
    lines = capsys.readouterr().out.splitlines()

    def round_ends(line: str, after: str) -> int:
        """The column where the row's round ends: before its cause or note."""
        return columns(line[:line.index(after)].rstrip())

    cut_head = next(line for line in lines if line.rstrip().endswith("why"))
    wait = next(line for line in lines if "wait…" in line)
    tokyo = next(line for line in lines if "東京\\xe9…" in line)
    assert round_ends(wait, "no rounds left") == round_ends(cut_head, "why") \
        == round_ends(tokyo, "lost in round 9")
    assert wait.endswith("no rounds left; 2 cut prefixes show this text (they differ only "
                         "after its last byte); the estimate is their sum")
    head = next(line for line in lines if line.lstrip().startswith("#"))
    noted = next(line for line in lines if "東京" in line and "2 cut" in line)
    new = next(line for line in lines if " new " in line)
    assert round_ends(noted, "2 cut") == round_ends(head, "note") == columns(new.rstrip())


def test_rows_cut_alike_are_said_to_be_different_items(
        capsys: pytest.CaptureFixture[str]) -> None:
    """URLs that share the column's width of beginning (query strings differing at the end)
    show as one cut text: the note says how many of the rows so are different items (before,
    three rows reading as one URL listed three times, nothing said so)."""
    payload = _payload()
    stem = "https://example.com/search?q=" + "x" * 60 + "&page="
    payload["heavy_hitters"] = [payload["heavy_hitters"][0]] + [
        {**payload["heavy_hitters"][1], "item": stem + page, "estimate": 95.0 - i}
        for i, page in enumerate("123")]
    print_summary(payload, top=20)
    lines = capsys.readouterr().out.splitlines()
    shown = stem[:ITEM_COLUMNS_MAX - 1] + "…"
    assert sum(shown in line for line in lines) == 3
    assert ("(3 listed here are wider than the item column's 48 columns, cut to them ending "
            "in …: each stands for its item, which begins so; 3 of them show alike, different "
            "items whose difference lies past the column; --json gives them whole)") in lines
    payload["heavy_hitters"][2]["item"] = "https://example.com/" + "b" * 60
    print_summary(payload, top=20)
    assert "2 of them show alike" in capsys.readouterr().out
