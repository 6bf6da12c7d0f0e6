"""What the server computes from a round's sum: the prefix tree and its per-round decisions.

* ``PrefixTree`` (``prefixtree``): the paper's server side per round as a pure state machine:
  ``query(state)`` gives the round's ``RoundQuery`` (prefix list, deny list, segment length),
  ``advance(state, sums, n)`` estimates, prunes and extends the tree (``RoundReport``).
* ``plan_segment`` (``segment``): adaptive segmentation, finishing within T rounds.
* ``prune_hh`` (``prune``): PruneHH, the adaptive threshold.
* ``rr_estimate`` and the null laws (``estimate``): unbiased counts from a sum and the law of a
  zero-count estimate.
* ``Mechanism`` (``mechanisms``): how a round's aggregate is formed and read, per algorithm family.

Nothing here sees a report: only sums. The device side is ``fedhh.device``; the round loop that
joins them through an aggregator is ``fedhh.rounds``.
"""

from __future__ import annotations

from fedhh.server.estimate import rr_estimate, rr_variance
from fedhh.server.mechanisms import LocalRandomizer, Mechanism, TailKind
from fedhh.server.prefixtree import (
    HeavyHitter,
    PrefixTree,
    RoundQuery,
    RoundReport,
    TreeConfig,
    TreeState,
)
from fedhh.server.prune import prune_hh
from fedhh.server.segment import plan_segment

__all__ = [
    "HeavyHitter",
    "LocalRandomizer",
    "Mechanism",
    "PrefixTree",
    "RoundQuery",
    "RoundReport",
    "TailKind",
    "TreeConfig",
    "TreeState",
    "plan_segment",
    "prune_hh",
    "rr_estimate",
    "rr_variance",
]
