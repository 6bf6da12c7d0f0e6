"""RunConfig's upper bounds (issue 28): every count, size and time a run names is refused by
name, in one line, above its documented bound, before anything is computed from it; at the
bound it is not refused for its size."""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import pytest

from fedhh.codec import MAX_SUPPORTED_BITS
from fedhh.config import (
    MAX_ATTEMPTS,
    MAX_CODEC_SPEC_CHARS,
    MAX_DENY_ITEMS,
    MAX_DEVICES,
    MAX_ITEM_CHARS,
    MAX_LIST_CHARS,
    MAX_OVERSUBSCRIPTION,
    MAX_ROUNDS,
    MAX_SIMULATION_DIM_LIMIT,
    MAX_WINDOW_MS,
    WINDOW_FIELDS,
    Mode,
    RunConfig,
)
from fedhh.errors import ConfigError
from fedhh.secagg.config import MAX_DIMENSION

NETWORK = dict(target_devices=1000, min_devices=100)

# (field, the bound, the mode it is checked in)
BOUNDS: list[tuple[str, Any, Mode]] = [
    ("rounds", MAX_ROUNDS, Mode.SIMULATION),
    ("max_bits", MAX_SUPPORTED_BITS, Mode.SIMULATION),
    ("segment_bits", MAX_SUPPORTED_BITS, Mode.SIMULATION),
    ("dim_limit", MAX_SIMULATION_DIM_LIMIT, Mode.SIMULATION),
    ("dim_limit", MAX_DIMENSION, Mode.NETWORK),
    ("target_devices", MAX_DEVICES, Mode.NETWORK),
    ("min_devices", MAX_DEVICES, Mode.NETWORK),
    ("shard_size", MAX_DEVICES, Mode.NETWORK),
    ("max_attempts", MAX_ATTEMPTS, Mode.NETWORK),
    ("oversubscription", MAX_OVERSUBSCRIPTION, Mode.NETWORK),
    *[(name, MAX_WINDOW_MS, Mode.NETWORK)
      for name in ("checkin_ms", "checkin_quiet_ms", "stage_ms", *WINDOW_FIELDS)],
]


def over(value: Any) -> Any:
    return value * 1.5 if isinstance(value, float) else value + 1


def shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@pytest.mark.parametrize(("name", "bound", "mode"), BOUNDS)
def test_a_value_over_its_bound_is_refused_by_name(name: str, bound: Any, mode: Mode) -> None:
    base = NETWORK if mode is Mode.NETWORK else {}
    with pytest.raises(ConfigError, match=rf"^{name} must be at most {shown(bound)}\b") as refused:
        RunConfig(**{**base, name: over(bound)}).validate(mode)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(("name", "bound", "mode"), BOUNDS)
def test_a_value_at_its_bound_is_not_refused_for_its_size(name: str, bound: Any,
                                                          mode: Mode) -> None:
    base = NETWORK if mode is Mode.NETWORK else {}
    try:
        RunConfig(**{**base, name: bound}).validate(mode)
    except ConfigError as error:  # another rule may still refuse the combination
        assert not str(error).startswith(f"{name} must be at most"), error


@pytest.mark.parametrize(("values", "match"), [
    ({"deny_list": ("x",) * (MAX_DENY_ITEMS + 1)}, "the deny list has 1000001 items"),
    ({"deny_list": ("y" * (MAX_ITEM_CHARS + 1),)}, r"\(1001 characters\) is too long"),
    ({"codec": "{" + " " * MAX_CODEC_SPEC_CHARS}, "the codec spec has"),
    ({"round_items": "1," * MAX_LIST_CHARS}, "round_items has"),
    ({"round_budget": "1," * MAX_LIST_CHARS}, "round_budget has"),
    ({"round_fp_ratio": "0.5," * MAX_LIST_CHARS}, "round_fp_ratio has"),
])
def test_sizes_over_their_bounds_are_refused(values: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        RunConfig(**values).validate()


@pytest.mark.parametrize("rounds", [2**32 - 1, 2 * 10**7])
def test_absurd_rounds_are_refused_at_once_with_memory_flat(rounds: int) -> None:
    """Before: rounds = 2^32 - 1 raised a MemoryError (the per-round list of round_items) and
    2*10^7 took the coordinator to 7.6 GB."""
    tracemalloc.start()
    started = time.thread_time()  # (CPU time: a loaded machine stretches wall time, not work)
    try:
        with pytest.raises(ConfigError, match=f"rounds must be at most {MAX_ROUNDS}"):
            RunConfig(rounds=rounds, **NETWORK).validate(Mode.NETWORK)
        elapsed = time.thread_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < 1.0 and peak < 1 << 20, (elapsed, peak)


def test_a_cohort_without_secure_aggregation_parameters_is_refused_up_front() -> None:
    """Issue 28: `fedhh up --devices 5` tried five attempts before saying that no (k, t)
    exists for 5 devices. Such a run is now refused at validation, naming what would do."""
    with pytest.raises(ConfigError, match=r"a cohort of 5 devices cannot run secure "
                                          r"aggregation: no \(k, t\) for n=5.*use more devices"):
        RunConfig(target_devices=5, min_devices=3).validate(Mode.NETWORK)
    RunConfig(target_devices=5, min_devices=3, expected_dropout=0.0,
              corrupt_fraction=0.0).validate(Mode.NETWORK)  # no dropout assumed: (k, t) exist
    with pytest.raises(ConfigError, match="a cohort of 20 devices"):  # a shard is the cohort
        RunConfig(target_devices=1000, min_devices=20, shard_size=20).validate(Mode.NETWORK)


def test_an_explicit_eps_local_is_at_most_what_the_accountants_solve_for() -> None:
    """Before: simulate --eps-local 1e308 said "eps_agg must be a positive finite number, got
    inf", naming neither the option nor the value given."""
    with pytest.raises(ConfigError, match=r"eps_local must be at most 40.0 \(the largest the "
                       r"accountants solve for.*got 1e\+308"):
        RunConfig(eps_local=1e308).validate(Mode.SIMULATION)
    assert RunConfig(eps_local=40.0).validate(Mode.SIMULATION).eps_local == 40.0


def test_completion_rounds_are_at_most_max_rounds() -> None:
    """Before: --completion-rounds 1e6 was accepted, and the planner solved for a million
    rounds (past 20 s) before it could drop the ones it cannot budget."""
    with pytest.raises(ConfigError, match=f"completion_rounds must be at most {MAX_ROUNDS}, "
                       "got 1000000"):
        RunConfig(completion_rounds=1_000_000).validate(Mode.SIMULATION)
    assert RunConfig(completion_rounds=MAX_ROUNDS).validate(Mode.SIMULATION)


def test_a_deny_list_item_may_hold_spaces_but_not_a_line_break() -> None:
    """Items are any one line of Unicode (docs/datasets.md): before, "new york" was refused
    as holding whitespace."""
    assert RunConfig(deny_list=("new york", "1\u00a0000")).validate().deny_list == (
        "new york", "1\u00a0000")
    for bad, defect in (("a\nb", "holds a line break"), ("", "is empty")):
        with pytest.raises(ConfigError, match=defect):
            RunConfig(deny_list=(bad,)).validate()


def test_fp_ratio_finished_none_is_refused_on_the_network() -> None:
    """'none' cannot travel (an unset field is the default 0.1): a networked run would have
    kept 0.1 without a word; refused by name instead, and still accepted in simulation."""
    config = RunConfig(fp_ratio_finished=None, **NETWORK)
    with pytest.raises(ConfigError, match=r"fp_ratio_finished none .* simulation only"):
        config.validate(Mode.NETWORK)
    RunConfig(fp_ratio_finished=None).validate(Mode.SIMULATION)


@pytest.mark.parametrize(("values", "said"), [
    # (before: "rounds must be a int", "dim_limit must be an optional int")
    ({"rounds": "4"}, "rounds must be an integer, got '4'"),
    ({"rounds": True}, "rounds must be an integer, got True"),
    ({"dim_limit": "x"}, "dim_limit must be an integer or None, got 'x'"),
    ({"eps_agg": "1"}, "eps_agg must be a number, got '1'"),
    ({"warm_start": 1}, "warm_start must be true or false, got 1"),
    ({"algorithm": 3}, "algorithm must be a string, got 3"),
    # (before: "deny_list must be a tuple, got (5,)", of a tuple)
    ({"deny_list": [5]}, "deny_list must hold strings only: element 0 (5) is an int"),
    ({"deny_list": ["a", None]}, "deny_list must hold strings only: element 1 (None) is None"),
])
def test_a_value_of_the_wrong_type_is_named_in_words(values: dict[str, object],
                                                      said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        RunConfig.from_dict(values)
    assert str(refused.value) == said
