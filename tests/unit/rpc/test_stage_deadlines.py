"""A stage's deadline is read from the signed round config in one place,
``StageDeadlines.of``: the devices' waits (``fedhh.rpc.participation``) and the aggregator's
stage closes (``fedhh_aggregator.rounds``) read the same instant for every stage. Before, each
kept its own table from stage to field."""

from __future__ import annotations

from types import SimpleNamespace

from fedhh.rpc.participation import stage_deadline_s as device_deadline_s
from fedhh.secagg.config import RoundConfig, StageDeadlines
from fedhh.secagg.messages import Stage
from fedhh_aggregator.rounds import stage_deadline_s as aggregator_deadline_s

DEADLINES = StageDeadlines(1_000, 2_500, 3_000, 4_750, 5_000)


def test_each_stage_reads_its_own_deadline_on_both_sides() -> None:
    config = RoundConfig(round_id=b"r", num_devices=100, dimension=1 << 10, modulus_bits=16,
                         n_min=50, k=10, t=6, graph_seed=bytes(32), deadlines=DEADLINES,
                         device_auth=True, consistency_check=True, identity_root=bytes(32))
    device = SimpleNamespace(config=config)
    expected = {Stage.ADVERTISE_KEYS: 1_000, Stage.SHARE_KEYS: 2_500, Stage.MASKED_INPUT: 3_000,
                Stage.CONSISTENCY_CHECK: 4_750, Stage.UNMASK: 5_000, Stage.DONE: 5_000}
    assert set(expected) == set(Stage)
    for stage, ms in expected.items():
        assert DEADLINES.of(stage) == ms
        assert (device_deadline_s(device, stage)  # type: ignore[arg-type]
                == aggregator_deadline_s(config, stage) == ms / 1000)
