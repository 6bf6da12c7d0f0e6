"""`fedhh admin mint-tokens` for more users than one MintEnrollmentTokens call may ask for:
before, `--users 0:100001` was refused INVALID_ARGUMENT ("count must be in [1, 100000]"); the
admin client now asks in calls the coordinator accepts (as `LocalTopology` and `fedhh up` do,
through the same client)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fedhh.cli.main import main
from fedhh.rpc import admin_client
from fedhh.rpc.device_users import read_tokens
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.service import MAX_MINT


class MintingStub:
    """The coordinator's MintEnrollmentTokens, as far as the count it accepts."""

    def __init__(self) -> None:
        self.counts: list[int] = []

    def MintEnrollmentTokens(self, request: pb.MintEnrollmentTokensRequest, **_: Any
                             ) -> pb.MintEnrollmentTokensResponse:
        assert 1 <= request.count <= MAX_MINT, request.count
        first = sum(self.counts)
        self.counts.append(request.count)
        return pb.MintEnrollmentTokensResponse(
            tokens=[f"{first + i:064x}" for i in range(request.count)])


def test_more_users_than_one_call_mints_are_minted_in_several(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    stub: Any = MintingStub()

    class Client(admin_client.AdminClient):
        def __init__(self, address: str, token: bytes, ca: str | Path | None = None) -> None:
            super().__init__(address, token, ca)  # (a channel never dialled)
            self.stub = stub

    monkeypatch.setattr(admin_client, "AdminClient", Client)
    token_file = tmp_path / "admin.token"
    token_file.write_text("0123456789abcdef0123\n")
    out = tmp_path / "many.tokens"
    users = MAX_MINT + 1
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(token_file),
                 "mint-tokens", "--users", f"5:{5 + users}", "--out", str(out)]) == 0
    assert stub.counts == [MAX_MINT, 1]
    tokens = read_tokens(out)
    assert len(tokens) == users and len(set(tokens.values())) == users
    assert tokens[5] == f"{0:064x}" and tokens[5 + MAX_MINT] == f"{MAX_MINT:064x}"
