"""`fedhh admin` given a token the coordinator does not hold names the token's source and the
file to give instead. Before, "UNAUTHENTICATED: invalid admin token" alone: an operator with
two `fedhh certs` folders (a scratch stack beside the compose one) could not tell which file
was meant. The server here refuses every call as the coordinator refuses a wrong admin token
(``fedhh_coordinator.auth``), plaintext on loopback, at a port the OS chose."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from cli_kit import run_cli


class _Refuses(grpc.GenericRpcHandler):
    def service(self, details: Any) -> grpc.RpcMethodHandler:
        def refuse(request: bytes, context: grpc.ServicerContext) -> bytes:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid admin token")
            raise AssertionError  # (abort raises)

        return grpc.unary_unary_rpc_method_handler(refuse)


@pytest.fixture
def refusing() -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[_Refuses()])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def test_a_refused_admin_token_names_its_file_and_the_one_to_give(
        refusing: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    token = tmp_path / "other" / "admin.token"
    token.parent.mkdir()
    token.write_text("x" * 32)
    fix = ("is not this coordinator's admin token: give the file its --admin-token-file "
           "reads, admin.token in the --secrets folder of the `fedhh certs` that set it up; in "
           "the compose stack, deploy/secrets/admin.token)")
    code, out, err = run_cli(["admin", "--coordinator", refusing, "--token-file", str(token),
                              "list"], capsys)
    assert (code, out) == (2, "")
    assert err == ("fedhh admin list: error: UNAUTHENTICATED: invalid admin token (the token in "
                   f"--token-file {token} {fix}\n")
    monkeypatch.setenv("FEDHH_ADMIN_TOKEN", "y" * 32)
    code, out, err = run_cli(["admin", "--coordinator", refusing, "list"], capsys)
    assert (code, out) == (2, "")
    assert err == ("fedhh admin list: error: UNAUTHENTICATED: invalid admin token "
                   f"($FEDHH_ADMIN_TOKEN {fix}\n")
