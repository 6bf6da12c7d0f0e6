"""`fedhh admin` without a coordinator: what it writes and how it reads its options (the client
is replaced by a recording stand-in)."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any

import grpc
import pytest
from _admin_recorder import Recorder

from fedhh.cli.main import main
from fedhh.rpc.device_users import read_tokens


def test_mint_tokens_for_users_writes_one_process_share(recorder: Path, tmp_path: Path) -> None:
    """The share an operator hands one outside device process: USER TOKEN for its users only,
    readable by the operator only, and `fedhh device --users tokens` reads those users."""
    out = tmp_path / "outside.tokens"
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "mint-tokens", "--users", "250:253", "--out", str(out)]) == 0
    assert ("mint", 3) in Recorder.calls
    assert read_tokens(out) == {250: f"{0:064x}", 251: f"{1:064x}", 252: f"{2:064x}"}
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


@pytest.mark.parametrize("users", ["5:5", "9:3", "-1:4", "x:y", "7"])
def test_a_bad_user_span_is_one_line(recorder: Path, tmp_path: Path, users: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
              "mint-tokens", f"--users={users}", "--out", str(tmp_path / "t")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--users" in err[0] and repr(users) in err[0]


@pytest.mark.parametrize("where", ["before", "after"])
def test_connection_options_go_before_or_after_the_action(recorder: Path, tmp_path: Path,
                                                          where: str) -> None:
    """Issue 28: `fedhh admin list --coordinator X` failed: the options had to come first."""
    out = tmp_path / "t"
    connection = ["--coordinator", "127.0.0.1:7000", "--token-file", str(recorder)]
    action = ["mint-tokens", "--count", "2", "--out", str(out)]
    argv = [*connection, *action] if where == "before" else [*action, *connection]
    assert main(["admin", *argv]) == 0
    assert ("connect", "127.0.0.1:7000") in Recorder.calls


def test_a_missing_coordinator_is_one_line(recorder: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["admin", "list", "--token-file", str(recorder)])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "fedhh admin list: error: --coordinator HOST:PORT is required (before or after the action)"]


def test_status_prints_every_field_zeros_too(recorder: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a round that kept nothing had no "kept" or "finished" key (proto3 JSON leaves
    zeros out), so a script reading them failed exactly then."""
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "status", "r1"]) == 0
    run = json.loads(capsys.readouterr().out)
    (round_,) = run["rounds"]
    assert (round_["kept"], round_["finished"], round_["participants"]) == (0, 0, 300)
    assert run["epsSpent"] == 0 and run["error"] == ""


def test_start_says_when_the_coordinator_dropped_completion_rounds(
        recorder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the run was stored without its completion rounds (too few devices to budget
    them) and nothing said so; URLs and e-mail addresses came back cut."""
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "start", "--run-id", "r3", "--eps-agg", "2", "--min-devices", "300",
                 "--target-devices", "450"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["config"]["completionRounds"] == 0  # stdout stays JSON
    assert captured.err.startswith("fedhh admin start: note: 0 of the 32 completion rounds "
                                   "(the default) can be budgeted with 300 devices at eps_agg 2 ")
    named = set(re.findall(r"--[a-z][a-z-]*", captured.err))
    assert {"--min-devices", "--eps-agg"} <= named
    with pytest.raises(SystemExit):
        main(["admin", "start", "--help"])
    assert named <= set(re.findall(r"--[a-z][a-z-]*", capsys.readouterr().out))
    # Completion rounds the user named are "asked for" (the default's were said so too).
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "start", "--run-id", "r4", "--eps-agg", "2", "--min-devices", "300",
                 "--target-devices", "450", "--completion-rounds", "8"]) == 0
    assert capsys.readouterr().err.startswith(
        "fedhh admin start: note: 0 of the 8 completion rounds asked for ")


class Unavailable(grpc.RpcError):
    """What a plaintext call to a TLS port ends with."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "Socket closed"


@pytest.mark.parametrize(("ca", "hinted"), [(False, True), (True, False)])
def test_an_unreachable_coordinator_without_ca_hints_at_tls(
        recorder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], ca: bool, hinted: bool) -> None:
    """Before: "UNAVAILABLE: Socket closed", with no word of --ca."""
    def runs(self: Recorder) -> list[Any]:
        raise Unavailable()

    monkeypatch.setattr(Recorder, "runs", runs, raising=False)
    ca_file = tmp_path / "ca.pem"
    with pytest.raises(SystemExit) as end:
        main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
              *(["--ca", str(ca_file)] if ca else []), "list"])
    assert end.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fedhh admin list: error: UNAVAILABLE: Socket closed")
    assert err.endswith("(if the service is served over TLS, pass --ca with its ca.pem)") \
        is hinted


def test_start_names_deny_list_items_longer_than_the_codes(
        recorder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A deny-list item longer than the run's codes denies every item whose code starts as
    its own; the coordinator knows no items, so the operator's client says it as it starts."""
    deny = tmp_path / "deny.txt"
    deny.write_text("https://example.com/search?q=" + "new+york+" * 80 + "\nshort\n")
    assert main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
                 "start", "--run-id", "r5", "--deny-list", str(deny)]) == 0
    err = capsys.readouterr().err
    assert ("fedhh admin start: warning: deny-list item https://example.com/search?q=new+york+"
            in err)
    assert "longer than the codes" in err and "short" not in err


class Refused(grpc.RpcError):
    """A refusal whose details quote a value with repr, then a terminal escape and a line."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.INVALID_ARGUMENT

    def details(self) -> str:
        return "label must be printable text, got 'a\\tb'\x1b[31m red\nsecond line"


def test_a_refusal_is_one_line_with_escapes_but_its_backslashes_as_sent(
        recorder: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    r"""Before: the repr's backslash was doubled again (got 'a\\tb'); ESC and the line
    break are still escaped, so a server's words cannot act on the terminal."""
    def runs(self: Recorder) -> list[Any]:
        raise Refused()

    monkeypatch.setattr(Recorder, "runs", runs, raising=False)
    with pytest.raises(SystemExit):
        main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
              "list"])
    err = capsys.readouterr().err
    assert err == ("fedhh admin list: error: INVALID_ARGUMENT: label must be printable text, got "
                   "'a\\tb'\\x1b[31m red\\x0asecond line\n")


def test_min_devices_above_target_devices_names_the_flag(recorder: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """Before: "fedhh admin: error: need 3 <= min_devices <= target_devices, got 500 and 400",
    naming no option; nothing is sent to the coordinator."""
    with pytest.raises(SystemExit) as exit_:
        main(["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(recorder),
              "start", "--run-id", "r1", "--target-devices", "400", "--min-devices", "500"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "fedhh admin start: error: argument --min-devices: min_devices 500 must be from 3 to "
        "target_devices (400): a round releases only with min_devices of the devices it draws"]
    assert not any(call[0] == "start" for call in Recorder.calls)
