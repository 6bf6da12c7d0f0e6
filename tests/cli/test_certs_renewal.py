"""A renewal with `fedhh certs` says that the services must be restarted to serve it: they read
their certificate as they start, and before nothing said so (docs/networked.md said "rerun the
command to renew it"), so a renewed stack served the old certificate until it expired."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.cli.main import main

RESTART = ("the services read server.pem and server.key as they start: restart those that "
           "serve them to serve this one (compose: docker compose restart aggregator "
           "coordinator selector)")


def test_only_a_renewal_says_to_restart_the_services(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tls"
    assert main(["certs", "--out", str(out)]) == 0
    assert RESTART not in capsys.readouterr().out  # a first certificate: nothing serves it yet
    first = (out / "server.pem").read_bytes()
    assert main(["certs", "--out", str(out), "--hosts", "localhost,fedhh.example.org"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (out / "server.pem").read_bytes() != first
    assert lines.count(RESTART) == 1
    assert lines.index(RESTART) == 2  # right after the line naming the new certificate
    assert lines[1].startswith(f"wrote {out / 'server.pem'} and {out / 'server.key'} for "
                               "localhost, fedhh.example.org; valid until ")


NOTE = ("fedhh certs: warning: server.key and the secrets are mode 0600 for uid {uid} alone; "
        "for docker compose, whose services run as uid 10001, run this again with --owner "
        "10001:10001 (as root) or --group 10001")


def test_files_only_the_caller_can_read_say_what_compose_needs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: nothing said so, and the compose stack's services stopped at their first
    secret ("cannot read the control token file ...: Permission denied"), restarting for
    ever."""
    import os

    from fedhh.cli import certs

    uid = os.geteuid()
    argv = ["certs", "--out", str(tmp_path / "tls"), "--secrets", str(tmp_path / "secrets")]
    assert main(argv) == 0
    err = capsys.readouterr().err.splitlines()
    if uid != certs.CONTAINER_UID:
        assert err[-1] == NOTE.format(uid=uid)
    monkeypatch.setattr(os, "chown", lambda *args: None)  # (as root would; not needed here)
    assert main([*argv, "--group", str(os.getegid())]) == 0
    assert "server.key" not in capsys.readouterr().err  # readable by that group
    monkeypatch.setattr(os, "geteuid", lambda: certs.CONTAINER_UID)
    assert main(argv) == 0
    assert "server.key" not in capsys.readouterr().err  # the containers' user itself


def test_without_secrets_the_note_names_server_key_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, ``certs --out`` alone said "server.key and the secrets are mode 0600" though it
    wrote no secrets."""
    import os

    from fedhh.cli import certs

    assert main(["certs", "--out", str(tmp_path / "tls")]) == 0
    captured = capsys.readouterr()
    if os.geteuid() != certs.CONTAINER_UID:
        assert captured.err.startswith(f"fedhh certs: warning: server.key is mode 0600 for uid "
                                       f"{os.geteuid()} alone; ")
    assert "the secrets" not in captured.out + captured.err
