"""A cut row that stops inside a character shows the bytes of it the run found as ``\\xNN``
before its ``⟨+N bits⟩`` or ``…`` (``https://a.example/\\xe2…``, the first of the three bytes
of ``€``), and its ``prefix_bytes`` count them. The lists of `fedhh simulate` and `fedhh up`
said what ``⟨+N bits⟩`` is and left the byte unexplained, to be read as an escape of the
item's own; they now say it is the first bytes of the next character, and how many a
character takes."""

from __future__ import annotations

import pytest

from fedhh.codec.shown import cut_bytes, cut_marks_note, partial_bytes

BYTES = (", \\xNN before the … the first byte of the next character as UTF-8 writes it (2 to 4 "
         "bytes past ASCII), not enough to tell which; the row's bytes count them")


@pytest.mark.parametrize(("shown", "partial", "whole"), [
    ("https://a.example/\\xe2…", 1, 18),
    ("東\\xe4\\xba⟨+3 bits⟩…", 2, 3),
    ("ab⟨+2 bits⟩…", 0, 2),
    ("a\\\\xe2…", 0, 5),  # (the item's own backslash, doubled, then "xe2": no byte)
    ("a\\\\\\xe2…", 1, 2),  # (the item's backslash, then a byte)
    ("ab\\x1b…", 0, 3),  # (an ESC, whole in its one byte, shown escaped)
    ("ab\\x1b", 0, 3),  # (a whole item's text: no cut row)
])
def test_the_bytes_of_a_character_a_row_stops_inside(shown: str, partial: int,
                                                     whole: int) -> None:
    assert partial_bytes(shown) == partial
    assert cut_bytes(shown) == whole + partial


def test_the_note_says_what_a_rows_last_bytes_are() -> None:
    assert cut_marks_note(["https://a.example/\\xe2…"]) == BYTES
    assert cut_marks_note(["東\\xe4\\xba⟨+3 bits⟩…", "ab…"]) == (
        ", ⟨+N bits⟩ before the … the bits it holds of the next character's code, not enough "
        "to tell which character, \\xNN before the ⟨+N bits⟩ or … the first bytes of the next "
        "character as UTF-8 writes it (2 to 4 bytes past ASCII), not enough to tell which; the "
        "row's bytes count them")
    assert cut_marks_note(["ab⟨+2 bits⟩…"]) == (
        ", ⟨+N bits⟩ before the … the bits it holds of the next character's code, not enough "
        "to tell which character")
    assert cut_marks_note(["a\\\\xe2…", "ab…", "abc\\xe2", "ab\\x1b…"]) == ""


def test_fedhh_up_explains_the_cut_rows_marks_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """`fedhh up` reads the marks of its cut rows only: a whole item whose own text holds
    ``⟨+3 bits⟩`` has no codeword cut inside it (before, its list's note said what
    ``⟨+N bits⟩`` is for it, as for a cut row)."""
    from types import SimpleNamespace

    from fedhh.cli.up import _print_results
    from fedhh.v1 import coordinator_pb2 as pb

    hitters = [pb.HeavyHitter(item="x⟨+3 bits⟩", estimate=50.0, round=1, ended=True),
               pb.HeavyHitter(item="https://a.example/\\xe2…", estimate=40.0, round=2,
                              truncated=True, bits=160)]
    run = SimpleNamespace(run_id="demo", state="done", error="", eps_spent=1.0, eps_local=3.0,
                          rounds_released=2, config=pb.RunConfig(rounds=2), rounds=[])
    _print_results(run, SimpleNamespace(heavy_hitters=hitters, cut_prefixes=[]))
    out = capsys.readouterr().out
    assert "x⟨+3 bits⟩" in out
    assert f"stands for every item starting so{BYTES}; see --max-bits" in out


def test_fedhh_simulate_explains_the_truncated_items_marks_alone(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A whole item whose own text is escapes (``\\xc3\\xa9`` written out, as mis-decoded data
    holds it), cut to the list's column right after one, shows ``\\\\xc3…``: no byte of a
    character, and `fedhh simulate`'s note does not say it is (before, it read the column-cut
    rows as truncated items)."""
    from fedhh.cli.simulate import _hitters_table

    whole = "caf" + "\\xc3\\xa9" * 40
    hitters = [{"item": whole, "truncated": False, "ended": True, "estimate": 50.0, "round": 1},
               {"item": "ab⟨+2 bits⟩…", "truncated": True, "bits": 18, "prefix_bytes": 2,
                "estimate": 40.0, "round": 2}]
    for width in range(20, 40):  # (some column lands right after an escape)
        rows = [(whole[:width] + "…", True), ("ab⟨+2 bits⟩…", True)]
        _hitters_table(hitters, 10, "HINT", rows=rows)
        out = capsys.readouterr().out
        assert ("starting with those bits, ⟨+N bits⟩ before the … the bits it holds of the next "
                "character's code, not enough to tell which character; HINT)") in out, out
