"""Cut prefixes that show one text (they differ only after its last byte) are one row whose
estimate is their sum, with a ``note`` saying so (`fedhh.server.prefixtree.shown_items`).
`fedhh simulate` showed the note; the dashboard's page, CSV and JSON and `fedhh up`'s list
dropped it, so the sum of two prefixes' counts read as one prefix's."""

from __future__ import annotations

import csv
import io
from types import SimpleNamespace

from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.config import RunConfig
from fedhh.server.mechanisms import LocalRandomizer, TailKind
from fedhh.server.prefixtree import Found, PrefixTree, TreeConfig, TreeState

# (a run whose eps_local the fake does not know: a cut row the rounds ran out on reads "no
# rounds left", fedhh.server.causes.ran_out_cause)
UNKNOWN_BUDGET = {"config": RunConfig(), "ledger": SimpleNamespace(eps_local=None)}

WIDTH = 200


def _parts() -> SimpleNamespace:
    """A tree state with two cut prefixes that show one text and a whole item."""
    codec = Codec.from_spec("unicode", WIDTH)
    whole, a, b = (int(c) for c in cw.to_ints(codec.encode_many(
        ["tea", "https://www.example.org/alphabet", "https://www.example.org/alpine"]).codes))
    # (the first bit count at which the two URLs' prefixes differ, the first of the codeword
    # after alp: both show .../alp⟨+1 bit⟩…)
    bits = next(n for n in range(1, WIDTH) if a >> (WIDTH - n) != b >> (WIDTH - n))
    keep = WIDTH - bits
    tree = PrefixTree(TreeConfig(rounds=13, dim_limit=2**16), codec,
                      LocalRandomizer(3.0, TailKind.BINOMIAL))
    state = TreeState(discovered=(Found(whole, 40.0, 1),
                                  Found(a >> keep << keep, 300.0, 6, bits=bits),
                                  Found(b >> keep << keep, 200.0, 6, bits=bits)))
    return SimpleNamespace(tree=tree, state=state, **UNKNOWN_BUDGET)


def test_the_dashboard_says_a_rows_estimate_is_the_sum_of_its_prefixes() -> None:
    from fedhh_coordinator.dashboard.pages import hits_table
    from fedhh_coordinator.dashboard.results import cut_prefixes, heavy_hitters
    from fedhh_coordinator.dashboard.server import _hit_json, hits_csv

    parts = _parts()
    hits = heavy_hitters(parts, [])  # type: ignore[arg-type]
    cut = cut_prefixes(parts, [])  # type: ignore[arg-type]
    assert [h.item for h in hits] == ["tea"] and hits[0].note == ""
    [row] = cut
    assert row.item == "https://www.example.org/alp⟨+1 bit⟩…" and row.estimate == 500.0
    assert row.note.startswith("2 cut prefixes show this text")
    assert "the estimate is their sum" in hits_table("r1", hits, cut)
    assert _hit_json(row)["note"] == row.note and "note" not in _hit_json(hits[0])
    table = list(csv.DictReader(io.StringIO(hits_csv(hits, cut))))
    assert [r["note"] for r in table] == ["", row.note]
    assert table[1]["estimate"] == "500.0"


def test_up_says_a_rows_estimate_is_the_sum_of_its_prefixes(capsys) -> None:  # type: ignore[no-untyped-def]
    from fedhh.cli.up import _print_results
    from fedhh.config import Mode, RunConfig
    from fedhh.rpc.run_config import to_proto
    from fedhh.v1 import coordinator_pb2 as pb

    parts = _parts()
    listed = parts.tree.cut_prefixes(parts.state)
    cut = [pb.HeavyHitter(item=h.item, estimate=h.estimate, round=h.round, truncated=True,
                          bits=h.bits, note=h.note) for h in listed]
    config = RunConfig(completion_rounds=4).validate(Mode.NETWORK)
    rounds = [pb.RoundSummary(round=i, attempt=1, state="released", participants=1000,
                              prefixes=1, segment_bits=16, domain_size=65536, kept=1)
              for i in range(1, 9)]
    run = SimpleNamespace(run_id="demo", state="done", error="", eps_spent=1.0, eps_local=4.0,
                          rounds_released=8, config=to_proto(config), rounds=rounds)
    _print_results(run, SimpleNamespace(heavy_hitters=[], cut_prefixes=cut))
    row = next(line for line in capsys.readouterr().out.splitlines() if "alp⟨+1 bit⟩…" in line)
    assert "estimated count    500.0" in row
    assert row.endswith("; 2 cut prefixes show this text (they differ only after its last "
                        "byte); the estimate is their sum)")


def test_the_csv_of_a_run_not_done_says_its_list_is_so_far() -> None:
    """A running (or failed) run's list is what its released rounds found so far: every CSV
    row carries the run's state, as the JSON download carries ``state`` (before, nothing in
    the CSV said so, and a mid-run download read as the finished run's list)."""
    from fedhh_coordinator.dashboard.results import cut_prefixes, heavy_hitters
    from fedhh_coordinator.dashboard.server import hits_csv

    parts = _parts()
    hits = heavy_hitters(parts, [])  # type: ignore[arg-type]
    cut = cut_prefixes(parts, [])  # type: ignore[arg-type]
    for state in ("running", "failed", "done"):
        table = list(csv.DictReader(io.StringIO(hits_csv(hits, cut, state))))
        assert [r["run_state"] for r in table] == [state, state]
        assert [r["item"] for r in table] == ["tea", "https://www.example.org/alp⟨+1 bit⟩…"]


def test_up_says_a_failed_runs_list_is_its_released_rounds_so_far(capsys) -> None:  # type: ignore[no-untyped-def]
    """`fedhh up` prints a run that failed or was cancelled with what its released rounds
    found; it says so above the list, as `fedhh admin results` does (before, the list read as
    a finished run's)."""
    from fedhh.cli.up import _print_results
    from fedhh.config import Mode, RunConfig
    from fedhh.rpc.run_config import to_proto
    from fedhh.v1 import coordinator_pb2 as pb

    config = RunConfig(completion_rounds=4).validate(Mode.NETWORK)
    rounds = [pb.RoundSummary(round=i, attempt=1, state="released", participants=1000,
                              prefixes=1, segment_bits=16, domain_size=65536, kept=1)
              for i in (1, 2)]
    hits = [pb.HeavyHitter(item="1\ufe0f\u20e3", estimate=90.0, round=2)]
    for state, says in (("failed", "failed"), ("cancelled", "was cancelled"), ("done", None)):
        run = SimpleNamespace(run_id="demo", state=state, error="", eps_spent=1.0,
                              eps_local=4.0, rounds_released=2, config=to_proto(config),
                              rounds=rounds)
        _print_results(run, SimpleNamespace(heavy_hitters=hits, cut_prefixes=[]))
        out = capsys.readouterr().out
        note = (f"fedhh up: note: run demo {says}: its heavy hitters and cut prefixes are "
                "those of the 2 rounds released so far, not a finished run's")
        if says is None:
            assert "released so far" not in out
        else:
            assert note + "\n1 heavy hitter (by round" in out


def test_the_json_download_says_why_each_cut_row_was_not_completed() -> None:
    """As `fedhh simulate --json` and `fedhh up` do (before, the download had no cause, nor
    the code)."""
    from fedhh_coordinator.dashboard.results import cut_prefixes, heavy_hitters
    from fedhh_coordinator.dashboard.server import _hit_json
    from fedhh_coordinator.store import RoundRow

    parts = _parts()
    rounds = [RoundRow(run_id="r1", round=r, attempt=1, state="released", reason="",
                       participants=1000, summary={}, started_at=0.0, finished_at=1.0)
              for r in range(1, 9)]
    [row] = cut_prefixes(parts, rounds)  # type: ignore[arg-type]
    assert _hit_json(row)["cause"] == "lost in round 7" and _hit_json(row)["bits"] == row.bits
    # (and its code, as simulate's JSON: the bits its text does not show)
    [listed] = [h for h in parts.tree.cut_prefixes(parts.state)]
    assert _hit_json(row)["code"] == listed.code_hex
    [whole] = heavy_hitters(parts, rounds)  # type: ignore[arg-type]
    assert "cause" not in _hit_json(whole)
