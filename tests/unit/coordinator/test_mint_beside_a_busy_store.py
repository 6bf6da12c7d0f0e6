"""Minting enrollment tokens beside other writers of the store's SQLite file (selectors
enrolling devices on it, a backup): the mint stores its tokens ``TOKENS_PER_TRANSACTION`` a
transaction, each tried again while another process holds the lock (for ``MINT_PATIENCE_S`` in
all), and is still all or none.

Before, a mint was one transaction: 50,000 tokens held the write lock 0.4 to 2.1 s on a loaded
machine, past the 1 s a selector's enrollment waits for it ("database is locked"), and a mint
begun while a stream of a selector's enrollments kept taking the lock waited its 1 s and failed
"database is locked", minting nothing. Here the store's waits are 50 ms (``BUSY_TIMEOUT_S``), and
another connection to the file holds its lock until the mint has found it held."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from fedhh_coordinator import enrollment
from fedhh_coordinator.db import sqlite as sqlite_db
from fedhh_coordinator.db.interface import StoreUnavailable
from fedhh_coordinator.enrollment import TOKENS_PER_TRANSACTION, mint, token_hash
from fedhh_coordinator.store import Store

HELD_S = 60.0  # (only bounds a wait for an event the old code never sets)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(sqlite_db, "BUSY_TIMEOUT_S", 0.05)
    opened = Store(tmp_path / "coordinator.sqlite")
    yield opened
    opened.close()


def test_a_mint_waits_out_another_process_that_holds_the_lock(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    holder = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # (a selector's enrollment, a backup: the write lock)
    found_held = threading.Event()
    add = store.add_new_enrollment_tokens

    def add_tokens(*args: Any) -> list[bytes]:
        try:
            return add(*args)
        except StoreUnavailable:
            found_held.set()
            raise

    monkeypatch.setattr(store, "add_new_enrollment_tokens", add_tokens)

    def hold() -> None:
        found_held.wait(HELD_S)
        holder.execute("COMMIT")

    releasing = threading.Thread(target=hold)
    releasing.start()
    try:
        tokens = mint(store, 5_000)
    finally:
        found_held.set()
        releasing.join()
        holder.close()
    assert len(set(tokens)) == 5_000
    assert store.enrollment().tokens_unused == 5_000


def test_a_mint_holds_the_lock_a_few_thousand_tokens_at_a_time(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between two of a mint's transactions another process's enrollment takes the lock at
    once (a selector's, on its own connection to the file)."""
    selector = Store(store.path, selector=True)
    stored: list[int] = []
    add = store.add_new_enrollment_tokens
    spare = mint(store, 1)

    def add_tokens(hashes: list[bytes], *args: Any) -> list[bytes]:
        added = add(hashes, *args)
        stored.append(len(hashes))
        if len(stored) == 1:
            selector.add_device(os.urandom(32), os.urandom(32), "",
                                token_hash(bytes.fromhex(spare[0])))
        return added

    monkeypatch.setattr(store, "add_new_enrollment_tokens", add_tokens)
    try:
        tokens = mint(store, 50_000)
    finally:
        selector.close()
    assert len(tokens) == 50_000 and sum(stored) == 50_000
    assert max(stored) <= TOKENS_PER_TRANSACTION < 50_000
    counts = store.enrollment()
    assert (counts.devices, counts.tokens_unused, counts.tokens_used) == (1, 50_000, 1)


def test_a_mint_that_fails_midway_leaves_no_token_of_it(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(enrollment, "MINT_PATIENCE_S", 0.0)
    add = store.add_new_enrollment_tokens
    calls = [0]

    def add_tokens(*args: Any) -> list[bytes]:
        calls[0] += 1
        if calls[0] == 3:
            raise StoreUnavailable("the database failed: database is locked (the test's)")
        return add(*args)

    monkeypatch.setattr(store, "add_new_enrollment_tokens", add_tokens)
    with pytest.raises(StoreUnavailable, match="minted no token: the store stayed unavailable"):
        mint(store, 3 * TOKENS_PER_TRANSACTION)
    assert store.enrollment().tokens_unused == 0
