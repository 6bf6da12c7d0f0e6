"""`fedhh up --dashboard` names the `fedhh admin` line that reaches its coordinator while the
stack stays up. Before, it printed the dashboard's address alone: the coordinator's gRPC port
was in the workdir's coordinator.ready.json only, and the README's admin commands name the
compose stack's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fedhh.cli import up


def _topo(workdir: Path) -> SimpleNamespace:
    return SimpleNamespace(workdir=workdir,
                           services={"coordinator": SimpleNamespace(ready={"dashboard_port": 9})},
                           address=lambda name: {"coordinator": "127.0.0.1:7000"}[name])


@pytest.mark.parametrize("secure, transport", [
    (True, "--ca '/w d/tls/ca.pem'"), (False, "--insecure")])
def test_the_admin_line_names_the_coordinator_its_transport_and_token(
        secure: bool, transport: str, capsys: pytest.CaptureFixture[str]) -> None:
    up.announce_dashboard(_topo(Path("/w d")), secure)
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"admin: fedhh admin --coordinator 127.0.0.1:7000 {transport} --token-file "
        "'/w d/admin.token' list (or status, results RUN: `fedhh admin --help`)")
