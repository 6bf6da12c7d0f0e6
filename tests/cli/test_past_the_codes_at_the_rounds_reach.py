"""Before the first round, `fedhh up` and `fedhh simulate` count the items past the bits of code
their rounds can complete, where later completion rounds have a threshold above the devices:
300 devices at eps_agg 2 complete items within 80 bits (rounds 6-7 need ~487 devices), and the
warning counted past the codes' 112 bits beside the note that said 80. The note suggests
--completion-weight 1 only where it completes some item more (it brings the rounds within the
devices to 112 bits here): before, it suggested it also where no item fit that."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_run_items_past_the_codes import FakeTopology, Started, _write

from fedhh.rpc import topology

URL, ADDRESS = "https://www.example.com/products/item43", "john.sam@example.com"  # 152, 118 bits
DOTTED = "hello.world.x"  # (84 bits: past 80, within 112)


def up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
       long: list[str]) -> str:
    from fedhh.cli.main import main

    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(topology, "LocalTopology", FakeTopology)
    users = [[f"w{u % 5}", long[u % len(long)]] for u in range(300)]
    with pytest.raises(Started):
        main(["up", "--dataset", str(_write(tmp_path, users)), "--insecure"])
    return capsys.readouterr().err


def test_the_warning_counts_past_the_bits_the_rounds_complete(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    err = up(tmp_path, monkeypatch, capsys, [URL, ADDRESS])
    assert ("fedhh up: warning: 2 items held by 100.0% of the users are longer than the 80 bits "
            "of code this run's rounds complete (of its codes' 112; the note below says why)"
            ) in err, err
    assert "More completion rounds complete nothing more here (the note below)" in err
    note = next(line for line in err.splitlines() if line.startswith("fedhh up: note: rounds"))
    # (weight 1 reaches 112 bits, which neither item fits: not suggested)
    assert note.endswith("cut whatever their count. A larger --eps-agg lowers every round's "
                         "threshold; docs/codecs.md."), note


def test_the_note_suggests_the_weight_where_it_completes_an_item_more(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    err = up(tmp_path, monkeypatch, capsys, [URL, DOTTED])
    assert "2 items held by 100.0% of the users are longer than the 80 bits" in err, err
    assert ("A larger --eps-agg lowers every round's threshold; --completion-weight 1 brings the "
            "rounds within the devices to 112 bits, which 1 more of the items fit, at the main "
            "rounds' cost; docs/codecs.md.") in err, err
