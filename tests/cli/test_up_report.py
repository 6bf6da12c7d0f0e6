"""What `fedhh up` prints about a finished run: each round's expected false positives, and
how many of the kept prefixes noise alone is expected to lift."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from fedhh.cli.admin import dropped_completions
from fedhh.cli.main import main
from fedhh.cli.up import N_MIN_FLAGS, _print_results, demo_run_id, explain
from fedhh.codec.shown import columns
from fedhh.config import RunConfig
from fedhh.v1 import coordinator_pb2 as pb


def _round(number: int, kept: int, expected: float, cut: int = 0) -> pb.RoundSummary:
    return pb.RoundSummary(round=number, attempt=1, state="released", participants=1000,
                           prefixes=2, segment_bits=15, domain_size=65536, kept=kept,
                           finished=kept - cut, cut=cut, threshold=30.0,
                           expected_false_positives=expected)


def _run() -> SimpleNamespace:
    config = pb.RunConfig(eps_agg=2.0, delta=1e-6, fp_ratio=0.5)
    return SimpleNamespace(run_id="demo", state="done", error="", eps_spent=1.0, eps_local=4.0,
                           rounds_released=3, config=config,
                           rounds=[_round(1, 6, 1.25), _round(2, 4, 0.5), _round(3, 0, 0.75)])


def test_a_round_that_kept_nothing_adds_no_false_positives(
        capsys: pytest.CaptureFixture[str]) -> None:
    run = _run()
    _print_results(run, SimpleNamespace(heavy_hitters=[], cut_prefixes=[]))
    explain(run, None)
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("    ")]
    assert [row[8] for row in rows[:3]] == ["1.2", "0.5", "-"]
    assert "lift about 1.8 of the 10 prefixes kept" in out
    assert "gamma = 0.5 of what it keeps" in out


def test_cut_prefixes_have_a_column_and_the_ellipsis_is_explained(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a completion round that output 5 cut prefixes showed "found 0" (simulate's
    table says cut 5), and the report never said what an item ending in … is."""
    run = _run()
    run.rounds[2].CopyFrom(_round(3, 5, 0.75, cut=5))
    whole = pb.HeavyHitter(item="ab", estimate=97.0, round=1, ended=True)
    cut = pb.HeavyHitter(item="https://example…", estimate=285.0, round=3, truncated=True,
                         bits=121)
    _print_results(run, SimpleNamespace(heavy_hitters=[whole], cut_prefixes=[cut]))
    out = capsys.readouterr().out
    assert "exp-fp  found  cut" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("    ")]
    assert [row[9:11] for row in rows[:3]] == [["6", "0"], ["4", "0"], ["0", "5"]]
    assert "1 heavy prefix the completion rounds could not complete" in out
    assert ("(an item ending in … is a prefix of 121 bits: it stands for every item starting "
            "so;") in out


def test_the_results_keep_their_counts_in_one_column_past_20_columns(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Items wider than 20 columns (a URL, an e-mail address) ran into "estimated count" with
    one space, each row's count elsewhere; the column now fits the widest item up to 48
    columns, and a wider item is cut to them, ending in … (before, it pushed its own count
    on), with a line saying how to see it whole."""
    items = ["ab", "jane.doe@example.org", "https://example.com/a/b?q=1", "東京タワー", "x" * 60]
    listed = [pb.HeavyHitter(item=item, estimate=50.0 + i, round=1, ended=True)
              for i, item in enumerate(items)]
    _print_results(_run(), SimpleNamespace(heavy_hitters=listed, cut_prefixes=[]))
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if "estimated count" in line]
    assert len(rows) == 5
    starts = [columns(row[:row.index("  estimated count")]) for row in rows]
    assert starts == [7 + 48] * 5  # ("  NNN. ", then the item's column)
    assert re.search(r"\. x{47}…  estimated count +54\.0  \(round 1\)$", rows[4]), rows[4]
    assert ("(1 listed here is wider than the item column's 48 columns, cut to them ending in "
            "…: each stands for its item, which begins so; `fedhh admin ... results demo` "
            "gives it whole)") in out


@pytest.mark.parametrize("item", [
    "http://x.io/" + "q" * 2000, "\U0001f1fa\U0001f1f8" * 300, "東京" * 40,
    "ab" + "z" + "\u0300\u0301\u0302\u0303" * 125])
def test_a_long_item_or_cut_prefix_keeps_the_counts_in_line(
        capsys: pytest.CaptureFixture[str], item: str) -> None:
    """A 2 kB URL, 300 flags, CJK, a letter under 500 marks, as a heavy hitter and as a cut
    prefix (with a character's first byte after it): each is cut to the item column, the
    counts of every row start in one column."""
    run = _run()
    run.rounds[2].CopyFrom(_round(3, 2, 0.75, cut=1))
    whole = pb.HeavyHitter(item=item, estimate=97.0, round=1, ended=True)
    cut = pb.HeavyHitter(item=item + "\\xc3…", estimate=285.0, round=3, truncated=True,
                         bits=121)
    short = pb.HeavyHitter(item="ab", estimate=9.0, round=1, ended=True)
    _print_results(run, SimpleNamespace(heavy_hitters=[whole, short], cut_prefixes=[cut]))
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if "estimated count" in line]
    starts = {columns(row[:row.index("  estimated count")]) for row in rows}
    # (the cut row's note says how many of its items' first bytes it holds, after its cause)
    assert len(starts) == 1 and max(map(columns, rows)) < 7 + 48 + 160, rows
    assert all(row.split("estimated count")[0].rstrip().endswith("…") for row in rows[::2])
    assert sum("wider than the item column's 48 columns" in line for line in out) == 2


def test_cut_prefixes_line_up_with_the_heavy_hitters_counts(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the cut prefixes' rows were padded to the codes' width in bits (576 columns at
    the default configuration), not to the items' column, so each ran to ~640 characters."""
    run = _run()
    run.rounds[2].CopyFrom(_round(3, 2, 0.75, cut=1))
    whole = pb.HeavyHitter(item="jane.doe@example.org", estimate=97.0, round=1, ended=True)
    cut = pb.HeavyHitter(item="https://example…", estimate=285.0, round=3, truncated=True,
                         bits=121)
    _print_results(run, SimpleNamespace(heavy_hitters=[whole], cut_prefixes=[cut]))
    rows = [line for line in capsys.readouterr().out.splitlines() if "estimated count" in line]
    assert len(rows) == 2
    starts = {columns(row[:row.index("  estimated count")]) for row in rows}
    assert starts == {7 + 20}, rows
    assert max(map(len, rows)) < 200
    assert rows[1].endswith("; cut at 121 bits: the first 15 bytes of every item starting "
                            "so)"), rows[1]


def test_a_second_up_in_the_same_workdir_takes_the_next_run_id() -> None:
    """A store kept in --workdir holds the runs of earlier `fedhh up`s: the next takes
    ``demo-2``, ``demo-3``, ... (it was refused ALREADY_EXISTS "run 'demo'" once its whole
    stack had started)."""
    runs = [SimpleNamespace(run_id=name) for name in ("demo", "demo-2", "other", "demo-4")]
    assert demo_run_id([]) == "demo"
    assert demo_run_id(runs[:1]) == "demo-2"
    assert demo_run_id(runs) == "demo-3"
    assert demo_run_id([SimpleNamespace(run_id="other")]) == "demo"


def test_up_starts_at_most_32_device_processes(capsys: pytest.CaptureFixture[str]) -> None:
    """`--processes` was capped only by the devices: 1,387 Python processes (~80 MB each) for
    Shakespeare's devices on a 2-core machine. It is refused past 32, before anything starts."""
    with pytest.raises(SystemExit) as exited:
        main(["up", "--processes", "33"])
    assert exited.value.code == 2
    assert "argument --processes: must be at most 32 device processes" in capsys.readouterr().err


def test_a_run_that_kept_nothing_says_nothing_of_noise_among_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "expected to lift about 0.0 of the 0 prefixes kept"."""
    run = _run()
    run.rounds = [_round(1, 0, 0.75)]
    explain(run, None)
    assert "Noise alone" not in capsys.readouterr().out


def test_a_run_ended_by_a_completion_round_that_kept_nothing_says_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "every prefix kept reached its end" after a round that kept none, and the
    threshold of a completion round shown "at eps_local 4.00", the main rounds' epsilon, where
    that round ran at 4 + ln(0.02)."""
    config = pb.RunConfig(eps_agg=2.0, delta=1e-6, fp_ratio=0.5, rounds=2, completion_rounds=2,
                          completion_weight=0.02)
    run = SimpleNamespace(run_id="demo", state="done", error="", eps_spent=1.0, eps_local=4.0,
                          rounds_released=3, config=config,
                          rounds=[_round(1, 6, 1.0), _round(2, 4, 0.5), _round(3, 0, 0.2)])
    explain(run, None)
    out = capsys.readouterr().out
    assert "The tree finished after 3 of 4 rounds: round 3 kept no prefix, so none was left " \
        "to extend" in out
    assert "in round 3, a completion round, at local epsilon 0.09 (the main rounds' 4.00" in out


def options_of(command: list[str], capsys: pytest.CaptureFixture[str]) -> set[str]:
    """The long options ``fedhh COMMAND --help`` lists."""
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    return set(re.findall(r"--[a-z][a-z-]*", capsys.readouterr().out))


def test_the_note_on_dropped_completion_rounds_names_flags_up_accepts(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: every `fedhh up` suggested "more devices (--min-devices)", and `fedhh up
    --min-devices 1300` was "unrecognized arguments"."""
    asked = RunConfig()
    note = dropped_completions(asked, replace(asked, completion_rounds=0), N_MIN_FLAGS)
    named = set(re.findall(r"--[a-z][a-z-]*", note))
    assert {"--devices", "--min-fraction", "--eps-agg"} <= named
    assert named <= options_of(["up"], capsys), named - options_of(["up"], capsys)


def test_a_rerun_in_the_same_workdir_cancels_the_run_left_unfinished() -> None:
    """An interrupted `fedhh up --workdir W` left run ``demo`` running in W's store; the next
    `fedhh up --workdir W` started ``demo-2`` beside it, and the coordinator resumed ``demo``
    first: its rounds spent the devices' budget while demo-2's check-in waited 2.5 minutes.
    Now the unfinished runs (pending or running) are cancelled, and only those."""
    cancelled: list[str] = []
    admin = SimpleNamespace(cancel=cancelled.append)
    runs = [SimpleNamespace(run_id=name, state=state) for name, state in
            [("demo", "running"), ("demo-2", "done"), ("demo-3", "failed"),
             ("demo-4", "cancelled"), ("demo-5", "pending")]]
    from fedhh.cli.up import cancel_unfinished

    assert cancel_unfinished(admin, runs) == ["demo", "demo-5"]
    assert cancelled == ["demo", "demo-5"]
    assert cancel_unfinished(admin, []) == []


@pytest.mark.parametrize("cut", [0, 5])
def test_the_rounds_table_says_what_its_columns_count(
        cut: int, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `fedhh up`'s table of rounds had columns s, domain, kept, exp-fp and found that
    neither its output nor a doc explained (a new operator's first table)."""
    run = _run()
    run.rounds[2].CopyFrom(_round(3, 5, 0.75, cut=cut))
    _print_results(run, SimpleNamespace(heavy_hitters=[], cut_prefixes=[]))
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("round  attempt"))
    legend = lines[header + 4]
    assert legend.startswith("(s: the bits a round adds to each prefix; domain: prefixes x "
                             "2^s, the entries each device reports; kept: ")
    named = re.findall(r"(?:^\(|; )([a-z-]+): ", legend)
    assert named == ["s", "domain", "kept", "exp-fp", "found"] + (["cut"] if cut else [])


def test_simulate_s_table_of_rounds_says_what_its_columns_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """fedhh simulate's table (tau, n, next s, E[FP], FP beside up's columns) is explained by
    the same words, one line under it."""
    from cli_kit import run_cli

    data = tmp_path / "users.txt"
    data.write_text("".join(f"apple pear w{u % 7}\n" for u in range(40)))
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    code, out, err = run_cli(["simulate", "--dataset", str(data), "--eps-agg", "5",
                              "--dim-limit", "65536", "--seed", "1"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("round "))
    legend = next(line for line in lines[header:] if line.startswith("("))
    assert re.findall(r"(?:^\(|; )([a-zA-Z\[\] -]+): ", legend) == [
        "s", "domain", "n", "tau", "kept", "found", "next s", "E[FP]", "FP"]
    assert "E[FP]: how many of the kept noise alone is expected to lift" in legend
