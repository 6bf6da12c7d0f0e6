"""Where a discovery loses the true heavy hitters: the round in which each item's prefix left
the tree (issue 15's diagnosis, docs/utility.md).

``lost_by_round(dataset, config)`` drives one discovery (multiple items, no passes, no second
run) round by round with the simulator's own pieces (``prepare``, ``SimulatedRounds``,
``PrefixTree``), keeps every round's prefix list, and reports for bands of the true ranking
(items ordered by how many devices hold them) the share found and the share whose prefix was
last on the list in round r. It also gives each lost item's count of reports in the first
round against that round's threshold.

    python -m fedhh.experiments.diagnosis dev-reddit-400k            # the paper's algorithm
    python -m fedhh.experiments.diagnosis dev-reddit-400k '{"segment_plan": "spread"}'
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.config import Mode, RunConfig
from fedhh.data.dataset import FederatedDataset
from fedhh.errors import ConfigError
from fedhh.server.prefixtree import PrefixTree, RoundQuery
from fedhh.simulation.population import Population
from fedhh.simulation.rounds import SimulatedRounds
from fedhh.simulation.runner import prepare

BANDS = ((0, 1000), (1000, 2000), (2000, 3000), (3000, 4000), (4000, 6000), (6000, 8000))


@dataclass(frozen=True)
class Band:
    ranks: tuple[int, int]
    holders: tuple[int, int]       # devices holding the band's first and last item
    found: float                   # share found
    lost_in: dict[int, float]      # round -> share whose prefix left the tree in that round
    first_round_reports: float     # median reports in round 1 of the items lost there


def lost_by_round(dataset: FederatedDataset, config: RunConfig,
                  bands: tuple[tuple[int, int], ...] = BANDS) -> tuple[list[Band], float]:
    """The bands' outcomes, and the first round's threshold (estimated reports)."""
    from fedhh.data.truth import ground_truth

    if config.single_item or config.two_runs or config.leftover_rounds != "idle":
        raise ConfigError("the diagnosis follows one tree of a multiple-item run")
    prepared = prepare(config, dataset.num_users)
    config = prepared.config  # the completion rounds the population can budget, as run
    codec = Codec.from_spec(config.codec, config.code_bits())
    truth = ground_truth(dataset)
    order = np.argsort(-truth.unweighted, kind="stable")[: bands[-1][1]]
    holders = np.rint(truth.unweighted[order] * dataset.num_users).astype(np.int64)
    codes = codec.encode_many([dataset.vocabulary[i] for i in order]).codes
    deny = codec.encode_many(config.deny_items()).codes
    tree = PrefixTree(config.tree(Mode.SIMULATION), codec, prepared.mechanism, deny,
                      prepared.round_mechanisms)
    transport = SimulatedRounds(Population.build(dataset, codec), prepared.mechanism,
                                config.selection_rule(), prepared.participation, config.seed,
                                round_mechanisms=prepared.round_mechanisms,
                                round_items=prepared.round_items)
    state = tree.initial_state()
    queries: list[RoundQuery] = []
    first_counts: np.ndarray = np.zeros(0)
    threshold = float("nan")
    while not state.done:
        query = tree.query(state)
        drawn = transport.aggregate(query)
        if not queries:
            index = query.domain_index(codes)
            first_counts = np.where(index >= 0, drawn.true_counts[np.maximum(index, 0)], 0)
        state, report = tree.advance(state, drawn.sums, drawn.participants, drawn.true_counts)
        if not queries:
            threshold = report.threshold
        queries.append(query)
    found = np.isin(codes, cw.from_ints([f.code for f in state.discovered], config.code_bits()))
    # The last round whose list held the item's prefix (1-based; the item is lost there).
    last = np.zeros(codes.size, dtype=np.int64)
    for r, query in enumerate(queries, start=1):
        on = query.domain_index(codes) >= 0
        last[on] = r
    out = []
    for lo, hi in bands:
        part = slice(lo, min(hi, codes.size))
        lost = ~found[part]
        rounds = last[part][lost]
        shares = {r: float(np.count_nonzero(rounds == r)) / max(hi - lo, 1)
                  for r in range(1, len(queries) + 1)}
        reports = first_counts[part][lost & (last[part] == 1)]
        out.append(Band((lo, hi), (int(holders[lo]), int(holders[min(hi, codes.size) - 1])),
                        float(np.mean(found[part])), shares,
                        float(np.median(reports)) if reports.size else float("nan")))
    return out, threshold


def main(argv: list[str]) -> int:
    from fedhh.experiments.populations import resolve

    if not 1 <= len(argv) <= 2:
        print(__doc__, file=sys.stderr)
        return 2
    overrides: dict[str, Any] = json.loads(argv[1]) if len(argv) > 1 else {}
    config = RunConfig(**overrides).validate(Mode.SIMULATION)
    bands, threshold = lost_by_round(resolve(argv[0]), config)
    print(f"first round's threshold: {threshold:.1f} reports")
    for b in bands:
        lost = ", ".join(f"round {r}: {share:.0%}" for r, share in b.lost_in.items() if share)
        print(f"ranks {b.ranks[0]}-{b.ranks[1]} (held by {b.holders[0]}-{b.holders[1]}): "
              f"found {b.found:.0%}; lost in {lost or '-'}; median first-round reports of "
              f"those lost there {b.first_round_reports:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
