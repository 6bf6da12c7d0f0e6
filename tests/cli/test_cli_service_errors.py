"""A service's refusal reaches the operator as one line and exit code 2, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from networked_kit import refused_port

from fedhh.cli.main import main


def _admin_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], *action: str) -> str:
    """The one line an admin action against an unreachable coordinator ends with (exit 2)."""
    token = tmp_path / "admin.token"
    token.write_text("0123456789abcdef0123")
    with refused_port() as port, pytest.raises(SystemExit) as exit_:
        main(["admin", "--coordinator", f"127.0.0.1:{port}", "--token-file", str(token),
              *action])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_an_unreachable_coordinator_is_a_one_line_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _admin_error(tmp_path, capsys, "list").startswith(
        "fedhh admin list: error: UNAVAILABLE: ")


def test_a_missing_admin_token_says_how_to_give_one(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FEDHH_ADMIN_TOKEN", raising=False)
    with pytest.raises(SystemExit) as exit_:
        main(["admin", "--coordinator", "127.0.0.1:1", "list"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["fedhh admin list: error: no admin token was given: pass --token-file "
                   "PATH or set $FEDHH_ADMIN_TOKEN"]


@pytest.mark.parametrize(("argv", "needle"), [
    (["aggregator", "--listen", "127.0.0.1:99999", "--coordinator-key", "k.pem"],
     "argument --listen: must be a port, 0 to 65535"),
    (["coordinator", "--listen", "127.0.0.1:-5"], "argument --listen: must be a port"),
    (["selector", "--listen", "nowhere"], "argument --listen: must be HOST:PORT"),
    (["coordinator", "--metrics-port", "99999"], "argument --metrics-port: must be a port"),
    (["coordinator", "--dashboard-port", "abc"], "argument --dashboard-port: must be a port"),
    (["aggregator", "--coordinator-key", "k.pem", "--session-listen", "127.0.0.1:70000"],
     "argument --session-listen: must be a port"),
])
def test_a_port_out_of_range_is_refused_not_wrapped(
        argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    # (out of range, gRPC took the port modulo 65536: 99999 served on 34463)
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_mint_tokens_refuses_an_unwritable_out_before_minting(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (a coordinator that would refuse every call: the refusal comes before any)
    line = _admin_error(tmp_path, capsys, "mint-tokens", "--count", "3", "--out",
                        "/proc/tokens.txt")
    assert "--out /proc/tokens.txt: cannot write in /proc" in line
