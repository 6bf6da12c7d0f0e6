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

Names are imported on first use (PEP 562), so a module that needs only ``vocabulary`` (the run
configuration) does not load the round logic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedhh.lazy import lazy_names

if TYPE_CHECKING:
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

_WHERE = {
    "rr_estimate": "estimate",
    "rr_variance": "estimate",
    "LocalRandomizer": "mechanisms",
    "Mechanism": "mechanisms",
    "TailKind": "mechanisms",
    "HeavyHitter": "prefixtree",
    "PrefixTree": "prefixtree",
    "RoundQuery": "prefixtree",
    "RoundReport": "prefixtree",
    "TreeConfig": "prefixtree",
    "TreeState": "prefixtree",
    "prune_hh": "prune",
    "plan_segment": "segment",
}

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


__getattr__, __dir__ = lazy_names(__name__, _WHERE, globals())
