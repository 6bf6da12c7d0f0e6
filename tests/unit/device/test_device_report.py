"""A device's report from a task: malformed tasks are refused before anything is computed, and
the report is the simulator's for the same stream."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fedhh.codec import MAX_SUPPORTED_BITS, Codec
from fedhh.device import Eligibility, RandomizedResponse, Selection, select_block
from fedhh.errors import ConfigError, FedhhError
from fedhh.secagg import RoundConfig, StageDeadlines
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device.report import DeviceData, make_report, query_of

CODEC = Codec("5bit", 30)


def config_bytes(dimension: int) -> bytes:
    cfg = RoundConfig(b"r", 10, dimension, 16, 5, 4, 3, os.urandom(32),
                      StageDeadlines(1, 2, 3, 4, 5), device_auth=True,
                      identity_root=os.urandom(32))
    return cfg.to_bytes()


def task(**overrides: object) -> pb.Task:
    values: dict[str, object] = dict(
        run_id="r", round=1, attempt=1, device_id=1, prefix_bits=0, prefixes=[0],
        segment_bits=10, eps_local=4.0, codec="5bit", max_bits=30, selection="uniform",
        prefix_conditioning=True, round_config=config_bytes(1024))
    values.update(overrides)
    return pb.Task(**values)  # type: ignore[arg-type]


def test_report_equals_the_simulators_draws() -> None:
    data = DeviceData(("apple", "berry", "cat"), np.array([1, 2, 3]))
    report = make_report(data, task(), np.random.default_rng(4))
    rng = np.random.default_rng(4)
    codes = CODEC.encode_many(list(data.words)).codes
    query = query_of(task())
    eligibility = Eligibility.of(codes, query.round_filter())
    chosen = int(select_block(np.array([0, 3]), np.arange(3), data.counts, eligibility,
                              Selection(), rng)[0])
    index = int(query.domain_index(codes[chosen:chosen + 1])[0])
    expected = RandomizedResponse(4.0).randomize(index, 1024, rng)
    assert np.array_equal(report, expected)


@pytest.mark.parametrize("overrides", [
    {"segment_bits": 0},
    {"segment_bits": 31},
    {"prefixes": []},
    {"prefixes": [3, 1], "prefix_bits": 5, "round_config": config_bytes(2 * 1024)},
    {"prefixes": [64], "prefix_bits": 5, "round_config": config_bytes(1024)},
    {"round_config": config_bytes(512)},
    {"round_config": b"garbage"},
    {"codec": "morse"},
    {"selection": "greedy"},
])
def test_malformed_tasks_are_refused(overrides: dict) -> None:
    data = DeviceData(("apple",), np.array([1]))
    with pytest.raises(FedhhError):
        make_report(data, task(**overrides), np.random.default_rng(0))


def test_query_validation_names_the_problem() -> None:
    with pytest.raises(ConfigError, match="ascending"):
        query_of(task(prefixes=[5, 5], prefix_bits=5))


@pytest.mark.parametrize("width", [200, MAX_SUPPORTED_BITS])
def test_a_task_with_codes_wider_than_64_bits(width: int) -> None:
    """Prefixes of 70 bits travel as two words each, codes of up to the codes' limit as
    ceil(width / 64) words; the device selects the item whose code starts with one of them,
    exactly as the coordinator's query computes it."""
    from fedhh.codec import codes as cw
    from fedhh.server import RoundQuery

    codec = Codec("english", width)
    words = ("https://www.example.com/a", "https://www.example.com/b", "short")
    codes = codec.encode_many(list(words)).codes
    prefixes = np.unique(cw.leading(codes[:2], width, 70))
    deny = codes[1:2]
    sent = task(codec="english", max_bits=width, prefix_bits=70, segment_bits=10,
                prefixes=cw.to_wire(prefixes, 70), deny_list=cw.to_wire(deny, width))
    assert len(sent.prefixes) == 2 * prefixes.size and len(sent.deny_list) == -(-width // 64)
    query = query_of(sent)
    expected = RoundQuery(1, 70, prefixes, 10, deny, width)
    assert cw.to_ints(query.prefixes) == cw.to_ints(prefixes)
    assert cw.to_ints(query.deny) == cw.to_ints(deny)
    data = DeviceData(words, np.array([1, 1, 1]))
    report = make_report(data, sent, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    chosen = select_block(np.array([0, 3]), np.arange(3), data.counts,
                          Eligibility.of(codes, expected.round_filter()), Selection(), rng)
    assert chosen.tolist() == [0]  # the only eligible item: "…/b" is denied, "short" off-list
    index = int(expected.domain_index(codes[:1])[0])
    assert np.array_equal(report, RandomizedResponse(4.0).randomize(index, 1024, rng))


def test_wide_task_lists_must_be_whole_values() -> None:
    with pytest.raises(ConfigError, match="not a multiple"):
        query_of(task(codec="english", max_bits=200, prefix_bits=70, prefixes=[1, 2, 3]))
    with pytest.raises(ConfigError, match="outside"):
        query_of(task(max_bits=MAX_SUPPORTED_BITS + 1))
