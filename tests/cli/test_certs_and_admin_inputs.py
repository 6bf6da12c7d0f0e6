"""Inputs `fedhh certs` and `fedhh admin` must refuse, in one line with exit code 2, before
they write anything: existing secrets the services would not accept, host names no certificate
should carry, an --out that holds earlier tokens, an admin token gRPC cannot carry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _admin_recorder import Recorder

from fedhh.cli.main import main
from fedhh.errors import ConfigError
from fedhh.rpc import admin_client
from fedhh.rpc.credentials import read_secret
from fedhh_coordinator import auth


def files_under(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and its bytes: what a refused command must leave as it was."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line ``fedhh argv`` is refused with (exit code 2, no traceback)."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def certs(tmp_path: Path, *extra: str) -> list[str]:
    return ["certs", "--out", str(tmp_path / "tls"), "--secrets", str(tmp_path / "secrets"),
            "--device-tokens", "6", "--device-replicas", "2", *extra]


@pytest.fixture
def deployed(tmp_path: Path) -> Path:
    """A secrets folder and certificates from an earlier, successful run."""
    assert main(certs(tmp_path)) == 0
    return tmp_path


# 1. device-tokens.txt in a format certs does not write
@pytest.mark.parametrize(("damage", "line", "found"), [
    # (before: split on whitespace and written back: the replicas got "50 garbage", "55 7")
    (lambda t: t + b"abc\n50 garbage\n55 7\n", 7, "found 'abc'"),
    (lambda t: t + b"50 " + t[:64] + b"\n", 7, "found '50 "),
    # (before: UnicodeDecodeError traceback)
    (lambda t: t[:65] + b"\xff\xfe\n" + t[65:], 2, "bytes that are not ASCII text"),
    # (before: skipped, so every later user's token moved up by one)
    (lambda t: t[:65] + b"\n" + t[65:], 2, "an empty line"),
    (lambda t: t + t[:65], 7, "the token of line 1 again"),
])
def test_a_malformed_device_tokens_file_is_refused_by_line_and_nothing_changes(
        deployed: Path, damage: Any, line: int, found: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    tokens = deployed / "secrets" / "device-tokens.txt"
    tokens.write_bytes(damage(tokens.read_bytes()))
    before = files_under(deployed)
    error = refusal(certs(deployed), capsys)
    assert f"{tokens}:{line}:" in error and found in error, error
    assert files_under(deployed) == before


# 2. an existing token the services refuse at start
@pytest.mark.parametrize(("name", "content", "needle"), [
    # (before: kept, exit code 0; every service then refused to start)
    ("admin", b"short", "must be at least 16 bytes"),
    ("control", b"  0123456789\n", "must be at least 16 bytes"),
    ("admin", b"\xff\xfe0123456789abcdef", "is not printable ASCII text"),
])
def test_an_existing_token_the_services_refuse_is_refused(
        tmp_path: Path, name: str, content: bytes, needle: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / f"{name}.token").write_bytes(content)
    error = refusal(certs(tmp_path), capsys)
    assert str(secrets / f"{name}.token") in error and needle in error, error
    assert files_under(tmp_path) == {f"secrets/{name}.token": content}


# 3. every input is checked before the certificates are written
def test_a_secrets_path_that_is_a_file_writes_no_certificates(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "secrets").write_text("not a folder")
    error = refusal(certs(tmp_path), capsys)
    assert "--secrets" in error and "is not a folder" in error, error
    assert not (tmp_path / "tls").exists()  # (before: ca.pem, server.pem ... written)


def test_a_corrupt_signing_key_leaves_the_old_certificates(
        deployed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = deployed / "secrets" / "coordinator-signing.pem"
    key.write_text("-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n")
    before = files_under(deployed)
    error = refusal(certs(deployed), capsys)
    assert f"{key} is not an unencrypted PEM private key" in error, error
    assert files_under(deployed) == before


# 4. host names a certificate should not carry
@pytest.mark.parametrize(("hosts", "needle"), [
    ("bad host,,..,a*b", "'bad host' contains a space"),
    ("localhost,,coordinator", "'' is empty"),
    ("localhost,..", "'..' has an empty label"),
    ("a..b", "'a..b' has an empty label"),
    ("*.example.org", "is a wildcard"),
    ("a*b", "is a wildcard"),
    ("x" * 64 + ".example.org", "has a label of 64 characters"),
    ("-a.example.org", "has the label '-a'"),
    ("café.example.org", "is not ASCII"),
])
def test_a_bad_host_name_is_refused_before_a_certificate_is_written(
        tmp_path: Path, hosts: str, needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    error = refusal(["certs", "--out", str(tmp_path / "tls"), f"--hosts={hosts}"], capsys)
    assert error.startswith("fedhh certs: error: --hosts: ") and needle in error, error
    assert not (tmp_path / "tls").exists()


def test_addresses_and_compose_names_are_good_hosts(tmp_path: Path) -> None:
    assert main(["certs", "--out", str(tmp_path / "tls"),
                 "--hosts", "localhost, 127.0.0.1,::1,fedhh_coordinator_1,xn--caf-dma.org"]) == 0


# 5 and 6. `fedhh admin`
def mint(token: Path, out: Path, *extra: str) -> list[str]:
    return ["admin", "--coordinator", "127.0.0.1:7000", "--token-file", str(token),
            "mint-tokens", "--count", "2", "--out", str(out), *extra]


def test_mint_tokens_refuses_an_existing_out_before_minting(
        recorder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "earlier.tokens"
    out.write_text("still-valid tokens minted earlier\n")
    error = refusal(mint(recorder, out), capsys)
    assert f"--out {out} already exists" in error and "--force" in error, error
    assert out.read_text() == "still-valid tokens minted earlier\n"
    assert not any(call == "mint" for call, _ in Recorder.calls)


def test_mint_tokens_force_replaces_an_existing_out(recorder: Path, tmp_path: Path) -> None:
    out = tmp_path / "earlier.tokens"
    out.write_text("old\n")
    assert main(mint(recorder, out, "--force")) == 0
    assert out.read_text() == f"{0:064x}\n{1:064x}\n"


def test_a_binary_admin_token_file_is_one_line_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (before: UnicodeDecodeError traceback; the coordinator had started with this file)
    token = tmp_path / "admin.token"
    token.write_bytes(b"\x00\xff\xfe" + bytes(range(0x80, 0xA0)))
    error = refusal(["admin", "--coordinator", "127.0.0.1:1", "--token-file", str(token),
                     "list"], capsys)
    assert f"the admin token (from {token}) is not printable ASCII text" in error, error


def test_a_service_refuses_a_token_no_call_could_present(tmp_path: Path) -> None:
    """The coordinator, the aggregator and every client read their tokens with
    ``read_secret``: a token gRPC metadata cannot carry, or one longer than the coordinator's
    authorization cap, is refused when read, not at every call afterwards."""
    token = tmp_path / "admin.token"
    for value, message in ((b"\x00\xff" + b"a" * 20, "not printable ASCII text"),
                           (b"a" * 506, "at most 505 bytes")):
        token.write_bytes(value)
        with pytest.raises(ConfigError, match=message):
            read_secret(token, "FEDHH_ADMIN_TOKEN", "admin token")
    token.write_bytes(b"a" * 505)
    assert read_secret(token, "FEDHH_ADMIN_TOKEN", "admin token") == b"a" * 505


def test_the_admin_client_presents_the_token_as_the_coordinator_reads_it(
        tmp_path: Path) -> None:
    """Both read the file as bytes, stripped: surrounding blanks and newlines are no part of
    the token the coordinator compares with what the client sends."""
    token = tmp_path / "admin.token"
    token.write_bytes(b" \t0123456789abcdef0123 \r\n")
    coordinator_token = read_secret(token, "FEDHH_ADMIN_TOKEN", "admin token")
    with admin_client.AdminClient("127.0.0.1:1", read_secret(token, "", "admin token")) as client:
        auth.check_admin(client.metadata, coordinator_token)
