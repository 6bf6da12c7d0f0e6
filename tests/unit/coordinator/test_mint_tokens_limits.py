"""MintEnrollmentTokens' bounds, served by the coordinator's own AdminService on a port from the
OS to a client with gRPC's default options.

Before: a call could ask for 100,000 tokens, a 6.6 MB answer that a client at gRPC's default
4 MiB receive limit refused (RESOURCE_EXHAUSTED) after the coordinator had stored the tokens:
the store changed, the answer was lost. And ttl_s inf or 1e308 was taken as a lifetime (an
expiry of inf), as was `fedhh admin mint-tokens --ttl-hours 1e306` (inf seconds). Now a call
mints at most MAX_MINT tokens, whose answer fits that limit, a lifetime is a second to a year
(ttl_s 1e-300 minted tokens expired as they were stored), and a refused call stores nothing."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from fedhh.cli.admin import MAX_TTL_HOURS, MIN_TTL_S
from fedhh.cli.main import build_parser, main
from fedhh.rpc import serving
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.service import MAX_MINT, MAX_TOKEN_TTL_S, MIN_TOKEN_TTL_S, AdminService
from fedhh_coordinator.store import Store

ADMIN_TOKEN = b"admin-token-of-the-test"
METADATA = (("authorization", f"Bearer {ADMIN_TOKEN.decode()}"),)
GRPC_DEFAULT_RECEIVE_BYTES = 4 * 1024 * 1024


def _served(store: Store, calls: Callable[[Any], Any]) -> Any:
    """``calls(stub)`` against an AdminService over ``store``, from a channel with gRPC's
    default options (the receive limit of a client other than fedhh's own)."""
    async def serve() -> Any:
        admin = AdminService(store, None, ADMIN_TOKEN, LifetimeBudget())  # type: ignore[arg-type]
        server = serving.new_server()
        pb_grpc.add_AdminServiceServicer_to_server(admin, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                return await calls(pb_grpc.AdminServiceStub(channel))
        finally:
            await server.stop(None)

    return asyncio.run(serve())


def _mint(count: int, ttl_s: float = 0.0) -> Callable[[Any], Any]:
    async def call(stub: Any) -> Any:
        try:
            return await stub.MintEnrollmentTokens(
                pb.MintEnrollmentTokensRequest(count=count, ttl_s=ttl_s), metadata=METADATA,
                timeout=60)
        except grpc.aio.AioRpcError as error:
            return error.code(), error.details()

    return call


def _unused(store: Store) -> int:
    return store.enrollment().tokens_unused


def test_the_most_tokens_a_call_mints_reach_a_client_with_grpcs_default_limit(
        tmp_path: Path) -> None:
    # (66 bytes a token: its 64 hex digits, their tag and length)
    largest = pb.MintEnrollmentTokensResponse(tokens=["0" * 64] * MAX_MINT).ByteSize()
    assert largest <= GRPC_DEFAULT_RECEIVE_BYTES, largest
    store = Store(tmp_path / "c.sqlite")
    answer = _served(store, _mint(MAX_MINT))
    assert isinstance(answer, pb.MintEnrollmentTokensResponse), answer
    assert len(set(answer.tokens)) == MAX_MINT == _unused(store)


def test_more_tokens_than_a_call_mints_are_refused_before_any_is_stored(
        tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite")
    code, details = _served(store, _mint(MAX_MINT + 1))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert details == f"count must be in [1, {MAX_MINT}], got {MAX_MINT + 1}"
    assert _unused(store) == 0


@pytest.mark.parametrize("ttl_s", [math.inf, 1e308, MAX_TOKEN_TTL_S + 1.0, math.nan, -1.0,
                                   -math.inf, 1e-300, 5e-324, 1e-3, MIN_TOKEN_TTL_S - 1e-9])
def test_a_lifetime_under_a_second_past_a_year_or_not_a_number_is_refused_and_mints_nothing(
        tmp_path: Path, ttl_s: float) -> None:
    store = Store(tmp_path / "c.sqlite")
    code, details = _served(store, _mint(3, ttl_s))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert details == (f"ttl_s must be 0 (valid until used) or in [1, {MAX_TOKEN_TTL_S:,}] "
                       f"seconds (a second to a year), got {ttl_s}")
    assert _unused(store) == 0
    assert store.enrollment().tokens_expired == 0


@pytest.mark.parametrize("ttl_s", [0.0, -0.0, float(MIN_TOKEN_TTL_S), float(MAX_TOKEN_TTL_S)])
def test_a_lifetime_up_to_a_year_is_minted(tmp_path: Path, ttl_s: float) -> None:
    store = Store(tmp_path / "c.sqlite")
    answer = _served(store, _mint(2, ttl_s))
    assert len(answer.tokens) == 2


@pytest.mark.parametrize("hours", ["1e306", "inf", "8761", "nan", "0", "-1", "1e-300",
                                   "0.000277"])
def test_mint_tokens_refuses_a_ttl_under_a_second_or_past_a_year_before_it_connects(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], hours: str) -> None:
    out = tmp_path / "t.tokens"
    with pytest.raises(SystemExit) as exit_:
        # (port 1 on loopback: nothing listens there, and the parse refuses first)
        main(["admin", "--coordinator", "127.0.0.1:1", "mint-tokens", "--count", "1",
              f"--ttl-hours={hours}", "--out", str(out)])
    assert exit_.value.code == 2
    assert (f"argument --ttl-hours: must be a second (0.000277778) to 8,760 (a year; leave it "
            f"out for tokens valid until used), got {hours}") in capsys.readouterr().err
    assert not out.exists()
    # (the CLI's bounds are the coordinator's)
    assert (MAX_TTL_HOURS * 3600, MIN_TTL_S) == (MAX_TOKEN_TTL_S, MIN_TOKEN_TTL_S)


def test_mint_tokens_takes_a_ttl_of_a_second() -> None:
    args = build_parser("admin").parse_args(["admin", "mint-tokens", "--count", "1",
                                             f"--ttl-hours={1 / 3600!r}", "--out", "t"])
    assert args.ttl_hours * 3600 == MIN_TOKEN_TTL_S


@pytest.mark.parametrize(("how_many", "refusal"), [
    (["--count", "1e12"], "argument --count: must be at most 10,000,000 tokens (fedhh's most "
                          "devices), got 1e12"),
    (["--count", "10000001"], "argument --count: must be at most 10,000,000 tokens"),
    # (before, len() of this range raised OverflowError: a traceback)
    (["--users", "0:1e30"], "argument --users: must be at most 10,000,000 users, one token "
                            "each (fedhh's most devices), got 1,000,000,000,000,000,000,000,000,"
                            "000,000"),
    (["--users", "5:10000006"], "argument --users: must be at most 10,000,000 users"),
])
def test_mint_tokens_asks_for_at_most_fedhhs_most_devices(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], how_many: list[str],
        refusal: str) -> None:
    """As `fedhh certs --device-tokens`: before, --count 1e12 asked the coordinator for 20
    million calls' worth of tokens, each held in memory until the last came."""
    out = tmp_path / "t.tokens"
    with pytest.raises(SystemExit) as exit_:
        main(["admin", "--coordinator", "127.0.0.1:1", "mint-tokens", *how_many, "--out",
              str(out)])
    assert exit_.value.code == 2
    said = capsys.readouterr().err
    assert refusal in said and "Traceback" not in said
    assert not out.exists()
    parser = build_parser("admin")
    for most in (["--count", "1e7"], ["--users", "5:10000005"]):
        args = parser.parse_args(["admin", "mint-tokens", *most, "--out", str(out)])
        assert len(args.users if args.users is not None else range(args.count)) == 10**7


class _Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "the coordinator went away"


class _FailsSecond:
    """MintEnrollmentTokens that mints on its first call and fails on its second."""

    def __init__(self) -> None:
        self.calls = 0

    def MintEnrollmentTokens(self, request: pb.MintEnrollmentTokensRequest, **_: Any
                             ) -> pb.MintEnrollmentTokensResponse:
        self.calls += 1
        if self.calls > 1:
            raise _Unavailable()
        return pb.MintEnrollmentTokensResponse(
            tokens=[f"{i:064x}" for i in range(request.count)])


def _mint_against(stub: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                  how_many: list[str], out: Path) -> object:
    """The exit code of `fedhh admin mint-tokens` against a coordinator answering as ``stub``
    (a channel never dialled)."""
    from fedhh.rpc import admin_client

    class Client(admin_client.AdminClient):
        def __init__(self, address: str, token: bytes, ca: str | Path | None = None) -> None:
            super().__init__(address, token, ca)
            self.stub = stub

    monkeypatch.setattr(admin_client, "AdminClient", Client)
    token_file = tmp_path / "admin.token"
    token_file.write_text("0123456789abcdef0123\n")
    with pytest.raises(SystemExit) as exit_:
        main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(token_file),
              "mint-tokens", *how_many, "--out", str(out)])
    return exit_.value.code


@pytest.mark.parametrize("how_many", [["--count", str(MAX_MINT + 5)],
                                      ["--users", f"7:{7 + MAX_MINT + 5}"]])
def test_tokens_minted_before_a_later_call_fails_are_written_not_lost(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        how_many: list[str]) -> None:
    """Before, the second call's error dropped the first call's MAX_MINT tokens, stored at the
    coordinator (valid, counted as unused) and written nowhere."""
    from fedhh.rpc.device_users import read_tokens

    out = tmp_path / "t.tokens"
    assert _mint_against(_FailsSecond(), monkeypatch, tmp_path, how_many, out) == 2
    first = 0 if how_many[0] == "--count" else 7
    assert capsys.readouterr().err == (
        f"fedhh admin mint-tokens: error: {MAX_MINT:,} of {MAX_MINT + 5:,} tokens were minted "
        "before a call "
        f"failed (UNAVAILABLE: the coordinator went away): those are written to {out} (users "
        f"{first}..{first + MAX_MINT - 1}); mint the rest with --users {first + MAX_MINT}:"
        f"{first + MAX_MINT + 5} and another --out\n")
    lines = out.read_text().splitlines()
    assert len(lines) == MAX_MINT and lines[-1].endswith(f"{MAX_MINT - 1:064x}")
    if how_many[0] == "--users":
        tokens = read_tokens(out)
        assert sorted(tokens) == list(range(7, 7 + MAX_MINT))
        assert tokens[7] == f"{0:064x}"


class _Answers:
    """MintEnrollmentTokens that answers ``short`` tokens fewer than each call asks for."""

    def __init__(self, short: int) -> None:
        self.short, self.calls = short, 0

    def MintEnrollmentTokens(self, request: pb.MintEnrollmentTokensRequest, **_: Any
                             ) -> pb.MintEnrollmentTokensResponse:
        self.calls += 1
        return pb.MintEnrollmentTokensResponse(
            tokens=[f"{i:064x}" for i in range(max(request.count - self.short, 0))])


def _client_answering(short: int) -> Any:
    from fedhh.rpc import admin_client

    client = admin_client.AdminClient("127.0.0.1:7000", b"0" * 20)  # (a channel never dialled)
    client.stub = _Answers(short)
    return client


def test_an_answer_of_no_tokens_is_an_error_not_a_call_made_for_ever() -> None:
    """Before, mint_tokens asked again while it held fewer than the count: a coordinator that
    answered none was called for ever."""
    from fedhh.errors import StateError

    client = _client_answering(short=10**9)
    with pytest.raises(StateError, match=r"^no tokens were minted: the coordinator answered 0 "
                       r"tokens to a call for 3$"):
        client.mint_tokens(3)
    assert client.stub.calls == 1


def test_a_short_answer_keeps_the_tokens_it_brought() -> None:
    from fedhh.rpc.admin_client import PartlyMinted

    client = _client_answering(short=1)
    with pytest.raises(PartlyMinted, match="^2 of 3 tokens were minted before a call failed "
                       r"\(the coordinator answered 2 tokens to a call for 3\)$") as partly:
        client.mint_tokens(3)
    assert partly.value.tokens == [f"{0:064x}", f"{1:064x}"] and client.stub.calls == 1


class _MintsThenLosesTheFolder:
    """MintEnrollmentTokens that mints, then removes ``folder`` (--out's, checked before): the
    write after the last call fails."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def MintEnrollmentTokens(self, request: pb.MintEnrollmentTokensRequest, **_: Any
                             ) -> pb.MintEnrollmentTokensResponse:
        self.folder.rmdir()
        return pb.MintEnrollmentTokensResponse(
            tokens=[f"{i:064x}" for i in range(request.count)])


@pytest.mark.parametrize(("how_many", "lines"), [
    (["--count", "3"], [f"{i:064x}" for i in range(3)]),
    (["--users", "5:7"], [f"{5 + i} {i:064x}" for i in range(2)]),
])
def test_tokens_minted_when_out_cannot_be_written_are_printed_not_lost(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        how_many: list[str], lines: list[str]) -> None:
    """Before, the tokens were minted and stored at the coordinator (valid, unused) and the
    failed write lost them: shown nowhere, said nowhere."""
    folder = tmp_path / "gone"
    folder.mkdir()
    out = folder / "t.tokens"
    assert _mint_against(_MintsThenLosesTheFolder(folder), monkeypatch, tmp_path, how_many,
                         out) == 2
    err = capsys.readouterr().err
    assert err == "".join(f"{line}\n" for line in lines) + (
        f"fedhh admin mint-tokens: error: --out {out} could not be written (No such file or "
        "directory); "
        f"the {len(lines)} tokens minted, valid at the coordinator, are printed above on "
        "standard error, as the file would hold them: save them\n")


def test_a_secret_file_that_cannot_replace_its_target_leaves_no_copy(tmp_path: Path) -> None:
    from fedhh.rpc.credentials import write_private

    (tmp_path / "d").mkdir()  # (os.replace of a file onto a folder fails)
    with pytest.raises(OSError):
        write_private(tmp_path / "d", "secret\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]  # (was also .d.tmp)
