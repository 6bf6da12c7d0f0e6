"""`fedhh up --shard-size` that splits the fleet into shards is refused before anything starts.

Before: `fedhh up --devices 700 --min-fraction 0.4 --shard-size 300` started the whole stack
(one aggregator, no combiner), and every attempt of round 1 aborted with "sharded rounds
(shard_size) need a combiner at --aggregator": the run failed after 5 attempts.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from cli_kit import one_line_error

from fedhh.cli.up import refuse_shards
from fedhh.config import RunConfig
from fedhh.errors import ConfigError


def test_a_sharded_up_is_refused_before_anything_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))  # (the file is imported there)
    users = tmp_path / "users.txt"
    users.write_text("".join(f"apple w{u % 50}\n" for u in range(700)))
    workdir = tmp_path / "work"
    line = one_line_error(["up", "--dataset", str(users), "--min-fraction", "0.4",
                           "--shard-size", "300", "--workdir", str(workdir)], capsys)
    assert line == ("fedhh up: error: --shard-size 300 splits the 700 devices into 2 shards, "
                    "and sharded rounds need a combiner with aggregator workers, which `fedhh "
                    "up` does not start (it runs one aggregator): drop --shard-size here; "
                    "docs/scaling.md runs sharded rounds (fedhh combiner)")
    assert not workdir.exists()  # no service was started


def test_one_shard_or_none_is_what_up_runs() -> None:
    config = replace(RunConfig(), target_devices=700, min_devices=280)
    refuse_shards(config)
    refuse_shards(replace(config, shard_size=700))  # one shard: a plain round
    with pytest.raises(ConfigError, match="into 2 shards"):
        refuse_shards(replace(config, shard_size=350))
