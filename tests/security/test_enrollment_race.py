"""One enrollment token enrols one identity when the coordinator and a selector spend it at
the same moment on a shared PostgreSQL store (probe 37).

A selector writes enrolments beside the coordinator, each process with its own connection.
``Store.add_device`` read the token's row (unused), added the device, then marked the token
used with ``UPDATE ... WHERE token_hash = ?``; PostgreSQL runs transactions at READ COMMITTED,
so of two enrolments that both read the row before either committed, the second's UPDATE waited
for the first's commit and then overwrote ``used_by``: both identities were enrolled with one
token (a leaked or shared token bought two Sybils). Now the UPDATE takes the token only while
it is unused, and an enrolment whose UPDATE finds it taken is refused and rolled back.

The interleaving is made, not hoped for: a third session holds the token's row lock while both
enrolments read it and reach their UPDATE (seen waiting in ``pg_locks``), then lets go. (SQLite
takes its write lock at BEGIN, so its enrolments never interleave.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from postgres_kit import PostgresServer

from fedhh.errors import AuthenticationError, ConflictError
from fedhh_coordinator.db import postgres
from fedhh_coordinator.enrollment import token_hash
from fedhh_coordinator.store import Store

psycopg = pytest.importorskip("psycopg")
pytestmark = pytest.mark.slow


@pytest.fixture
def location(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # Statements wait for the held row lock however long the test takes to see both waiting
    # (the store's 1 s would make the test's timing part of its outcome).
    monkeypatch.setattr(postgres, "LOCK_WAIT_MS", 60_000)
    with PostgresServer() as server:
        yield server.create_database()


def waiting_sessions(location: str) -> int:
    with psycopg.connect(location, autocommit=True) as db:
        row = db.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
    return int(row[0])


def while_held(location: str, hold: str, params: tuple[object, ...],
               enrolments: list[tuple[Callable[..., None], tuple[object, ...]]],
               let_go: str = "commit") -> None:
    """Run each enrolment in a thread while a third session (its transaction open) holds the
    lock ``hold`` takes; once every one waits for it (seen in ``pg_locks``), ``let_go``
    (commit or rollback) and join them."""
    locker = psycopg.connect(location)
    try:
        locker.execute(hold, params)
        threads = [threading.Thread(target=target, args=args) for target, args in enrolments]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 60
        while waiting_sessions(location) < len(threads):
            assert time.monotonic() < deadline, "the enrolments never reached the held lock"
            time.sleep(0.01)  # polling the server's lock table
        getattr(locker, let_go)()
    finally:
        locker.close()
    for thread in threads:
        thread.join(60)


def test_one_token_spent_twice_at_once_enrols_one_identity(location: str) -> None:
    coordinator, selector = Store(location), Store(location, selector=True)
    token = token_hash(b"\x07" * 32)
    coordinator.add_enrollment_tokens([token], label="race")
    outcomes: dict[str, object] = {}

    def enrol(name: str, store: Store, key: bytes) -> None:
        try:
            outcomes[name] = store.add_device(b"c" * 32, key, "", token)
        except AuthenticationError as error:
            outcomes[name] = error

    # (both have read the token unused and wait to take it)
    while_held(location, "SELECT 1 FROM enrollment_tokens WHERE token_hash = %s FOR UPDATE",
               (token,), [(enrol, ("coordinator", coordinator, b"k" * 32)),
                          (enrol, ("selector", selector, b"K" * 32))])
    enrolled = [o for o in outcomes.values() if isinstance(o, int)]
    refused = [o for o in outcomes.values() if isinstance(o, AuthenticationError)]
    assert len(enrolled) == 1 and len(refused) == 1, outcomes
    assert "already used enrollment token" in str(refused[0])
    counts = coordinator.enrollment()
    assert (counts.devices, counts.tokens_used, counts.tokens_unused) == (1, 1, 0)
    coordinator.close()
    selector.close()


def test_one_identity_enrolled_twice_at_once_is_a_conflict(location: str) -> None:
    """One identity key presented with two tokens at once, to the coordinator and a selector:
    one enrols it; before, the other's INSERT hit the unique index after waiting for that
    commit and failed with the driver's UniqueViolation (INTERNAL to the device, a traceback
    in the log); now it is the conflict a later enrolment of that key gets, and its token is
    left unspent."""
    coordinator, selector = Store(location), Store(location, selector=True)
    tokens = [token_hash(b"\x01" * 32), token_hash(b"\x02" * 32)]
    coordinator.add_enrollment_tokens(tokens, label="race")
    outcomes: dict[str, object] = {}

    def enrol(name: str, store: Store, token: bytes) -> None:
        try:
            outcomes[name] = store.add_device(b"c" * 32, b"k" * 32, "", token)
        except Exception as error:  # (the driver's, before)
            outcomes[name] = error

    # (an uncommitted row holds the key's index entry: both wait on it)
    while_held(location, "INSERT INTO devices (credential_hash, identity_key, label, "
               "enrolled_at) VALUES (%s, %s, '', 0)", (b"x" * 32, b"k" * 32),
               [(enrol, ("coordinator", coordinator, tokens[0])),
                (enrol, ("selector", selector, tokens[1]))], let_go="rollback")
    enrolled = [o for o in outcomes.values() if isinstance(o, int)]
    refused = [o for o in outcomes.values() if isinstance(o, ConflictError)]
    assert len(enrolled) == 1 and len(refused) == 1, outcomes
    assert "already enrolled" in str(refused[0])
    counts = coordinator.enrollment()
    assert (counts.devices, counts.tokens_used, counts.tokens_unused) == (1, 1, 1)
    coordinator.close()
    selector.close()


def test_one_credential_reissued_twice_at_once_keeps_one(location: str) -> None:
    """A device's enrollment sent again (its answer lost) to the coordinator and a selector at
    once: both find the key enrolled by this token within the re-issue window and replace its
    credential. One is kept and its answer carries it; the other is refused in words. Before,
    the second UPDATE waited for the first's commit and then replaced its credential: both
    calls were answered, and whoever got the first answer held a credential nobody stores."""
    coordinator, selector = Store(location), Store(location, selector=True)
    token = token_hash(b"\x03" * 32)
    coordinator.add_enrollment_tokens([token], label="race")
    device = coordinator.add_device(b"0" * 32, b"k" * 32, "", token)
    credentials = {"coordinator": b"1" * 32, "selector": b"2" * 32}
    outcomes: dict[str, object] = {}

    def enrol(name: str, store: Store) -> None:
        try:
            outcomes[name] = store.add_device(credentials[name], b"k" * 32, "", token)
        except Exception as error:
            outcomes[name] = error

    # (both have read the device and its credential and wait to replace it)
    while_held(location, "SELECT 1 FROM devices WHERE device_id = %s FOR UPDATE", (device,),
               [(enrol, ("coordinator", coordinator)), (enrol, ("selector", selector))])
    kept = [name for name, o in outcomes.items() if o == device]
    refused = [o for o in outcomes.values() if isinstance(o, ConflictError)]
    assert len(kept) == 1 and len(refused) == 1, outcomes
    assert "re-issued by another enrollment" in str(refused[0])
    assert coordinator.device(device) == (credentials[kept[0]], b"k" * 32)
    coordinator.close()
    selector.close()
