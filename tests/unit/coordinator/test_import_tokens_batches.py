"""A tokens file given to the coordinator (``--enrollment-tokens-file``) is stored as a mint
stores its tokens: ``TOKENS_PER_TRANSACTION`` a transaction, all or none. Before, one
transaction: a file of 10^6 tokens held the store's write lock for seconds, while the runner's
charges and the selectors' enrollments waited for it (1 s each, then "database is locked")."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from fedhh_coordinator import enrollment
from fedhh_coordinator.db.interface import StoreUnavailable
from fedhh_coordinator.enrollment import (
    TOKENS_PER_TRANSACTION,
    import_tokens,
    new_tokens,
    token_hash,
)
from fedhh_coordinator.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = Store(tmp_path / "coordinator.sqlite")
    yield opened
    opened.close()


def tokens_file(tmp_path: Path, tokens: list[str]) -> str:
    path = tmp_path / "device-tokens.txt"
    path.write_text("".join(f"{t}\n" for t in tokens))
    return str(path)


def test_an_import_holds_the_lock_a_few_thousand_tokens_at_a_time(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    transactions: list[int] = []
    begin = store.db.transaction

    def transaction() -> Any:
        transactions.append(1)
        return begin()

    monkeypatch.setattr(store.db, "transaction", transaction)
    count = 2 * TOKENS_PER_TRANSACTION + 7
    assert import_tokens(store, tokens_file(tmp_path, new_tokens(count))) == count
    assert len(transactions) == 3
    assert store.enrollment().tokens_unused == count


def test_an_import_that_fails_midway_leaves_none_of_its_tokens(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its third transaction fails past the patience: the tokens its first two added are
    taken out, and one of the file's tokens known before it is left as it was."""
    monkeypatch.setattr(enrollment, "MINT_PATIENCE_S", 0.0)
    tokens = new_tokens(3 * TOKENS_PER_TRANSACTION)
    known = tokens[5]
    store.add_enrollment_tokens([token_hash(bytes.fromhex(known))], "earlier")
    begin = store.db.transaction
    calls = [0]

    def transaction() -> Any:
        calls[0] += 1
        if calls[0] == 3:
            raise StoreUnavailable("the database failed: database is locked (the test's)")
        return begin()

    monkeypatch.setattr(store.db, "transaction", transaction)
    with pytest.raises(StoreUnavailable, match="imported no token: the store stayed "
                                               "unavailable"):
        import_tokens(store, tokens_file(tmp_path, tokens))
    assert store.enrollment().tokens_unused == 1
    store.add_device(os.urandom(32), os.urandom(32), "", token_hash(bytes.fromhex(known)))
