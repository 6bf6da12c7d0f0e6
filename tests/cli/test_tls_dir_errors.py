"""A --tls-dir that is not a TLS folder (the secrets folder, a typo) is refused naming the
option and what the folder lacks. Before: "cannot read CA file secrets/ca.pem: No such file or
directory" (the coordinator and the selector, which read the CA first), naming no option."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_kit import one_line_error

from fedhh.errors import ConfigError
from fedhh.rpc.tls import TlsFiles, make_dev_pki


def test_from_dir_names_what_the_folder_lacks(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "admin.token").write_text("0123456789abcdef0123\n")
    with pytest.raises(ConfigError) as refused:
        TlsFiles.from_dir(secrets)
    assert str(refused.value) == (
        f"--tls-dir {secrets} holds no ca.pem, server.pem, server.key (a TLS folder holds "
        "ca.pem, server.pem and server.key: `fedhh certs --out DIR` writes them)")
    with pytest.raises(ConfigError, match=r"--tls-dir \S+ does not exist \(a TLS folder"):
        TlsFiles.from_dir(tmp_path / "nope")
    made = make_dev_pki(tmp_path / "tls", ["localhost"])
    assert TlsFiles.from_dir(tmp_path / "tls") == made


@pytest.mark.parametrize("argv", [
    ["coordinator", "--listen", "127.0.0.1:0", "--aggregator", "127.0.0.1:1"],
    ["selector", "--listen", "127.0.0.1:0", "--leader", "127.0.0.1:1", "--db", "c.sqlite",
     "--coordinator-key", "coordinator-signing.pem.pub"],
])
def test_a_service_given_the_secrets_folder_as_tls_dir_names_the_option(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    line = one_line_error([*argv, "--tls-dir", str(secrets)], capsys)
    assert line == (f"fedhh {argv[0]}: error: --tls-dir {secrets} holds no ca.pem, server.pem, "
                    "server.key (a TLS folder holds ca.pem, server.pem and server.key: `fedhh "
                    "certs --out DIR` writes them)")
