"""Segmentation: s_1 = floor(log2 P), |prefixes| * 2^s <= P always, items finish in T rounds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.errors import ConfigError
from fedhh.server.segment import adaptive_bits, check_feasible, floor_log2, plan_segment


def test_floor_log2_exact() -> None:
    assert [floor_log2(x) for x in (1, 2, 3, 4, 10**7, 2**23, 2**23 - 1)] == \
        [0, 1, 1, 2, 23, 23, 22]


def test_adaptive_bits_definition() -> None:
    for k in (1, 2, 7, 610, 611, 4882, 10**7):
        s = adaptive_bits(k, 10**7)
        assert k * 2**s <= 10**7 < k * 2 ** (s + 1)


def test_reproduces_the_papers_segmentation() -> None:
    # Huffman run of the paper, P = 1e7, r = 60, T = 4: [23, 14, 11, 12].
    plans = [plan_segment(1, 0, 4, 60, 10**7)]
    plans.append(plan_segment(600, 23, 3, 60, 10**7))
    plans.append(plan_segment(4000, 37, 2, 60, 10**7))
    plans.append(plan_segment(3000, 48, 1, 60, 10**7))
    assert [p.bits for p in plans] == [23, 14, 11, 12]
    assert plans[-1].keep_prefixes == 10**7 // 2**12  # the last round trims the list


@settings(max_examples=500, deadline=None, derandomize=True)
@given(
    prefixes=st.integers(1, 10**6),
    prefix_bits=st.integers(0, 59),
    rounds_left=st.integers(1, 12),
    dim_exp=st.integers(10, 24),
    fixed=st.one_of(st.none(), st.integers(1, 10)),
)
def test_domain_never_exceeds_the_limit(prefixes, prefix_bits, rounds_left, dim_exp, fixed):
    dim = 2**dim_exp + 12345
    remaining = 60 - prefix_bits
    try:
        plan = plan_segment(prefixes, prefix_bits, rounds_left, 60, dim, fixed)
    except ConfigError:
        assert remaining > rounds_left * floor_log2(dim) or (fixed and fixed > floor_log2(dim)) \
            or remaining - (rounds_left - 1) * (fixed or 0) > floor_log2(dim)
        return
    assert 1 <= plan.bits <= remaining
    assert plan.keep_prefixes * 2**plan.bits <= dim
    assert plan.keep_prefixes <= prefixes
    if rounds_left == 1:
        assert plan.bits == remaining


def test_infeasible_configurations_fail_early() -> None:
    with pytest.raises(ConfigError, match="cannot cover"):
        check_feasible(2, 60, 10**7)
    # (and what reaches them: before, only the gap)
    with pytest.raises(ConfigError, match=r"cover only 45 of the 60 bits of an item: that takes "
                       r"at least 4 rounds of them, or longer segments \(at most 23 bits at "
                       r"dim_limit 10000000\), or fewer bits"):
        check_feasible(3, 60, 10**7, fixed_bits=15)
    with pytest.raises(ConfigError, match="segment_bits"):
        check_feasible(2, 60, 10**7, fixed_bits=30)
    check_feasible(4, 60, 10**7, fixed_bits=15)


def test_rounds_too_few_for_the_bits_name_how_many_it_takes() -> None:
    """Before, the error said only that the rounds could not cover the bits: a user who had
    followed a truncation note's --max-bits was left to work out --rounds."""
    with pytest.raises(ConfigError, match=r"cannot cover 1024-bit items: that takes at least "
                                          r"45 rounds, or fewer bits"):
        check_feasible(4, 1024, 10_000_000)
    check_feasible(45, 1024, 10_000_000)
