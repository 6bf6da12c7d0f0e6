"""An open retried after the round's last deadline is answered the same way by the aggregator
and the combiner (``RoundBook.retried_open``, one order for both): a round still held is
returned to its retry (the coordinator's retry of an open whose answer it lost), a finished one
is refused as finished; the deadline is checked only for a round that would be new. Before, the
combiner checked the deadlines first and refused both retries with 'shard 0's last deadline
... has already passed'."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519

from fedhh.errors import ConfigError, ConflictError
from fedhh.secagg import RoundConfig, SignedConfig
from fedhh.secagg.config import StageDeadlines
from fedhh_aggregator.combiner import CombinerRegistry, Placement
from fedhh_aggregator.outcomes import OutcomeState, RecordedOutcome, Tombstone
from fedhh_aggregator.registry import RoundRegistry

KEY = ed25519.Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
PUBLIC = KEY.public_key().public_bytes_raw()
ROUND = b"r/1/1"
SHARD = b"r/1/1/s0"


def _signed(round_id: bytes) -> SignedConfig:
    """A signed config whose last deadline passed a minute ago."""
    passed = int(time.time() * 1000) - 60_000
    config = RoundConfig(round_id=round_id, num_devices=4, dimension=8, modulus_bits=16,
                         n_min=3, k=3, t=2, graph_seed=bytes(32),
                         deadlines=StageDeadlines(*([passed] * 5)), device_auth=True,
                         consistency_check=True, identity_root=bytes(32))
    payload = config.to_bytes()
    return SignedConfig(payload, KEY.sign(payload))


def _aggregator() -> tuple[RoundRegistry, bytes, Any, Any]:
    registry = RoundRegistry(PUBLIC)
    signed = _signed(ROUND)
    return registry, ROUND, SimpleNamespace(signed=signed), \
        lambda: registry.open(signed.payload, signed.signature)


def _combiner() -> tuple[CombinerRegistry, bytes, Any, Any]:
    registry = CombinerRegistry(PUBLIC, [object()])  # type: ignore[arg-type]
    placements = [Placement(_signed(SHARD), worker=0)]
    held = SimpleNamespace(shards=registry._check(ROUND, placements))
    return registry, ROUND, held, lambda: registry.open(ROUND, placements)


SERVICES = {"aggregator": _aggregator, "combiner": _combiner}


@pytest.mark.parametrize("service", SERVICES)
def test_a_retried_open_after_the_deadline_gets_its_held_round(service: str) -> None:
    registry, round_id, held, open_ = SERVICES[service]()
    registry._rounds[round_id] = held
    assert asyncio.run(open_()) == (held, False)


@pytest.mark.parametrize("service", SERVICES)
def test_a_retried_open_after_the_deadline_of_a_finished_round_is_refused_as_finished(
        service: str) -> None:
    registry, round_id, _, open_ = SERVICES[service]()
    registry._tombstones.bury(round_id, Tombstone(RecordedOutcome(OutcomeState.ABORTED),
                                                  "aborted", time.time()))
    with pytest.raises(ConflictError, match=r"^round 'r/1/1' has already finished$"):
        asyncio.run(open_())


@pytest.mark.parametrize("service", SERVICES)
def test_a_new_round_past_its_deadline_is_refused_as_late(service: str) -> None:
    registry, _, _, open_ = SERVICES[service]()
    with pytest.raises(ConfigError, match=r"last deadline passed \d+ ms before it reached this "
                       r"service, by its clock: .* or the coordinator's clock is behind"):
        asyncio.run(open_())
    assert len(registry) == 0
