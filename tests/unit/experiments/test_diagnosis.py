"""The diagnosis of where heavy hitters are lost follows the simulator's own run: its found
shares are those of `simulate` with the same configuration, and every item is either found or
lost in exactly one round."""

from __future__ import annotations

import numpy as np
import pytest

from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.config import RunConfig
from fedhh.data.dataset import FederatedDataset
from fedhh.data.truth import ground_truth
from fedhh.experiments.diagnosis import lost_by_round
from fedhh.simulation.runner import prepare, simulate


@pytest.mark.parametrize("items", ["1", "3"])
def test_shares_add_up_and_match_the_simulation(tiny: FederatedDataset, items: str) -> None:
    config = RunConfig(eps_agg=2.0, dim_limit=2**16, seed=3, round_items=items)
    bands = ((0, 10), (10, 20), (20, 35))
    result, threshold = lost_by_round(tiny, config, bands)
    assert threshold > 0
    truth = ground_truth(tiny)
    order = np.argsort(-truth.unweighted, kind="stable")
    run = simulate(tiny, config, truth)
    ran = prepare(config, tiny.num_users).config  # the completion rounds it could budget
    codec = Codec.from_spec(ran.codec, ran.code_bits())
    found = {h.code for h in run.heavy_hitters}
    for band in result:
        lo, hi = band.ranks
        assert abs(band.found + sum(band.lost_in.values()) - 1.0) < 1e-12
        words = [tiny.vocabulary[i] for i in order[lo:hi]]
        codes = cw.to_ints(codec.encode_many(words).codes)
        assert band.found == sum(c in found for c in codes) / (hi - lo)
