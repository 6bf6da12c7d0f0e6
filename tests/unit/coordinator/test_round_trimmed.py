"""A round's ``trimmed`` (the prefixes it kept that the next round's segment left out) reaches
the admin API's round summaries and `fedhh up`/`fedhh admin wait` say it in words. Before, the
stored report held it but no reply carried it: `fedhh up --rounds 3 --max-bits 48` found 2 of
12 heavy items and nothing said why."""

from __future__ import annotations

from fedhh.cli.admin import run_trim_note
from fedhh.config import RunConfig
from fedhh.rpc.run_config import to_proto
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.service import _round_summary
from fedhh_coordinator.store import RoundRow


def _row(round_: int, attempt: int, state: str, **summary: int) -> RoundRow:
    return RoundRow(run_id="r1", round=round_, attempt=attempt, state=state, reason="",
                    participants=100, summary=dict(summary), started_at=0.0, finished_at=1.0)


def test_the_round_summary_carries_trimmed() -> None:
    summary = _round_summary(_row(1, 1, "released", prefixes=1, segment_bits=16, kept=20,
                                  trimmed=19))
    assert summary.trimmed == 19 and summary.kept == 20
    assert _round_summary(_row(2, 1, "aborted")).trimmed == 0  # (no report: nothing left out)


def test_the_run_note_reads_the_next_rounds_list() -> None:
    config = to_proto(RunConfig(rounds=3, max_bits=48, dim_limit=1 << 16, completion_rounds=0))
    rounds = [_round_summary(row) for row in (
        _row(1, 1, "released", prefixes=1, segment_bits=16, kept=20, trimmed=19),
        _row(2, 1, "aborted", prefixes=1, segment_bits=16),
        _row(2, 2, "released", prefixes=1, segment_bits=16, kept=2, finished=2),
    )]
    run = pb.Run(run_id="r1", state="done", config=config, rounds=rounds)
    note = run_trim_note(run)
    assert note is not None and note.startswith(
        "19 kept prefixes could not be queried: round 1 kept 20 prefixes to extend and the next "
        "round queried 1 (16-bit segments: 1 x 2^16 within the dimension limit 65,536)")
    assert run_trim_note(pb.Run(run_id="r1", state="done", config=config,
                                rounds=rounds[1:])) is None


def test_a_running_runs_note_waits_for_the_next_round_to_release() -> None:
    """An attempt's summary holds its list and segment only once it released: with round 2
    open (or aborted) the note said "the next round queried 0 (0-bit segments: 0 x 2^0 ...)"
    for round 1; now it says nothing of round 1 until round 2 releases."""
    config = to_proto(RunConfig(rounds=3, max_bits=48, dim_limit=1 << 16, completion_rounds=0))
    first = _row(1, 1, "released", prefixes=1, segment_bits=16, kept=20, trimmed=19)
    for state in ("open", "aborted"):
        rounds = [_round_summary(first), _round_summary(_row(2, 1, state))]
        assert run_trim_note(pb.Run(run_id="r1", state="running", config=config,
                                    rounds=rounds)) is None
