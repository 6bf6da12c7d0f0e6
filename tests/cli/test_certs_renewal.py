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
