"""One rule for how long an aggregation service remembers a finished round
(``fedhh_aggregator.rounds.check_tombstone_ttl``): at least as long as a config's last deadline
may be ahead, so that a tombstone outlives every deadline of the round it refuses to reopen.
The aggregator and the combiner both take --max-round-seconds and refuse a --tombstone-ttl
below it, by the same words; the combiner refuses a shard config whose last deadline is
further ahead. Before, the combiner had no --max-round-seconds, took any --tombstone-ttl (a
round dropped early could be reopened from its signed configs a minute later) and any shard
deadline."""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from fedhh.cli.main import build_parser
from fedhh.errors import ConfigError
from fedhh.secagg import RoundConfig, SignedConfig
from fedhh.secagg.config import StageDeadlines
from fedhh_aggregator.combined import CombinerLimits
from fedhh_aggregator.combiner import CombinerRegistry, Placement
from fedhh_aggregator.rounds import Limits

KEY = ed25519.Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
PUBLIC = KEY.public_key().public_bytes(serialization.Encoding.Raw,
                                       serialization.PublicFormat.Raw)


def _args(service: str, tmp_path: Path, *extra: str) -> argparse.Namespace:
    key = tmp_path / "coordinator.pub"
    key.write_bytes(KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    own = ["--worker", "127.0.0.1:7101"] if service == "combiner" else []
    return build_parser(service).parse_args(
        [service, "--insecure", "--listen", "127.0.0.1:0", "--coordinator-key", str(key),
         *own, *extra])


def _settings(service: str, args: argparse.Namespace) -> object:
    if service == "combiner":
        from fedhh_aggregator.combiner_main import CombinerSettings
        return CombinerSettings.from_args(args)
    from fedhh_aggregator.main import AggregatorSettings
    return AggregatorSettings.from_args(args)


@pytest.mark.parametrize("service", ["aggregator", "combiner"])
def test_both_services_refuse_a_tombstone_ttl_below_the_longest_round(
        service: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CONTROL_TOKEN", "c" * 32)
    with pytest.raises(ConfigError) as refused:
        _settings(service, _args(service, tmp_path, "--tombstone-ttl", "5"))
    assert str(refused.value) == ("argument --tombstone-ttl: must be at least "
                                  "--max-round-seconds (3600), got 5.0")
    settings = _settings(service, _args(service, tmp_path, "--tombstone-ttl", "5",
                                        "--max-round-seconds", "5"))
    assert settings.limits.tombstone_ttl_s == 5.0  # type: ignore[attr-defined]


@pytest.mark.parametrize("limits", [Limits, CombinerLimits])
def test_both_limits_hold_the_rule(limits: type) -> None:
    with pytest.raises(ConfigError, match=r"^tombstone_ttl_s must be at least max_round_s "
                                          r"\(3600\), got 60.0$"):
        limits(tombstone_ttl_s=60.0)
    assert limits(tombstone_ttl_s=60.0, max_round_s=60.0).tombstone_ttl_s == 60.0


def _placement(ahead_s: float) -> Placement:
    last = int(time.time() * 1000 + ahead_s * 1000)
    config = RoundConfig(round_id=b"r/1/1/s0", num_devices=4, dimension=8, modulus_bits=16,
                         n_min=3, k=3, t=2, graph_seed=bytes(32),
                         deadlines=StageDeadlines(*([last] * 5)), device_auth=True,
                         consistency_check=True, identity_root=bytes(32))
    payload = config.to_bytes()
    return Placement(SignedConfig(payload, KEY.sign(payload)), worker=0)


def test_the_combiner_refuses_a_shard_whose_last_deadline_is_too_far_ahead() -> None:
    registry = CombinerRegistry(PUBLIC, [object()],  # type: ignore[arg-type]
                                CombinerLimits(max_round_s=60.0, tombstone_ttl_s=60.0))
    with pytest.raises(ConfigError, match=r"shard 0's last deadline is more than 60\.0 s ahead"):
        asyncio.run(registry.open(b"r/1/1", [_placement(3600)]))
    assert registry._check(b"r/1/1", [_placement(30)])[0].index == 0
