"""A stage's deadline is read from the signed round config in one place,
``StageDeadlines.of`` (Unix ms) and ``StageDeadlines.at_s`` (Unix seconds): the devices' waits
(``fedhh.rpc.device_client``, ``fedhh.rpc.device_stream``) and the aggregator's stage closes
(``fedhh_aggregator.rounds``) read the same instant for every stage. Before, each kept its own
table from stage to field, and then each side its own conversion to seconds
(``participation.stage_deadline_s``, ``rounds.stage_deadline_s``)."""

from __future__ import annotations

from fedhh.secagg.config import StageDeadlines
from fedhh.secagg.messages import Stage

DEADLINES = StageDeadlines(1_000, 2_500, 3_000, 4_750, 5_001)


def test_each_stage_reads_its_own_deadline_in_ms_and_in_seconds() -> None:
    expected = {Stage.ADVERTISE_KEYS: 1_000, Stage.SHARE_KEYS: 2_500, Stage.MASKED_INPUT: 3_000,
                Stage.CONSISTENCY_CHECK: 4_750, Stage.UNMASK: 5_001, Stage.DONE: 5_001}
    assert set(expected) == set(Stage)
    for stage, ms in expected.items():
        assert DEADLINES.of(stage) == ms
        assert DEADLINES.at_s(stage) == ms / 1000
