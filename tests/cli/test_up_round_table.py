"""`fedhh up`'s table of rounds ends no row in spaces. Before, a released round's row (no
reason after its threshold) ended in two, which a terminal hides and a copied or diffed
output keeps."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fedhh.config import Mode, RunConfig


def test_no_row_of_the_round_table_ends_in_spaces(capsys: pytest.CaptureFixture[str]) -> None:
    from fedhh.cli.up import _print_results
    from fedhh.rpc.run_config import to_proto
    from fedhh.v1 import coordinator_pb2 as pb

    config = RunConfig().validate(Mode.NETWORK)
    rounds = [pb.RoundSummary(round=1, attempt=1, state="released", participants=1387,
                              prefixes=1, segment_bits=16, domain_size=65536, kept=5,
                              threshold=34.0),
              pb.RoundSummary(round=2, attempt=1, state="aborted", participants=0,
                              reason="too few devices checked in")]
    run = SimpleNamespace(run_id="demo", state="done", error="", eps_spent=1.0, eps_local=4.0,
                          rounds_released=1, config=to_proto(config), rounds=rounds)
    _print_results(run, SimpleNamespace(heavy_hitters=[], cut_prefixes=[]))
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("round  attempt"))
    rows = lines[at + 1:at + 3]
    assert rows[0].endswith("       34"), rows
    assert rows[1].endswith("-  too few devices checked in"), rows
    assert [line for line in lines if line != line.rstrip()] == []
