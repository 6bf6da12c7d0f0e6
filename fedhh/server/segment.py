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

Planned segmentation (issue 15, ``plan="lookahead"`` or ``"spread"``). The greedy rule fills
the dimension limit now and pays later: at P = 10^7 and r = 60, a list of 2,500 prefixes takes
11-bit segments twice and then needs 15 bits in the last round, which carries 305 prefixes;
12, 12 and 13 bits would have trimmed 59 low-estimate prefixes once and carried 1,220 to the
end. So after the first round (whose one prefix makes the greedy segment free) the planner looks
at the whole remaining schedule: it assumes the list keeps its current size C (each carried
prefix has about one continuing child, what the rounds show after the first) and chooses the
segments s_1..s_k of the k remaining rounds, summing to the remaining bits and each at most
floor(log2 P), that carry the most prefixes summed over the rounds, sum_j min(C, P >> s_j).
Ordering a schedule by increasing segments only raises every later list (the running maximum
of the segments decides what fits), so it is a multiset of segments, found by a knapsack over
the segment lengths (``best_schedule``); the round takes its smallest member. Among equally
good schedules the one with the largest smallest segment is taken (the equal split when
nothing has to be trimmed). ``"lookahead"`` keeps the greedy segment whenever the greedy
schedule trims nothing (the paper's rule, which may finish before the T rounds paid for);
``"spread"`` always takes the plan, so an untrimmed tree spends every round it paid for, each
adding about the same number of bits.

Counting only possible elements (issue 15, ``capacity``). The paper's dimension limit counts
every s-bit extension of every prefix, but many are impossible: no honest device can hold them
(``fedhh.codec.automaton``: after the end symbol only zeros follow, unused codewords, invalid
escapes and UTF-8), and they are dropped before thresholding anyway. With English words about
45% of a later round's elements and 74% of the first round's 23-bit elements are impossible.
When a round's report indexes only the possible elements, P bounds their number: the planner
is given ``capacity(s)``, how many of the top prefixes have at most P possible s-bit extensions
in total (``PossibleCounts``), instead of ``P >> s``. Feasibility (every later round adds at most
floor(log2 P) bits) is kept as for the full grid, so the last round can always finish.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fedhh.errors import ConfigError
from fedhh.server.vocabulary import SEGMENT_PLANS


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


def carried(num_prefixes: int, bits: int, dim_limit: int) -> int:
    """Prefixes a round of ``bits``-bit segments carries out of ``num_prefixes``."""
    return min(num_prefixes, dim_limit >> bits)


Capacity = Callable[[int], int]  # segment bits -> how many of the top prefixes fit


def best_schedule(num_prefixes: int, remaining: int, rounds: int, dim_limit: int,
                  masses: np.ndarray | None = None, capacity: Capacity | None = None,
                  top: int | None = None) -> tuple[int, ...]:
    """Segments (ascending) of ``rounds`` rounds covering ``remaining`` bits that carry the most
    prefixes summed over the rounds, a list of ``num_prefixes`` assumed to keep its size (module
    docstring); with ``masses`` (the prefixes' estimated counts, highest first) a round carrying
    the top L prefixes is worth their total mass instead of L. Ties go to the schedule with the
    largest smallest segment, then the largest next one, and so on. ``capacity`` and ``top``
    (the longest segment, default floor(log2 P)): a domain of possible elements only (module
    docstring). ConfigError if no schedule exists."""
    cap = min(floor_log2(dim_limit) if top is None else top, remaining)
    if rounds < 1 or not rounds <= remaining <= rounds * cap:
        raise ConfigError(f"{rounds} rounds of 1 to {cap} bits cannot cover {remaining} bits")
    carry = [carried(num_prefixes, s, dim_limit) if capacity is None
             else min(num_prefixes, capacity(s)) for s in range(1, cap + 1)]
    if masses is None:
        values = [float(c) for c in carry]
    else:
        total = np.concatenate(([0.0], np.cumsum(np.maximum(np.asarray(masses, float), 0.0))))
        values = [float(total[min(c, total.size - 1)]) for c in carry]
    gain = np.array([0.0, *values])
    schedule: list[int] = []
    low, bits, left = 1, remaining, rounds
    while left > 0:
        best_total, best_m = -np.inf, 0
        for m in range(low, min(cap, bits) + 1):
            # table[b]: the best value of the other left - 1 rounds, segments in [m, cap], b bits.
            table = np.full(bits + 1, -np.inf)
            table[0] = 0.0
            for _ in range(left - 1):
                nxt = np.full(bits + 1, -np.inf)
                for seg in range(m, min(cap, bits) + 1):
                    np.maximum(nxt[seg:], table[: bits + 1 - seg] + gain[seg], out=nxt[seg:])
                table = nxt
            total_value = table[bits - m] + gain[m]
            if total_value >= best_total and np.isfinite(total_value):  # ties: larger smallest
                best_total, best_m = total_value, m
        if best_m == 0:
            raise ConfigError(f"{rounds} rounds cannot cover {remaining} bits")
        schedule.append(best_m)
        low, bits, left = best_m, bits - best_m, left - 1
    return tuple(schedule)


def plan_segment(
    num_prefixes: int,
    prefix_bits: int,
    rounds_left: int,
    max_bits: int,
    dim_limit: int,
    fixed_bits: int | None = None,
    plan: str = "greedy",
    masses: np.ndarray | None = None,
    capacity: Capacity | None = None,
) -> SegmentPlan:
    """The next round's segment length and how many prefixes it can carry (``plan``: one of
    ``SEGMENT_PLANS``; ``masses``: the prefixes' estimated counts, highest first, which the
    planned schedules weigh; ``capacity``: how many of the top prefixes fit at each segment
    length when only possible elements count; see the module docstring)."""
    if rounds_left < 1:
        raise ConfigError("no rounds left to plan")
    if plan not in SEGMENT_PLANS:
        raise ConfigError(f"segment plan must be one of {', '.join(SEGMENT_PLANS)}, got {plan!r}")
    remaining = max_bits - prefix_bits
    if remaining < 1:
        raise ConfigError(f"prefixes of {prefix_bits} bits are already complete")
    per_round_cap = floor_log2(dim_limit)
    fits: Capacity = ((lambda b: carried(num_prefixes, b, dim_limit)) if capacity is None
                      else (lambda b: min(num_prefixes, capacity(b))))
    top = per_round_cap if capacity is None else _longest(fits, remaining, per_round_cap)
    needed = remaining - (rounds_left - 1) * (fixed_bits or per_round_cap)
    if fixed_bits is not None:
        bits = remaining if rounds_left == 1 else min(fixed_bits, remaining)
    elif capacity is None:
        bits = min(adaptive_bits(num_prefixes, dim_limit), remaining)
    else:
        bits = max((b for b in range(1, min(top, remaining) + 1) if fits(b) >= num_prefixes),
                   default=-1)
    bits = max(bits, needed, 1)
    # More rounds than bits left cannot all carry a segment: plan the ones that can.
    planned = min(rounds_left, remaining)
    if fixed_bits is None and plan != "greedy" and planned > 1 and bits <= top:
        equal = -(-remaining // planned)
        if prefix_bits == 0:
            # The first round's one prefix makes any segment free: take the greedy one, unless
            # the rounds are plentiful (equal segments leave room for sqrt(P) prefixes).
            if plan == "spread" and 2 * equal <= per_round_cap:
                bits = best_schedule(1, remaining, planned, dim_limit, None, capacity,
                                     top)[0]
        elif plan == "spread" or _greedy_trims(num_prefixes, bits, remaining, planned,
                                                dim_limit, fits, top):
            bits = best_schedule(num_prefixes, remaining, planned, dim_limit, masses,
                                 capacity, top)[0]
    bits = min(bits, remaining)
    if bits > top:
        raise ConfigError(
            f"a segment of {bits} bits exceeds the dimension limit {dim_limit} even for one "
            f"prefix; use more rounds or a larger dim_limit"
        )
    return SegmentPlan(bits=bits, keep_prefixes=fits(bits))


def completion_segment(num_prefixes: int, remaining: int, dim_limit: int) -> SegmentPlan:
    """A completion round's segment (``fedhh.server.prefixtree``): the adaptive one,
    ``max{l : num_prefixes * 2^l <= P}``, at most the ``remaining`` bits of the code; when even
    one bit per prefix does not fit, one bit for the top P/2 prefixes."""
    if remaining < 1:
        raise ConfigError("no bits left to complete")
    bits = max(1, min(adaptive_bits(num_prefixes, dim_limit), remaining))
    return SegmentPlan(bits=bits, keep_prefixes=carried(num_prefixes, bits, dim_limit))


def _longest(fits: Capacity, remaining: int, floor: int) -> int:
    """The longest segment (at most ``remaining`` bits) that fits at least one prefix, never
    below ``floor`` (floor(log2 P): one prefix's full grid always fits)."""
    longest = min(floor, remaining)
    for b in range(longest + 1, remaining + 1):
        if fits(b) < 1:
            break
        longest = b
    return longest


def _greedy_trims(num_prefixes: int, bits: int, remaining: int, rounds: int,
                  dim_limit: int, fits: Capacity, top: int) -> bool:
    """Whether greedy segments, starting with ``bits``, trim a list that keeps its size."""
    cap = floor_log2(dim_limit)
    left = remaining
    for k in range(rounds, 0, -1):
        greedy = max((b for b in range(1, min(top, left) + 1) if fits(b) >= num_prefixes),
                     default=-1)
        s = max(greedy, left - (k - 1) * cap, 1)
        if k == rounds:
            s = bits
        if fits(s) < num_prefixes:
            return True
        left -= s
        if left <= 0:
            return False
    return False


class PossibleCounts:
    """How many s-bit extensions of a prefix some device can hold, from the prefix's automaton
    state: count[s][q] = count[s-1][step(q, 0)] + count[s-1][step(q, 1)], count[0][q] = 1 for
    every live state (DEAD, state 0, has none). Exact integers (at most 2^max_bits)."""

    def __init__(self, step: np.ndarray, max_bits: int) -> None:
        if max_bits > 62:
            raise ConfigError(f"possible-element counts are exact up to 62 bits, got {max_bits}")
        step = np.asarray(step, dtype=np.int64)
        table = np.zeros((max_bits + 1, step.shape[0]), dtype=np.int64)
        table[0, 1:] = 1
        for b in range(1, max_bits + 1):
            table[b] = table[b - 1][step[:, 0]] + table[b - 1][step[:, 1]]
            table[b, 0] = 0
        self.table = table

    def capacity(self, states: np.ndarray, dim_limit: int, grid_limit: int) -> Capacity:
        """For prefixes in these automaton states (top first): how many of the top ones fit at
        s bits, their possible extensions at most ``dim_limit`` in total and their full grid
        at most ``grid_limit`` elements (what a simulated round materialises)."""
        states = np.asarray(states, dtype=np.int64)

        def fits(bits: int) -> int:
            if bits >= self.table.shape[0]:
                return 0
            total = np.cumsum(self.table[bits][states])
            return min(int(np.searchsorted(total, dim_limit, side="right")),
                       grid_limit >> bits)

        return fits


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
            # (what reaches them, as the adaptive case's message says: before, only the gap)
            raise ConfigError(
                f"{rounds} rounds of {fixed_bits}-bit segments cover only "
                f"{fixed_bits * rounds} of the {max_bits} bits of an item: that takes at least "
                f"{-(-max_bits // fixed_bits)} rounds of them, or longer segments (at most "
                f"{floor_log2(dim_limit)} bits at dim_limit {dim_limit}), or fewer bits"
            )
    per_round = floor_log2(dim_limit)
    if rounds * per_round < max_bits:
        raise ConfigError(
            f"{rounds} rounds of at most {per_round} bits (dim_limit {dim_limit}) "
            f"cannot cover {max_bits}-bit items: that takes at least "
            f"{-(-max_bits // per_round)} rounds, or fewer bits"
        )


# The fewest prefixes a round after the first should be able to carry before planning warns
# (``deadline_warning``): a round whose forced segment fits fewer drops the rest of the list.
# Below the paper's own regime: 4 rounds over 60 bits at P = 10^6 fit 61 prefixes, and its
# experiments run so, so a warning there would be noise (the run's note still counts what a
# round could not query, ``trim_note``).
TRIM_WARNING_PREFIXES = 16


def forced_segment(rounds: int, max_bits: int, dim_limit: int) -> int:
    """The least that the longest segment of rounds 2..T can be when T rounds cover
    ``max_bits`` bits (0: the first round covers them all). The first round adds at most
    floor(log2 P) bits (its one prefix), so the other T - 1 rounds add at least the rest, and
    one of them at least ceil(rest / (T - 1)): that round carries at most P >> that many
    prefixes of the full grid, whatever the plan (the paper's Section "Dimension Limitation":
    the last round's list "has to be smaller than desired" to finish in time)."""
    rest = max_bits - min(floor_log2(dim_limit), max_bits)
    if rest <= 0 or rounds < 2:
        return 0
    return -(-rest // (rounds - 1))


def rounds_to_fit(max_bits: int, dim_limit: int, prefixes: int) -> int | None:
    """The fewest rounds T whose forced segment (``forced_segment``) still fits ``prefixes``
    prefixes, or None when even one bit per prefix does not fit (P < 2 * prefixes)."""
    room = floor_log2(dim_limit // prefixes) if prefixes <= dim_limit else 0
    if room < 1:
        return None
    rest = max_bits - min(floor_log2(dim_limit), max_bits)
    return 1 + -(-rest // room) if rest > 0 else 1


def deadline_warning(rounds: int, max_bits: int, dim_limit: int,
                     least: int = TRIM_WARNING_PREFIXES) -> str | None:
    """A warning when covering ``max_bits`` bits in ``rounds`` rounds (no completion rounds,
    adaptive segments over the full grid) forces a round after the first to a segment so long
    that the dimension limit fits fewer than ``least`` prefixes in it; the round then queries
    only the top-estimated prefixes of the list, and the heavy items under the others cannot
    be found. None when every such round can carry ``least`` prefixes."""
    s = forced_segment(rounds, max_bits, dim_limit)
    fits = dim_limit >> s
    if s == 0 or fits >= least:
        return None
    enough = rounds_to_fit(max_bits, dim_limit, least)
    more = f"--rounds {enough}" if enough is not None else "more --rounds"
    return (f"{rounds} rounds for --max-bits {max_bits} force a round after the first to a "
            f"segment of at least {s} bits, and --dim-limit {dim_limit:,} (prefixes x 2^s) "
            f"fits only {fits:,} prefix{'' if fits == 1 else 'es'} in it: that round queries "
            f"only the top-estimated prefixes the round before kept, and heavy items under the "
            f"others are not found. {more} (each round then fits at least {least}), a larger "
            f"--dim-limit, a smaller --max-bits, or --completion-rounds (no deadline) fit more")


def trim_note(rounds: list[dict], dim_limit: int) -> str | None:
    """What the run's output says of prefixes kept but never queried: per round (``rounds``:
    ``RoundReport.to_dict()``s, in order), how many of the prefixes it carried on the next
    round's segment left out, at what segment, and what to change. None when none were."""
    trims = [r for r in rounds if r.get("trimmed")]
    if not trims:
        return None
    total = sum(int(r["trimmed"]) for r in trims)
    parts = []
    for r in trims:
        carried_on = int(r["continuing"]) + int(r["trimmed"])
        s = r["next_segment_bits"]
        parts.append(f"round {r['round']} kept {carried_on:,} prefixes to extend and the next "
                     f"round queried {int(r['continuing']):,} ({s}-bit segments: "
                     f"{int(r['continuing']):,} x 2^{s} within the dimension limit {dim_limit:,})")
    return (f"{total:,} kept prefix{'' if total == 1 else 'es'} could not be queried: "
            + "; ".join(parts) + ". Only the top-estimated prefixes go on, and heavy items "
            "under the others are not found. A round's domain, prefixes x 2^s, is bounded by "
            "--dim-limit, and without completion rounds the segments must cover --max-bits "
            "in --rounds, which forces long ones; more --rounds, a larger --dim-limit, a smaller "
            "--max-bits, or --completion-rounds (no deadline) fit more")
