"""Segment lengths: how many bits the next round adds to every prefix.

Adaptive segmentation (paper, Section "Adaptive Segmentation"): the largest l with
``|prefix list| * 2^l <= P``; the first round has one (empty) prefix, so s_1 = floor(log2 P).

Finishing within T rounds. Items are ``max_bits`` long, so the segments must add up to the bits
still missing. We cap a segment at the bits remaining and raise it to the least that still lets
the remaining rounds finish when each later round can add at most floor(log2 P) bits (one prefix);
in the last round that forces the segment to cover every remaining bit. When the prefix list is
then too long for the dimension limit, only the top-estimated prefixes are kept (the paper's
Section "Dimension Limitation"). This reproduces the paper's segmentations [23, 14, 11, 12]
(Huffman) and [23, 13, 12, 12] (5-bit) at P = 10^7, r = 60, T = 4.

The fixed variant uses the given length every round, also capped by the bits remaining and
forced to finish in the last round.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedhh.errors import ConfigError


def floor_log2(x: int) -> int:
    """floor(log2 x) for a positive integer, exactly."""
    if x < 1:
        raise ConfigError(f"floor_log2 needs a positive integer, got {x}")
    return x.bit_length() - 1


def adaptive_bits(num_prefixes: int, dim_limit: int) -> int:
    """max{l : num_prefixes * 2^l <= P} (-1 when even l = 0 does not fit)."""
    if num_prefixes > dim_limit:
        return -1
    return floor_log2(dim_limit // num_prefixes)


@dataclass(frozen=True)
class SegmentPlan:
    bits: int           # segment length of the next round
    keep_prefixes: int  # how many prefixes fit (the list is trimmed to this many, top first)


def plan_segment(
    num_prefixes: int,
    prefix_bits: int,
    rounds_left: int,
    max_bits: int,
    dim_limit: int,
    fixed_bits: int | None = None,
) -> SegmentPlan:
    """The next round's segment length and how many prefixes it can carry."""
    if rounds_left < 1:
        raise ConfigError("no rounds left to plan")
    remaining = max_bits - prefix_bits
    if remaining < 1:
        raise ConfigError(f"prefixes of {prefix_bits} bits are already complete")
    per_round_cap = floor_log2(dim_limit)
    needed = remaining - (rounds_left - 1) * (fixed_bits or per_round_cap)
    if fixed_bits is not None:
        bits = remaining if rounds_left == 1 else min(fixed_bits, remaining)
    else:
        bits = min(adaptive_bits(num_prefixes, dim_limit), remaining)
    bits = max(bits, needed, 1)
    bits = min(bits, remaining)
    if bits > per_round_cap:
        raise ConfigError(
            f"a segment of {bits} bits exceeds the dimension limit {dim_limit} even for one "
            f"prefix; use more rounds or a larger dim_limit"
        )
    return SegmentPlan(bits=bits, keep_prefixes=min(num_prefixes, dim_limit >> bits))


def check_feasible(
    rounds: int, max_bits: int, dim_limit: int, fixed_bits: int | None = None
) -> None:
    """Fail early when T rounds cannot cover max_bits bits under the dimension limit."""
    if rounds < 1:
        raise ConfigError(f"rounds must be >= 1, got {rounds}")
    if dim_limit < 2:
        raise ConfigError(f"dim_limit must be >= 2, got {dim_limit}")
    if fixed_bits is not None:
        if not 1 <= fixed_bits <= floor_log2(dim_limit):
            raise ConfigError(
                f"segment_bits must be in [1, {floor_log2(dim_limit)}] for dim_limit "
                f"{dim_limit}, got {fixed_bits}"
            )
        if fixed_bits * rounds < max_bits:
            raise ConfigError(
                f"{rounds} rounds of {fixed_bits}-bit segments cover only "
                f"{fixed_bits * rounds} of the {max_bits} bits of an item"
            )
    if rounds * floor_log2(dim_limit) < max_bits:
        raise ConfigError(
            f"{rounds} rounds of at most {floor_log2(dim_limit)} bits (dim_limit {dim_limit}) "
            f"cannot cover {max_bits}-bit items"
        )
