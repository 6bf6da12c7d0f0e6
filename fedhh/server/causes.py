"""Why a cut prefix (or an item truncated at the code's width) was not completed, in the words
every list uses: `fedhh simulate`'s ``why`` column and JSON ``cause``, `fedhh up`'s row and the
dashboard's JSON download."""

from __future__ import annotations

from fedhh.codec.codec import MAX_SUPPORTED_BITS

__all__ = ["cut_cause"]


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
