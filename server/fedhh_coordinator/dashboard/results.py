"""What a run found and what it cost, for the dashboard: heavy hitters with their standard
deviations, and the privacy spent per round and in total against the run's target.

Heavy hitters come from the same call as the admin API's GetResults
(``PrefixTree.heavy_hitters`` on the stored tree state), in the same order, so the rank here is
the rank of ``fedhh admin results``. Privacy figures come from the run's ``PrivacyLedger``; the
dashboard only reads it.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

from fedhh.codec.shown import cut_item
from fedhh.privacy import PrivacyLedger
from fedhh.server import HeavyHitter
from fedhh.server.causes import cut_cause, ran_out_cause
from fedhh.server.mechanisms import estimate_std
from fedhh_coordinator.runs import RunParts, stored_ledger
from fedhh_coordinator.store import RoundRow, RunHead, RunRow

# What each accounting method is, for the chart's caption; an unknown name is shown as it is.
METHODS = {
    "exact": "numerical shuffle bound of 'Hiding Among the Clones' (FMT21), RDP composition",
    "clones": "numerical shuffle bound of 'Hiding Among the Clones' (FMT21), RDP composition",
    "paper": "the paper's accounting: RDP of shuffling (FMT23, Theorem 3.2)",
    "closed-form": "closed-form shuffle bound (FMT21, Theorem 3.1), advanced composition",
    "sum": "exact accounting of the released sums (privacy loss distributions)",
}


@dataclass(frozen=True)
class Hit:
    rank: int
    item: str
    estimate: float
    std: float  # nan when the round's contributor count is unknown
    round: int
    truncated: bool = False  # the item's text is its prefix of ``bits`` bits (HeavyHitter)
    bits: int = 0
    note: str = ""  # several cut prefixes show this text: the estimate is their sum
    cause: str = ""  # truncated: why it was not completed (``fedhh.server.causes.cut_cause``)
    code: str = ""  # the code in fixed-width hex (``HeavyHitter.code_hex``): the bits it holds
    prefix_bytes: int = 0  # truncated: the item's first bytes it holds (the rest never found)

    @property
    def text(self) -> str:
        """What the heavy-hitter filter matches (the page's and the downloads'): the item; for a
        cut prefix, the characters it stands for (``cut_item``), not its marks. Before, the
        shown text: ``?q=bits`` kept every row cut inside a codeword (``ab⟨+3 bits⟩…``)."""
        return cut_item(self.item) if self.truncated else self.item


def heavy_hitters(parts: RunParts, rounds: list[RoundRow], ran_out: str | None = None) -> list[Hit]:
    """The run's heavy hitters in the order of GetResults, each with its standard deviation.
    ``ran_out``: a truncated row's cause where the rounds ran out on it (``ran_out_cause``,
    which the caller asked the planner for off the event loop); None: the test alone."""
    return _hits(parts, rounds, parts.tree.heavy_hitters(parts.state), ran_out)


def cut_prefixes(parts: RunParts, rounds: list[RoundRow], ran_out: str | None = None) -> list[Hit]:
    """The heavy prefixes the completion rounds could not complete, as GetResults lists them
    apart from the heavy hitters (``PrefixTree.cut_prefixes``): each stands for every item
    starting so. ``ran_out`` as ``heavy_hitters``'."""
    return _hits(parts, rounds, parts.tree.cut_prefixes(parts.state), ran_out)


def _hits(parts: RunParts, rounds: list[RoundRow], found: list[HeavyHitter],
          ran_out: str | None) -> list[Hit]:
    contributors = {r.round: r.contributors for r in rounds if r.state == "released"}
    last = max(contributors, default=0)
    if ran_out is None:
        ran_out = ran_out_cause(parts.config, parts.ledger.eps_local)
    # (each round's own mechanism: a completion round runs at a smaller share of the budget,
    # whose noise the main rounds' mechanism understated; a truncated row's cause as
    # `fedhh simulate --json` and `fedhh up` give it)
    return [Hit(rank, h.item, h.estimate,
                estimate_std(parts.tree.mechanism_for(h.round), h.estimate,
                             contributors.get(h.round, 0), h.parts),
                h.round, h.truncated, h.bits if h.truncated else 0, h.note,
                cut_cause(h.round, h.bits, h.max_bits, last, ran_out) if h.truncated else "",
                h.code_hex, h.prefix_bytes if h.truncated else 0)
            for rank, h in enumerate(found, start=1)]


@dataclass(frozen=True)
class Charge:
    """One charged round: its own epsilon, and the run's composed total after it."""

    label: str
    contributors: int
    epsilon: float
    cumulative: float


@dataclass(frozen=True)
class RunSpend:
    method: str
    description: str
    eps_agg: float
    delta: float
    eps_local: float
    rounds: int
    n_min: int
    charges: tuple[Charge, ...]

    @property
    def spent(self) -> float:
        return self.charges[-1].cumulative if self.charges else 0.0


class SpendCache:
    """``RunSpend`` of a ledger, computed once per ledger content (composition is not free).
    Asked from the event loop and from the dashboard's threads (``Views.runs``)."""

    def __init__(self, size: int = 128) -> None:
        self.size = size
        self._cache: OrderedDict[str, RunSpend] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, row: RunRow | RunHead) -> RunSpend:
        """StoreDamaged if the run's stored ledger does not read back."""
        key = json.dumps(row.ledger, sort_keys=True)
        with self._lock:
            spend = self._cache.get(key)
            if spend is not None:
                self._cache.move_to_end(key)
                return spend
        spend = privacy_spend(stored_ledger(row))
        with self._lock:
            self._cache[key] = spend
            self._cache.move_to_end(key)
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return spend


def privacy_spend(ledger: PrivacyLedger) -> RunSpend:
    """Each charge alone and the composed total after each, with the ledger's own method."""
    charges = []
    for k, spend in enumerate(ledger.spends, start=1):
        attempt = getattr(spend, "attempt", None)
        label = f"round {spend.round_index + 1}" + (f".{attempt}" if attempt else "")
        alone = replace(ledger, spends=(spend,)).spent_epsilon()
        total = replace(ledger, spends=ledger.spends[:k]).spent_epsilon()
        charges.append(Charge(label, spend.contributors, alone, total))
    return RunSpend(ledger.method, METHODS.get(ledger.method, ledger.method), ledger.eps_agg,
                 ledger.delta, ledger.eps_local, ledger.rounds, ledger.n_min, tuple(charges))
