"""`fedhh certs` makes --out and --secrets only as the last folder of their paths: a missing
parent is refused naming it, and nothing is written. Before, every missing folder was made, so
`fedhh certs --out deploy/tsl/x` (a typo in a parent) made a new tree holding a new CA, and a
mistyped --secrets a new signing key and tokens, silently, as --db, --signing-key, --state-dir
and --workdir no longer do."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.cli.main import main


def _refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line


@pytest.mark.parametrize(("option", "made"), [
    ("--out", "make a new CA, which the devices and services that trust the earlier one's "
              "ca.pem refuse"),
    ("--secrets", "make a new signing key and service tokens, which the services given the "
                  "earlier ones refuse"),
])
def test_a_missing_parent_is_refused_and_nothing_is_made(
        option: str, made: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folders = {"--out": tmp_path / "tls", "--secrets": tmp_path / "secrets"}
    folders[option] = tmp_path / "typo" / "deeper" / option.strip("-")
    argv = ["certs", "--out", str(folders["--out"]), "--secrets", str(folders["--secrets"]),
            "--device-tokens", "2", "--device-replicas", "1"]
    assert _refusal(argv, capsys) == (
        f"fedhh certs: error: {option} {folders[option]}: the folder {tmp_path}/typo/deeper "
        f"does not exist; only the last folder of the path is made (a mistyped path would "
        f"{made}): check the path, or make its parent first")
    assert list(tmp_path.iterdir()) == []


def test_the_last_folder_is_made(tmp_path: Path) -> None:
    assert main(["certs", "--out", str(tmp_path / "tls"), "--secrets",
                 str(tmp_path / "secrets"), "--device-tokens", "2",
                 "--device-replicas", "1"]) == 0
    assert (tmp_path / "tls" / "ca.pem").is_file()
    assert (tmp_path / "secrets" / "control.token").is_file()


def test_the_help_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["certs", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert ("directory for the CA and server certificate (made if missing, as the last folder "
            "of the path only: its parent must exist)") in shown
    assert "the coordinator signing key here (made as --out is)" in shown
