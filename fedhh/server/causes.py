"""Why a cut prefix (or an item truncated at the code's width) was not completed, in the words
every list uses: `fedhh simulate`'s ``why`` column and JSON ``cause``, `fedhh up`'s row and the
dashboard's JSON download; and the one note on many prefixes lost in the completion rounds, which
the consoles print and the JSON outputs carry as a field (a service reads it here: it may not
import the CLI)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fedhh.codec.codec import MAX_SUPPORTED_BITS

__all__ = ["cut_cause", "lost_in_completion_note"]


def cut_cause(round_: int, bits: int, width: int, last: int) -> str:
    """Why a cut prefix was not completed, as its row says: the rounds (or the code's width)
    ran out while it was still heavy, which more --completion-rounds extend, or the round after
    the one that kept it lost every extension (its count fell below that cheaper round's
    threshold, which more devices or a larger --eps-agg lower); or it reached the codes' limit
    (``MAX_SUPPORTED_BITS``), which nothing extends: before, that read "no rounds left" with
    rounds left. ``width``: the code's width; ``last``: the last round the run ran."""
    if width >= MAX_SUPPORTED_BITS and bits >= width:
        # (more --completion-rounds add nothing: codes end there, rounds were left or not)
        return f"the codes' limit, {MAX_SUPPORTED_BITS:,} bits"
    if round_ >= last or (width and bits >= width):
        return "no rounds left"
    return f"lost in round {round_ + 1}"


def lost_in_completion_note(causes: list[str], found: Sequence[tuple[int, bool]], main: int,
                            weight: float, thresholds: dict[int, Any]) -> str | None:
    """A note when the completion rounds (those after the ``main`` ones) lost many prefixes
    (``causes``, the cut prefixes' ``lost in round N``: at least 20, and a quarter of the
    ``found`` items, each its round and whether it is truncated), or more than they completed
    (found whole in a completion round): the first runs at ``weight`` of a main
    round's budget, the later ones at less (``RunConfig.completion_weights``), and their
    threshold (``thresholds``, by round) is several times the main rounds'. Before, nothing said
    so: synthetic-urls at the weights before 2026-12-05 found 320 URLs whole and lost 353
    prefixes in its first completion round (threshold 429 against 50); at the defaults since,
    494 whole and ~180 lost (README.md).
    A run of few long items lost most of them unnoted below 20: 2,000 users, 7 long items held
    by 200 each, at eps_agg 1 found 3 words and lost 5 long prefixes in the completion rounds,
    completing none (`fedhh simulate`); over the network at n_min 1,800, lost 5 and completed
    one short word. Losing more than they completed is most of their yield lost, however few;
    a few lost beside more completed are the usual noise at a cheaper round's threshold."""
    completed = sum(round_ > main and not truncated for round_, truncated in found)
    lost = 0
    for cause in causes:
        where = cause.removeprefix("lost in round ")
        lost += where.isdigit() and int(where) > main
    if not lost or (lost <= completed and lost < max(20, len(found) / 4)):
        return None
    last, first = thresholds.get(main), thresholds.get(main + 1)
    against = (f" (threshold {first:,.0f} against the last main round's {last:,.0f})"
               if isinstance(last, int | float) and isinstance(first, int | float) else "")
    return (f"{lost:,} prefixes were lost in the completion rounds{against}: the first runs "
            f"at --completion-weight {weight:g} of a main round's budget, the later ones at "
            "less. A larger weight (0.5, 1) completes more long items (URLs, e-mail addresses) "
            "at the main rounds' cost; docs/codecs.md.")
