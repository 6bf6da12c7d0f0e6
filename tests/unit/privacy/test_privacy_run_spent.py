"""A simulated run reports what its released rounds spent, beside the plan for every round."""

from __future__ import annotations

import numpy as np

from fedhh.config import RunConfig
from fedhh.data.dataset import from_user_counts
from fedhh.privacy import PrivacyLedger
from fedhh.simulation.runner import simulate


def test_a_run_that_ends_early_reports_its_spend() -> None:
    # Four words among 2,000 devices: the tree finds them in 2 of the 12 rounds paid for, and
    # stops. The report gave only the plan (eps_agg over 12 rounds); it now also gives the
    # ledger's charges composed, the figure the coordinator reports as eps_spent. (An explicit
    # eps_local: no solve, ~1 s.)
    rng = np.random.default_rng(0)
    words = ("the", "and", "you", "that")
    dataset = from_user_counts([{words[int(rng.integers(4))]: 1} for _ in range(2_000)],
                               name="four-words")
    result = simulate(dataset, RunConfig(codec="5bit", rounds=12, eps_local=3.0,
                                         dim_limit=2**16, seed=1, completion_rounds=0))
    assert result.ledger is not None
    privacy = result.to_dict()["privacy"]
    charged = len(result.ledger.spends)
    assert 1 <= charged == len(result.rounds) < 12 and privacy["rounds_spent"] == charged
    # the persisted ledger, composed again, gives the reported figure exactly
    again = PrivacyLedger.from_dict(result.ledger.to_dict()).spent_epsilon()
    assert privacy["eps_agg_spent"] == again
    # the plan: every one of the 12 rounds charged at the run's devices
    assert privacy["eps_agg"] == result.ledger.projected_epsilon() == result.ledger.eps_agg
    assert 0 < privacy["eps_agg_spent"] < privacy["eps_agg"]
