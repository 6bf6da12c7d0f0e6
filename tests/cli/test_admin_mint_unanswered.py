"""`fedhh admin mint-tokens` whose calls are not answered. Each call carries a request id
(``ID-N``, N its first token's index, ID the mint's: --request-id or one drawn here); the
client makes an unanswered call again as it was, and the coordinator takes out what the
earlier tries of that id stored (tests/unit/coordinator/test_mint_repeated.py). A mint that is
still not answered names its id, which the same command takes to take those tokens out. Before,
nothing was said, and the tokens stored by an unanswered call counted as unused, nobody
holding them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from fedhh.cli.main import main
from fedhh.rpc import admin_client
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.service import MAX_MINT


class Failure(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class Stub:
    """MintEnrollmentTokens answering ``answers`` in turn: a Failure raised, else tokens."""

    def __init__(self, *answers: Failure | None) -> None:
        self.answers = list(answers)
        self.requests: list[pb.MintEnrollmentTokensRequest] = []

    def MintEnrollmentTokens(self, request: pb.MintEnrollmentTokensRequest, **_: Any
                             ) -> pb.MintEnrollmentTokensResponse:
        self.requests.append(request)
        answer = self.answers.pop(0) if self.answers else None
        if answer is not None:
            raise answer
        first = sum(r.count for r in self.requests[:-1])
        return pb.MintEnrollmentTokensResponse(
            tokens=[f"{first + i:064x}" for i in range(request.count)])


@pytest.fixture
def token(tmp_path: Path) -> Path:
    path = tmp_path / "admin.token"
    path.write_text("0123456789abcdef0123\n")
    return path


def mint_tokens(monkeypatch: pytest.MonkeyPatch, stub: Stub, token: Path, out: Path,
                *flags: str) -> int:
    class Client(admin_client.AdminClient):
        def __init__(self, address: str, token: bytes, ca: str | Path | None = None) -> None:
            super().__init__(address, token, ca)  # (a channel never dialled)
            self.stub = stub  # type: ignore[assignment]

    monkeypatch.setattr(admin_client, "AdminClient", Client)
    monkeypatch.setattr(admin_client.time, "sleep", lambda _: None)
    return main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(token),
                 "mint-tokens", "--out", str(out), *flags])


def test_each_call_carries_the_mints_id_and_its_first_token(
        monkeypatch: pytest.MonkeyPatch, token: Path, tmp_path: Path) -> None:
    stub = Stub()
    assert mint_tokens(monkeypatch, stub, token, tmp_path / "t", "--count",
                       str(MAX_MINT + 3), "--request-id", "batch-7") == 0
    assert [r.request_id for r in stub.requests] == ["batch-7-0", f"batch-7-{MAX_MINT}"]


def test_an_unanswered_call_is_made_again_as_it_was(
        monkeypatch: pytest.MonkeyPatch, token: Path, tmp_path: Path) -> None:
    late = Failure(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
    stub = Stub(late, late)
    assert mint_tokens(monkeypatch, stub, token, tmp_path / "t", "--count", "4") == 0
    assert len(stub.requests) == 3 and len({r.SerializeToString() for r in stub.requests}) == 1


@pytest.mark.parametrize("request_id", ["", "batch-7"])
def test_a_mint_never_answered_names_its_id(
        monkeypatch: pytest.MonkeyPatch, token: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], request_id: str) -> None:
    late = Failure(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
    stub = Stub(*[late] * admin_client.MINT_TRIES)
    with pytest.raises(SystemExit) as exited:
        mint_tokens(monkeypatch, stub, token, tmp_path / "t", "--count", "4",
                    *(("--request-id", request_id) if request_id else ()))
    assert exited.value.code != 0
    err = capsys.readouterr().err
    mint_id = stub.requests[0].request_id.rsplit("-", 1)[0]
    assert not request_id or mint_id == request_id
    again = "the same command" + ("" if request_id else f" with --request-id {mint_id}")
    assert (f"note: mint {mint_id} was not answered: tokens it stored, if any, count as "
            f"unused though nobody has them; {again} takes them out") in err, err
    assert not (tmp_path / "t").exists()


def test_a_mint_that_reached_nobody_says_nothing_of_tokens_stored(
        monkeypatch: pytest.MonkeyPatch, token: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    refused = Failure(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses; last "
                      "error: UNKNOWN: ipv4:127.0.0.1:7000: Connection refused")
    stub = Stub(*[refused] * admin_client.MINT_TRIES)
    with pytest.raises(SystemExit):
        mint_tokens(monkeypatch, stub, token, tmp_path / "t", "--count", "4")
    assert "was not answered" not in capsys.readouterr().err


def test_a_mint_cut_off_and_then_refused_a_connection_names_its_id(
        monkeypatch: pytest.MonkeyPatch, token: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The first try reached the coordinator (past its deadline, the mint going on there), the
    later ones found it no longer listening (restarted): tokens may be stored under the id.
    Before, the last error alone was judged, never sent, and nothing was said."""
    late = Failure(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
    refused = Failure(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses; last "
                      "error: UNKNOWN: ipv4:127.0.0.1:7000: Connection refused")
    stub = Stub(late, *[refused] * (admin_client.MINT_TRIES - 1))
    with pytest.raises(SystemExit):
        mint_tokens(monkeypatch, stub, token, tmp_path / "t", "--count", "4",
                    "--request-id", "batch-7")
    assert len(stub.requests) == admin_client.MINT_TRIES
    assert "note: mint batch-7 was not answered" in capsys.readouterr().err


def test_a_malformed_request_id_is_refused_before_any_call(
        monkeypatch: pytest.MonkeyPatch, token: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    stub = Stub()
    with pytest.raises(SystemExit):
        mint_tokens(monkeypatch, stub, token, tmp_path / "t", "--count", "4",
                    "--request-id", "a b")
    assert "a mint's id is 1 to 48 characters" in capsys.readouterr().err
    assert stub.requests == []


def test_the_help_says_a_request_id_is_one_mints(capsys: pytest.CaptureFixture[str]) -> None:
    """A repeat takes out every unused token its id minted, answered or not (the coordinator
    cannot tell them apart): the help said "its unanswered calls", which invited reusing an id
    for the next mint, whose first call took out the tokens handed out by the last."""
    with pytest.raises(SystemExit):
        main(["admin", "mint-tokens", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "answered or not" in help_text and "an id of its own" in help_text
