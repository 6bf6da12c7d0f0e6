"""The leader's selector stream (``SelectorHub.Attach``) ends on an error as every servicer
call does (``fedhh.rpc.errors.status_errors``, the one mapping): a domain error with its
status code and its message on one bounded line, any other failure INTERNAL, "internal error",
logged with its traceback. Before, Attach mapped its refusals itself, and a reader that failed
for another reason than a bad batch ended the stream OK and unlogged: the selector saw the
leader hang up, attached again at once, and failed again, for ever."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.errors import ConfigError
from fedhh.rpc.errors import MAX_DETAILS
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.hub import SelectorHub
from fedhh_coordinator.keys import KeyOwners
from fedhh_coordinator.lobby import Lobby

TOKEN = b"t" * 24


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class Selector:
    """An Attach call's context: the selector's bearer, then ``batches`` (the hello first),
    then it stays."""

    def __init__(self, *batches: pb.SelectorBatch, token: bytes = TOKEN) -> None:
        self.batches = list(batches)
        self.token = token
        self.stays = asyncio.Event()

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token.decode()}"),)

    async def read(self) -> object:
        if self.batches:
            return self.batches.pop(0)
        await self.stays.wait()
        return grpc.aio.EOF

    async def send_initial_metadata(self, metadata: object) -> None:
        pass

    async def write(self, message: pb.LeaderMessage) -> None:
        pass

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


def attach(hub: SelectorHub, selector: Selector) -> Aborted | None:
    """How the call ended: its abort, or None for an OK end."""
    async def call() -> Aborted | None:
        try:
            await hub.Attach(None, selector)
        except Aborted as aborted:
            return aborted
        return None

    return asyncio.run(asyncio.wait_for(call(), 20))


def hub() -> SelectorHub:
    return SelectorHub(Lobby(), KeyOwners(), TOKEN, Ed25519PrivateKey.from_private_bytes(b"k" * 32))


def test_a_reader_that_fails_unexpectedly_ends_the_stream_internal_and_logged(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    leader = hub()

    def broken(*_: Any) -> None:
        raise RuntimeError("a bug in the hub, with internals")

    monkeypatch.setattr(leader, "apply", broken)
    with caplog.at_level(logging.ERROR, logger="fedhh.rpc.errors"):
        ended = attach(leader, Selector(pb.SelectorBatch(name="a"), pb.SelectorBatch()))
    assert ended is not None
    assert (ended.code, ended.details) == (grpc.StatusCode.INTERNAL, "internal error")
    assert any(r.exc_info and "a bug in the hub" in str(r.exc_info[1]) for r in caplog.records)
    assert leader.sessions == set()


def test_a_bad_batch_is_refused_on_one_bounded_line(monkeypatch: pytest.MonkeyPatch) -> None:
    leader = hub()

    def refused(*_: Any) -> None:
        raise ConfigError("a batch\nbroken " + "x" * (2 * MAX_DETAILS))

    monkeypatch.setattr("fedhh_coordinator.hub.check_batch",
                        lambda batch, checkin, hello: None if hello else refused())
    ended = attach(leader, Selector(pb.SelectorBatch(name="a"), pb.SelectorBatch()))
    assert ended is not None and ended.code == grpc.StatusCode.INVALID_ARGUMENT
    assert ended.details.startswith("a batch broken x") and "\n" not in ended.details
    assert len(ended.details) <= MAX_DETAILS + len("...")


@pytest.mark.parametrize(("selector", "code"), [
    (Selector(pb.SelectorBatch(name="a"), token=b"w" * 24), grpc.StatusCode.UNAUTHENTICATED),
    (Selector(pb.SelectorBatch(name="")), grpc.StatusCode.INVALID_ARGUMENT),  # (no name)
])
def test_a_refused_selector_gets_its_code(selector: Selector, code: grpc.StatusCode) -> None:
    ended = attach(hub(), selector)
    assert ended is not None and ended.code == code
