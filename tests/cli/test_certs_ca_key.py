"""`fedhh certs` says which of its TLS files to hand out and which stays with the operator.

Before: it printed "wrote tls/ca.pem (the CA, valid until ...)" and nothing about ca.key,
written beside it in --out; docs/networked.md told operators to hand ca.pem to every device,
and the folder holding both read as the thing to hand over. Whoever holds ca.key makes
certificates that every device trusts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_kit import run_cli


@pytest.mark.parametrize("runs", [1, 2])
def test_the_ca_line_names_ca_key_as_the_operators(tmp_path: Path, runs: int,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    tls = tmp_path / "tls"
    argv = ["certs", "--out", str(tls), "--secrets", str(tmp_path / "secrets")]
    for _ in range(runs):  # (the second keeps the CA and says so in the same line)
        code, out, _ = run_cli(argv, capsys)
    assert code == 0 and (tls / "ca.key").is_file()
    ca_line = next(line for line in out.splitlines() if f"{tls / 'ca.pem'} (the CA" in line)
    assert ca_line.endswith(f"; hand out this file alone: {tls / 'ca.key'}, its signing key, "
                            "stays with you)")
