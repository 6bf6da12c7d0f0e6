"""What a load test asks of the services it starts, from its spec alone."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from fedhh.cli import aggregator, combiner
from fedhh.rpc import loadtest
from fedhh.rpc.loadtest import LoadSpec


@pytest.mark.parametrize(("shards", "workers"), [(1, 1), (2, 2), (17, 1), (40, 2), (41, 2),
                                                 (200, 3)])
def test_a_worker_may_hold_two_attempts_of_its_shards(shards: int, workers: int) -> None:
    # At the aggregator's default (16 rounds held at once) a round of 40 shards on 2 workers
    # was refused before any device ran; a retried attempt opens its shards while the last
    # attempt's may not be fetched yet.
    spec = LoadSpec(devices=1000 * shards, dim=4096, dropout=0.1, shards=shards, workers=workers)
    held = spec.rounds_per_worker
    assert held >= 16 and held >= 2 * math.ceil(shards / workers)
    # ... and the workers are told so (the aggregator's own default is 16).
    flags = spec.aggregator_flags()
    assert flags[flags.index("--max-rounds") + 1] == str(held)


def test_a_device_process_that_left_no_figures_is_named_with_its_log(tmp_path: Path) -> None:
    """A device process killed before it wrote its stats file (before, a FileNotFoundError
    traceback ended the load test after the run); a file cut short is named the same way."""
    from fedhh.errors import StateError
    from fedhh.rpc.loadtest import _device_stats

    with pytest.raises(StateError, match=r"device process 1 left no figures .*devices-1\.log"):
        _device_stats(tmp_path, 1)
    (tmp_path / "devices-2.stats.json").write_text('{"tasks": 3')
    with pytest.raises(StateError, match="device process 2 left no figures"):
        _device_stats(tmp_path, 2)
    (tmp_path / "devices-0.stats.json").write_text('{"tasks": 3}')
    assert _device_stats(tmp_path, 0) == {"tasks": 3}


class _Started(Exception):
    """Ends run_load once the aggregation services are started (nothing is run)."""


class _RecordingTopology:
    """Stands for LocalTopology: records the options each aggregation service is started
    with."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.options: dict[str, list[str]] = {}

    def __enter__(self) -> _RecordingTopology:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def start_workers(self, count: int, extra: list[str] | None = None) -> None:
        self.options["workers"] = list(extra or [])

    def start_combiner(self, extra: list[str] | None = None) -> None:
        self.options["combiner"] = list(extra or [])
        raise _Started


def _max_round_seconds(parser_of: Callable[[argparse.ArgumentParser], None],
                       options: list[str]) -> float:
    """The --max-round-seconds the service's own command line reads from ``options``."""
    parser = argparse.ArgumentParser()
    parser_of(parser)
    required = ["--coordinator-key", "k.pem"]
    if parser_of is combiner.add_arguments:
        required += ["--worker", "127.0.0.1:1"]
    return float(parser.parse_args([*required, *options]).max_round_seconds)


def test_the_combiner_takes_the_rounds_its_workers_take(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sharded load test's combiner is told the workers' --max-round-seconds: it refuses a
    shard config whose last deadline (five stages ahead) is further ahead, as they do. Before,
    it kept its default, 3600 s, and refused every shard of a round of stage_ms above 720 s
    (69,000 devices at the default stage_ms) that the workers would have taken."""
    topology = _RecordingTopology(tmp_path)
    monkeypatch.setattr(loadtest, "LocalTopology", lambda workdir: topology)
    spec = LoadSpec(devices=2000, dim=4096, dropout=0.1, shards=2, workers=2, stage_ms=800_000)
    with pytest.raises(_Started):
        loadtest.run_load(spec, tmp_path)
    last_deadline_s = 5 * 800
    workers = _max_round_seconds(aggregator.add_arguments, topology.options["workers"])
    combined = _max_round_seconds(combiner.add_arguments, topology.options["combiner"])
    assert combined == workers >= last_deadline_s


def test_the_report_counts_late_devices_apart_from_failed_ones() -> None:
    # A device whose message came after its stage closed (a quiet close on a loaded host) is
    # late, not failed: the round went on without it (before, both counted as "failed").
    from fedhh.v1 import coordinator_pb2 as pb

    def stats(late: int, failed: int) -> dict[str, object]:
        return {"tasks": 100, "completed": 90 - late - failed, "dropped": 10, "late": late,
                "failed": failed, "rpc_seconds": {}, "rpc_bytes_sent": {}}

    spec = LoadSpec(devices=200, dim=4096, dropout=0.1)
    report = loadtest._report(spec, pb.Run(state="done"), 1.0, {}, [stats(3, 0), stats(2, 1)],
                              [])
    assert report["devices"] == {"tasks": 200, "completed": 174, "dropped": 20, "late": 5,
                                 "failed": 1}
    assert ("20 dropped (injected), 5 late (a stage closed before their message, as after a "
            "dropout), 1 failed") in loadtest.render(report)


def test_the_report_gives_a_released_round_s_contributors_beside_its_charge() -> None:
    # A sharded round with a shard lost after unmasking: 100 reports in its total, charged at
    # n_min = 80 (before, the JSON had only the charge, and the text called it contributors);
    # a coordinator before the field (0) gives the charge for both.
    from fedhh.v1 import coordinator_pb2 as pb

    run = pb.Run(state="done", rounds=[
        pb.RoundSummary(round=1, attempt=1, state="released", participants=80, contributors=100),
        pb.RoundSummary(round=2, attempt=1, state="released", participants=90),
        pb.RoundSummary(round=3, attempt=1, state="aborted", reason="too few devices")])
    report = loadtest._report(LoadSpec(devices=100, dim=4096, dropout=0.0), run, 1.0, {}, [], [])
    assert [(r["contributors"], r["participants"]) for r in report["rounds"]] == [
        (100, 80), (90, 90), (0, 0)]
    shown = loadtest.render(report)
    assert "round 1.1: released, 100 contributors (charged at 80)," in shown
    assert "round 2.1: released, 90 contributors," in shown


def test_the_stage_rows_keep_their_columns() -> None:
    # CONSISTENCY_CHECK, 17 letters, overran the 15 columns its name was padded to: its row's
    # figures stood two columns right of the other stages'.
    from fedhh.v1 import coordinator_pb2 as pb

    cpu = {"aggregator": 0.0, "coordinator": 0.0, "devices": 0.1}
    stages = [{"round_id": "load/1/1/ab", "stage": name, "seconds": 0.5, "accepted": 99,
               "early": True, "cpu_s": cpu}
              for name in ("ADVERTISE_KEYS", "SHARE_KEYS", "CONSISTENCY_CHECK", "UNMASK")]
    report = loadtest._report(LoadSpec(devices=100, dim=1024, dropout=0.1),
                              pb.Run(state="done"), 1.0, {}, [], stages)
    rows = [line for line in loadtest.render(report).splitlines() if "load/1/1/ab" in line]
    assert len(rows) == 4 and len({row.index(" s, 99 accepted") for row in rows}) == 1, rows
