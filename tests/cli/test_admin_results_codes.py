"""`fedhh admin results` shows each row's whole code, read from its ``code_bytes``, at any
width (before, once completion rounds made the codes wider than 64 bits, the wire's fixed64
``code`` was 0, and every row showed ``"code": "0"``); a code of up to 64 bits shows as
before, and a row from a coordinator that sent no ``code_bytes`` keeps its ``code``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _admin_recorder import Recorder

from fedhh.cli.main import main
from fedhh.codec import Codec
from fedhh.config import Mode, RunConfig
from fedhh.server.prefixtree import HeavyHitter
from fedhh.v1 import coordinator_pb2 as pb

ITEMS = ["https://例え.jp/a?q=%E2%9C%93&x=1", "👩🏽‍💻", "-1.5e+10", "a+tag@example.com"]


def _wire(item: str, config: RunConfig) -> tuple[pb.HeavyHitter, int]:
    """The row as the coordinator sends it (server/fedhh_coordinator/service.py: ``code``
    absent past 64 bits) and its code."""
    codec = Codec.from_spec(config.codec, config.code_bits(Mode.NETWORK))
    code = codec.encode(item)
    hitter = HeavyHitter(item, 40.0, code, 3, max_bits=codec.max_bits, bits=codec.max_bits)
    return pb.HeavyHitter(item=item, estimate=40.0, round=3, ended=True,
                          code=code if codec.max_bits <= 64 else None,
                          code_bytes=hitter.code_bytes), code


def _shown(recorder: Path, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str], rows: list[pb.HeavyHitter]) -> list[dict]:
    results = pb.Results(run_id="r1", state="done", heavy_hitters=rows[1:],
                         cut_prefixes=rows[:1], rounds=[pb.RoundSummary(
                             round=3, attempt=1, state="released", participants=400)])
    monkeypatch.setattr(Recorder, "results", lambda self, run_id: results, raising=False)
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "results", "r1"]) == 0
    shown = json.loads(capsys.readouterr().out)
    return [*shown["cutPrefixes"], *shown["heavyHitters"]]


def test_codes_wider_than_64_bits_show_whole(recorder: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    config = RunConfig()
    assert config.code_bits(Mode.NETWORK) > 64
    wired = [_wire(item, config) for item in ITEMS]
    shown = _shown(recorder, monkeypatch, capsys, [row for row, _ in wired])
    assert [row["code"] for row in shown] == [str(code) for _, code in wired]
    assert all(code >= 1 << 64 for _, code in wired)  # (none of them fits a fixed64)
    assert [row["item"] for row in shown] == ITEMS


def test_codes_of_64_bits_at_most_show_as_before(
        recorder: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    config = RunConfig(completion_rounds=0, max_bits=60)
    wired = [_wire(item, config) for item in ITEMS[1:3]]
    rows = [row for row, _ in wired]
    rows.append(pb.HeavyHitter(item="old", estimate=9.0, round=3, code=12345))  # (no bytes)
    shown = _shown(recorder, monkeypatch, capsys, rows)
    assert [row["code"] for row in shown] == [str(code) for _, code in wired] + ["12345"]
