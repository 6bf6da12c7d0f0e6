"""A mint made again with its request id mints once: the caller of a MintEnrollmentTokens call
whose answer never came (its deadline, the connection lost) cannot tell whether the tokens were
stored, and asks again. Before, every try minted: the tokens of the unanswered tries counted as
unused and enrolled whoever held them, while nobody did. Now a repeat of a request id first takes
out the unused tokens its earlier tries stored, so one try's tokens are left, all in the answer
its caller gets; the admin client makes an unanswered call again so."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import grpc
import pytest

from fedhh.errors import AuthenticationError, ConflictError
from fedhh.rpc import admin_client
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator import enrollment, service
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.db.interface import StoreUnavailable
from fedhh_coordinator.enrollment import TOKENS_PER_TRANSACTION, mint, token_hash
from fedhh_coordinator.store import Store

HELD_S = 60.0  # (only bounds a wait for an event the old code never sets)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = Store(tmp_path / "coordinator.sqlite")
    yield opened
    opened.close()


def enrolls(store: Store, token: str) -> bool:
    try:
        store.add_device(os.urandom(32), os.urandom(32), "", token_hash(bytes.fromhex(token)))
    except AuthenticationError:
        return False
    return True


def test_a_mint_repeated_with_its_request_id_leaves_the_repeats_tokens(store: Store) -> None:
    first = mint(store, 5, 3600.0, "batch", request_id="mint-1")
    again = mint(store, 5, 3600.0, "batch", request_id="mint-1")
    assert store.enrollment().tokens_unused == 5
    assert not enrolls(store, first[0])  # (its answer was lost: nobody should hold it)
    assert enrolls(store, again[0])
    other = mint(store, 2, request_id="mint-2")  # (another id: another mint)
    assert store.enrollment().tokens_unused == 4 + 2 and enrolls(store, other[0])


def test_a_repeat_takes_out_only_the_unused_tokens_of_its_id(store: Store) -> None:
    first = mint(store, 3, request_id="mint-1")
    assert enrolls(store, first[0])  # (a token was given after all: its device stays)
    mint(store, 3, request_id="mint-1")
    counts = store.enrollment()
    assert (counts.devices, counts.tokens_used, counts.tokens_unused) == (1, 1, 3)


def test_a_request_id_asking_for_another_mint_is_refused(store: Store) -> None:
    mint(store, 5, None, "batch", request_id="mint-1")
    with pytest.raises(ConflictError, match="mint 'mint-1' already asked for another count, "
                                            "label"):
        mint(store, 6, None, "other", request_id="mint-1")
    assert store.enrollment().tokens_unused == 5


def test_a_mint_whose_tokens_could_not_be_taken_out_says_so_and_a_repeat_does(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store goes away midway (its second transaction) and stays away while the mint
    takes out its first: those tokens count as unused, which the failure says, and a repeat
    with the request id once the store is back leaves one mint's tokens."""
    monkeypatch.setattr(enrollment, "MINT_PATIENCE_S", 0.0)
    add, remove = store.add_new_enrollment_tokens, store.remove_enrollment_tokens
    away = [False]

    def add_tokens(*args: Any) -> list[bytes]:
        if away[0]:
            raise StoreUnavailable("the database failed: connection lost (the test's)")
        away[0] = True
        return add(*args)

    def remove_tokens(hashes: list[bytes]) -> int:
        if away[0]:
            raise StoreUnavailable("the database failed: connection lost (the test's)")
        return remove(hashes)

    monkeypatch.setattr(store, "add_new_enrollment_tokens", add_tokens)
    monkeypatch.setattr(store, "remove_enrollment_tokens", remove_tokens)
    with pytest.raises(StoreUnavailable, match=f"{TOKENS_PER_TRANSACTION:,} of the tokens "
                       "stored before the failure could not be taken out again.*count as "
                       "unused; a mint made again with its request id takes them out"):
        mint(store, 2 * TOKENS_PER_TRANSACTION, request_id="mint-1")
    assert store.enrollment().tokens_unused == TOKENS_PER_TRANSACTION
    away[0] = False
    monkeypatch.setattr(store, "add_new_enrollment_tokens", add)
    tokens = mint(store, 2 * TOKENS_PER_TRANSACTION, request_id="mint-1")
    assert store.enrollment().tokens_unused == len(tokens) == 2 * TOKENS_PER_TRANSACTION


def test_a_repeated_call_waits_for_the_mint_of_its_id_under_way(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first call's mint goes on in its thread after its caller gave up; the repeat's
    is made after it, so the repeat takes out all the first one stored."""
    entered, release = threading.Event(), threading.Event()
    real_mint = service.mint

    def held_mint(*args: Any, **kwargs: Any) -> list[str]:
        if not entered.is_set():
            entered.set()
            release.wait(HELD_S)
        return real_mint(*args, **kwargs)

    monkeypatch.setattr(service, "mint", held_mint)
    admin = service.AdminService(store, _Runner(), b"t" * 16,  # type: ignore[arg-type]
                                 LifetimeBudget())
    request = pb.MintEnrollmentTokensRequest(count=4, request_id="mint-1")

    async def calls() -> list[str]:
        first = asyncio.ensure_future(admin.MintEnrollmentTokens(request, _Context()))
        await asyncio.to_thread(entered.wait, HELD_S)
        first.cancel()  # (its caller's deadline: the thread goes on)
        repeat = asyncio.ensure_future(admin.MintEnrollmentTokens(request, _Context()))
        await asyncio.sleep(0)  # (the repeat is waiting before the first's mint goes on)
        release.set()
        return list((await repeat).tokens)

    tokens = asyncio.run(calls())
    assert store.enrollment().tokens_unused == len(tokens) == 4
    assert all(enrolls(store, t) for t in tokens)


class _Runner:
    def wake(self) -> None:
        pass


class _Context:
    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", "Bearer " + "t" * 16),)

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise AssertionError(f"{code.name}: {details}")


class _Unanswered(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.DEADLINE_EXCEEDED

    def details(self) -> str:
        return "Deadline Exceeded"


def test_the_admin_client_makes_an_unanswered_mint_again_as_it_was(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[pb.MintEnrollmentTokensRequest] = []

    class Stub:
        def MintEnrollmentTokens(self, request: pb.MintEnrollmentTokensRequest, **_: Any
                                 ) -> pb.MintEnrollmentTokensResponse:
            asked.append(request)
            if len(asked) == 1:
                raise _Unanswered()
            return pb.MintEnrollmentTokensResponse(tokens=["ab" * 32] * request.count)

    monkeypatch.setattr(admin_client.time, "sleep", lambda _: None)
    client = admin_client.AdminClient("127.0.0.1:7000", b"t" * 16)  # (a channel never dialled)
    client.stub = Stub()  # type: ignore[assignment]
    try:
        assert client.mint_tokens(3) == ["ab" * 32] * 3
    finally:
        client.close()
    assert len(asked) == 2 and asked[0] == asked[1] and asked[0].request_id.endswith("-0")
