"""`fedhh certs`: a development PKI and the service secrets, readable by the containers' user
only when asked (--owner / --group), never overwriting a secret, with a stated lifetime."""

from __future__ import annotations

import datetime as dt
import os
import stat
from pathlib import Path

import pytest
from cryptography import x509

from fedhh.cli import certs
from fedhh.cli.main import main

SERVICE_FILES = ("tls/server.key", "secrets/control.token", "secrets/device-tokens.txt",
                 "secrets/admin.token", "secrets/coordinator-signing.pem",
                 *(f"secrets/device-tokens-{i}-of-4.txt" for i in range(4)))


def make(tmp_path: Path, *extra: str) -> None:
    assert main(["certs", "--out", str(tmp_path / "tls"), "--secrets",
                 str(tmp_path / "secrets"), *extra]) == 0


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_secrets_are_private_by_default_and_public_files_are_readable(
    tmp_path: Path
) -> None:
    old = os.umask(0o077)  # an operator's strict umask must not hide the certificates
    try:
        make(tmp_path)
    finally:
        os.umask(old)
    for name in (*SERVICE_FILES, "tls/ca.key"):
        assert mode(tmp_path / name) == 0o600, name
    for name in ("tls/ca.pem", "tls/server.pem", "secrets/coordinator-signing.pem.pub"):
        assert mode(tmp_path / name) & 0o044 == 0o044, name


def test_group_makes_service_files_group_readable_but_never_the_ca_key(tmp_path: Path) -> None:
    gid = os.getgid()  # a group the caller belongs to
    make(tmp_path, "--group", str(gid))
    for name in SERVICE_FILES:
        path = tmp_path / name
        assert (mode(path), path.stat().st_gid) == (0o640, gid), name
    assert mode(tmp_path / "tls/ca.key") == 0o600


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_owner_gives_service_files_to_the_image_user(tmp_path: Path) -> None:
    make(tmp_path, "--owner", "10001:10001")
    for name in SERVICE_FILES:
        info = (tmp_path / name).stat()
        assert (info.st_uid, info.st_gid, mode(tmp_path / name)) == (10001, 10001, 0o600)
    assert (tmp_path / "tls/ca.key").stat().st_uid == os.geteuid()


def test_a_refused_chown_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(*_: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(certs.os, "chown", refuse)
    with pytest.raises(SystemExit) as exit_:
        make(tmp_path, "--owner", "10001:10001")
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--owner needs root" in err[0] and "server.key" in err[0]


@pytest.mark.parametrize(("given", "said"), [
    (["--owner", "10001:10001"], "--owner 10001:10001 needs root (this is uid 1000): run "
                                 "`fedhh certs` as root, or give --group 10001"),
    (["--group", "10001"], "--group: this user (uid 1000) is not in group 10001 (its groups: "
                           "1000, 1001): as root, `groupadd -g 10001 fedhh && usermod -aG "
                           "fedhh $USER` and log in again"),
    (["--owner", "1000:10001"], "--owner: this user (uid 1000) is not in group 10001"),
])
def test_an_owner_or_group_out_of_reach_is_refused_before_anything_is_written(
        given: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Not root, in groups 1000 and 1001. Before, the CA, server.pem and server.key were
    written, and then the chown of server.key refused ("cannot give tls/server.key to
    10001:10001: permission denied"), the secrets not written."""
    monkeypatch.setattr(certs.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(certs.os, "getegid", lambda: 1000)
    monkeypatch.setattr(certs.os, "getgroups", lambda: [1001])
    with pytest.raises(SystemExit) as exit_:
        make(tmp_path, *given)
    assert exit_.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"fedhh certs: error: {said}") and line.endswith(
        "; nothing was written"), line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["x", "1:y", "-1", "1:2:3"])
def test_bad_owner_is_refused_by_name(value: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        make(tmp_path, "--owner", value)
    assert "--owner" in capsys.readouterr().err
    assert not (tmp_path / "tls").exists()


def test_rerunning_renews_the_certificate_and_keeps_every_secret(tmp_path: Path) -> None:
    make(tmp_path, "--days", "2")
    kept = {name: (tmp_path / name).read_bytes() for name in SERVICE_FILES[1:]}
    cert = x509.load_pem_x509_certificate((tmp_path / "tls/server.pem").read_bytes())
    left = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
    assert dt.timedelta(days=1, hours=23) < left <= dt.timedelta(days=2)
    make(tmp_path, "--hosts", "coordinator,aggregator,fedhh.example.org")
    renewed = x509.load_pem_x509_certificate((tmp_path / "tls/server.pem").read_bytes())
    assert renewed.not_valid_after_utc - dt.datetime.now(dt.UTC) > dt.timedelta(days=29)
    names = renewed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "fedhh.example.org" in names.get_values_for_type(x509.DNSName)
    assert {name: (tmp_path / name).read_bytes() for name in SERVICE_FILES[1:]} == kept


def verifies(cert: Path, ca: Path) -> bool:
    """Whether ``cert`` is signed by the CA in ``ca`` (what every client's TLS checks)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import ec

    leaf = x509.load_pem_x509_certificate(cert.read_bytes())
    issuer = x509.load_pem_x509_certificate(ca.read_bytes()).public_key()
    try:
        issuer.verify(leaf.signature, leaf.tbs_certificate_bytes,  # type: ignore[union-attr,call-arg]
                      ec.ECDSA(leaf.signature_hash_algorithm))  # type: ignore[arg-type]
    except InvalidSignature:
        return False
    return True


def test_renewing_keeps_the_ca_every_client_holds(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a rerun made a new CA too, so every device and operator holding ca.pem lost
    the services at the next restart (BAD_SIGNATURE, with nothing saying why). Now the CA
    (valid 10 years) is kept and the new certificate verifies under the ca.pem handed out."""
    make(tmp_path)
    handed_out = tmp_path / "handed-out-ca.pem"
    handed_out.write_bytes((tmp_path / "tls/ca.pem").read_bytes())
    first = (tmp_path / "tls/server.pem").read_bytes()
    capsys.readouterr()
    make(tmp_path)
    out = capsys.readouterr().out
    assert f"kept  {tmp_path / 'tls/ca.pem'} (the CA, valid until " in out
    assert (tmp_path / "tls/server.pem").read_bytes() != first
    assert verifies(tmp_path / "tls/server.pem", handed_out)
    ca = x509.load_pem_x509_certificate(handed_out.read_bytes())
    assert ca.not_valid_after_utc - dt.datetime.now(dt.UTC) > dt.timedelta(days=3649)
    make(tmp_path, "--new-ca")
    assert not verifies(tmp_path / "tls/server.pem", handed_out)
    assert verifies(tmp_path / "tls/server.pem", tmp_path / "tls/ca.pem")


def test_a_kept_ca_that_ends_first_ends_the_certificate_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CA made by an earlier fedhh (valid as long as its first certificate, 30 days)."""
    from fedhh.rpc import tls

    with monkeypatch.context() as earlier:
        earlier.setattr(tls, "CA_DAYS", 30)
        tls.make_dev_pki(tmp_path / "tls", ["localhost"], days=30, new_ca=True)
    old = tmp_path / "tls/ca.pem"
    short = x509.load_pem_x509_certificate(old.read_bytes()).not_valid_after_utc
    make(tmp_path, "--days", "90")
    cert = x509.load_pem_x509_certificate((tmp_path / "tls/server.pem").read_bytes())
    assert cert.not_valid_after_utc <= short
    assert "(the CA ends before --days 90: the certificate ends with it; --new-ca" in \
        capsys.readouterr().out


def test_a_ca_key_that_is_not_the_cas_is_refused_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make(tmp_path)
    other = tmp_path / "other"
    other.mkdir()  # (certs makes the last folder of --out alone)
    make(other)
    (tmp_path / "tls/ca.key").write_bytes((other / "tls/ca.key").read_bytes())
    before = (tmp_path / "tls/server.pem").read_bytes()
    with pytest.raises(SystemExit) as end:
        make(tmp_path)
    assert end.value.code == 2
    assert f"{tmp_path / 'tls/ca.key'} is not the key of {tmp_path / 'tls/ca.pem'}" in \
        capsys.readouterr().err
    assert (tmp_path / "tls/server.pem").read_bytes() == before


@pytest.mark.parametrize("replicas", [1, 3, 4])
def test_each_device_replica_gets_a_disjoint_share_of_the_tokens(tmp_path: Path,
                                                                  replicas: int) -> None:
    """Replica i's file names the users u with u mod N = i and their tokens from
    device-tokens.txt; the shares cover every token once. A longer tokens file later gives
    every replica its share of the new tokens too."""
    from fedhh.rpc.device_users import read_tokens

    for count in (10, 23):
        make(tmp_path, "--device-tokens", str(count), "--device-replicas", str(replicas))
        every = (tmp_path / "secrets" / "device-tokens.txt").read_text().split()
        assert len(every) == count
        shares = [read_tokens(tmp_path / "secrets" / f"device-tokens-{i}-of-{replicas}.txt")
                  for i in range(replicas)]
        for i, share in enumerate(shares):
            assert share == {u: every[u] for u in range(i, count, replicas)}
        assert sorted(u for share in shares for u in share) == list(range(count))


def test_more_replicas_than_tokens_is_one_clear_error(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        make(tmp_path, "--device-tokens", "3", "--device-replicas", "4")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--device-replicas 4" in err[0]


@pytest.mark.parametrize(("extra", "needle"), [
    (["--days", "1e9"], "argument --days: must be at most 36,500"),
    (["--group", "99999999999"], "argument --group: a user or group id is at most"),
    (["--owner", "1:99999999999"], "argument --owner: expected UID or UID:GID"),
    (["--device-tokens", "1e9", "--secrets", "s"], "argument --device-tokens: must be at most"),
    (["--device-replicas", "50", "--device-tokens", "10", "--secrets", "s"],
     "--device-replicas 50 is more than the 10 --device-tokens"),
    # (before: ignored, as no tokens are written without --secrets)
    (["--device-tokens", "5"], "--device-tokens goes with --secrets DIR"),
    (["--device-tokens", "5", "--device-replicas", "2"],
     "--device-tokens and --device-replicas go with --secrets DIR"),
])
def test_values_past_their_bounds_are_refused_before_anything_is_written(
        extra: list[str], needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # (before: overflow tracebacks, memory growing without bound, or an error only after the
    # certificates and secrets were written)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["certs", "--out", "c", *extra])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert list(tmp_path.iterdir()) == []
