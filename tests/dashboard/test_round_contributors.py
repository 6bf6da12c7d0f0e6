"""The dashboard says a released round's contributors, the reports in its total, and divides
its estimates' spread by them; the charge, where it differs, is said as a charge.

A sharded round with a shard lost after unmasking is charged at n_min whatever the total's
count (docs/scaling.md): the round's row keeps the charge (``participants``) and its tree
report the count summed (``summary["participants"]``). Before, with 100 reports summed and a
charge of 80, the attempt read "80 contributors" and each hit's standard deviation was
taken over 80 devices."""

from __future__ import annotations

from types import SimpleNamespace

from fedhh.codec import Codec
from fedhh.codec import codes as cw
from fedhh.config import RunConfig
from fedhh.server import LocalRandomizer, PrefixTree, TreeConfig
from fedhh.server.prefixtree import Found, TreeState
from fedhh_coordinator.dashboard.pages import attempt_card
from fedhh_coordinator.dashboard.results import estimate_std, heavy_hitters
from fedhh_coordinator.dashboard.timeline import attempt_view
from fedhh_coordinator.store import RoundRow

T0 = 1_800_000_000.0
LOST_SHARD = RoundRow("r", 1, 1, "released", "", 80,
                      {"participants": 100, "kept": 1, "finished": 1, "threshold": 30.0},
                      T0, T0 + 20)


def test_a_round_charged_at_n_min_shows_the_reports_in_its_total() -> None:
    view = attempt_view(LOST_SHARD, n_min=80, live=None, pool=0, now=T0 + 100)
    assert (view.contributors, view.charged) == (100, 80)
    assert {s.key: s.devices for s in view.steps}["end"] == 100
    card = str(attempt_card(view))
    assert "100 contributors (charged at 80), n_min 80" in card
    # (a round charged at what it summed says no charge apart)
    plain = attempt_view(RoundRow("r", 1, 1, "released", "", 100, {"participants": 100},
                                  T0, T0 + 20), n_min=80, live=None, pool=0, now=T0 + 100)
    assert "100 contributors, n_min 80" in str(attempt_card(plain))


def test_a_hits_standard_deviation_is_over_the_reports_in_the_total() -> None:
    codec = Codec("5bit", 20)
    mechanism = LocalRandomizer(4.0)
    tree = PrefixTree(TreeConfig(rounds=2, dim_limit=2**12), codec, mechanism)
    [code] = cw.to_ints(codec.encode_many(["cat"]).codes)
    parts = SimpleNamespace(tree=tree, config=RunConfig(), ledger=SimpleNamespace(eps_local=None),
                            state=TreeState(discovered=(Found(code, 50.0, 1),), done=True))
    [hit] = heavy_hitters(parts, [LOST_SHARD])  # type: ignore[arg-type]
    assert hit.std == estimate_std(mechanism, 50.0, 100) != estimate_std(mechanism, 50.0, 80)
