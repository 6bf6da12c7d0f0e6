"""The server's table of share holders (``_ShareHolders``): a holder's slot for each owner
whose secret it holds, found by one search of the cells keyed by holder and row, agrees with a
walk of the table, and anything else is refused."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.secagg.server import _share_points, _ShareHolders


def _holders(n: int, edges: set[tuple[int, int]], owners: list[int]) -> _ShareHolders:
    """The table for the secrets of ``owners`` (ascending), each held by its neighbours."""
    partners = {v: tuple(sorted({b for a, b in edges if a == v} | {a for a, b in edges if b == v}))
                for v in owners}
    points = {v: _share_points(np.asarray(p, dtype=np.int64), np.asarray(p, dtype=np.int64))
              for v, p in partners.items()}
    return _ShareHolders(partners, points, n)


def _slots(table: _ShareHolders, holder: int, owners: list[int]
           ) -> tuple[np.ndarray, np.ndarray]:
    return table.slots(np.full(len(owners), holder, dtype=np.int64),
                       np.asarray(owners, dtype=np.int64))


@st.composite
def _graphs(draw: st.DrawFn) -> tuple[int, set[tuple[int, int]], list[int]]:
    n = draw(st.integers(2, 40))
    pairs = [(a, b) for a in range(1, n + 1) for b in range(a + 1, n + 1)]
    edges = set(draw(st.lists(st.sampled_from(pairs), max_size=4 * n)))
    owners = sorted(draw(st.sets(st.integers(1, n), min_size=1)))
    return n, edges, owners


@settings(max_examples=150, deadline=None)
@given(_graphs(), st.randoms(use_true_random=False))
def test_a_holders_slots_are_where_the_table_lists_it(
        graph: tuple[int, set[tuple[int, int]], list[int]], rng: random.Random) -> None:
    n, edges, owners = graph
    table = _holders(n, edges, owners)
    cells = table._table
    for holder in range(1, n + 1):
        held = [v for row, v in enumerate(table.ids.tolist()) if holder in cells[row].tolist()]
        rng.shuffle(held)
        rows, columns = _slots(table, holder, held)
        assert table.ids[rows].tolist() == held
        assert (cells[rows, columns] == holder).all()
        for stranger in set(owners) - set(held) - {holder}:
            with pytest.raises(ValueError, match="holds no share"):
                _slots(table, holder, [*held, stranger])
    # Every holder's pairs in one call, in any order, as the unmask close looks them up.
    pairs = [(holder, v) for row, v in enumerate(table.ids.tolist())
             for holder in set(cells[row].tolist()) - {0}]
    rng.shuffle(pairs)
    holders = np.array([h for h, _ in pairs], dtype=np.int64)
    rows, columns = table.slots(holders, np.array([v for _, v in pairs], dtype=np.int64))
    assert table.ids[rows].tolist() == [v for _, v in pairs]
    assert (cells[rows, columns] == holders).all()


@pytest.mark.parametrize("owner", [0, -1, -5, 7])
def test_an_owner_outside_the_round_is_refused(owner: int) -> None:
    table = _holders(6, {(1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (1, 6)}, [1, 2, 3, 4, 5, 6])
    with pytest.raises(ValueError, match="no device of the round"):
        _slots(table, 2, [1, owner])


@pytest.mark.parametrize("holder", [0, -1, 7])
def test_a_holder_outside_the_round_is_refused(holder: int) -> None:
    table = _holders(6, {(1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (1, 6)}, [1, 2, 3, 4, 5, 6])
    with pytest.raises(ValueError, match="no device of the round"):
        _slots(table, holder, [1])


def test_an_owner_that_shared_no_secret_is_refused() -> None:
    """Device 3 holds 2's share, and would hold 4's, but 4 is no owner (it dropped before
    sharing): its row is -1, which no holder's cells list."""
    table = _holders(6, {(1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (1, 6)}, [1, 2, 3, 5, 6])
    assert _slots(table, 3, [2])[0].tolist() == [1]
    with pytest.raises(ValueError, match="holds no share"):
        _slots(table, 3, [2, 4])
