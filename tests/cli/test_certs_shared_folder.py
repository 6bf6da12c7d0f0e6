"""`fedhh certs --secrets` in the --out folder (or one inside the other) says that the secrets
then lie beside the TLS files, whose ca.pem every device and operator is handed. Before, it
wrote them there without a word. It is not refused: the Kubernetes overlays build each Secret
from files picked one by one in one folder (docs/scaling.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.cli.certs import shared_folder
from fedhh.cli.main import main


def test_the_secrets_in_the_tls_folder_are_written_with_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    both = tmp_path / "both"
    assert main(["certs", "--out", str(both), "--secrets", str(both), "--device-tokens", "2",
                 "--device-replicas", "1"]) == 0
    assert (both / "ca.pem").is_file() and (both / "admin.token").is_file()
    # (and, as any uid but the containers' own, the warning of files only it can read)
    warning = capsys.readouterr().err.splitlines()[0]
    assert warning.startswith(f"fedhh certs: warning: --secrets {both} is the --out folder: "
                              "the tokens, the signing key and every device token lie beside "
                              "ca.key and ca.pem. Hand out ca.pem alone, never the folder")


def test_how_the_folders_share(tmp_path: Path) -> None:
    tls = tmp_path / "tls"
    assert shared_folder(tls, tmp_path / "secrets") == ""
    assert shared_folder(tls, tmp_path / "tls-secrets") == ""  # (a prefix of the name only)
    assert shared_folder(tls, tmp_path / "x" / ".." / "tls") == "is the --out folder"
    assert shared_folder(tls, tls / "secrets") == "is inside the --out folder"
    assert shared_folder(tls / "tls", tls) == "holds the --out folder"


def test_for_kubernetes_the_shared_folder_prints_nothing_to_act_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command docs/scaling.md gives a Kubernetes operator, whose secretGenerator picks the
    files one by one and whose kubectl reads them as the operator: before, it warned that
    --secrets is the --out folder and noted the compose containers' --owner 10001:10001."""
    both = tmp_path / "both"
    assert main(["certs", "--out", str(both), "--secrets", str(both), "--device-tokens", "2",
                 "--device-replicas", "1", "--kubernetes"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert not any(line.startswith("note:") for line in captured.out.splitlines())
    assert (both / "admin.token").stat().st_mode & 0o777 == 0o600


def test_kubernetes_is_one_of_the_access_choices(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as end:
        main(["certs", "--out", str(tmp_path / "tls"), "--kubernetes", "--group", "10001"])
    assert end.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert not (tmp_path / "tls").exists()
