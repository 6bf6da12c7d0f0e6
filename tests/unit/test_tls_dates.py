"""A service refuses to start with a TLS certificate every client would refuse: expired, or
valid only from later than the machine's clock says (outside probe, thirty-sixth stop), and
warns once as it starts when its certificate expires within a week.

Before, `fedhh aggregator --tls-dir` with a certificate that ended a day ago logged
"aggregator serving"; every call and health check then failed at the clients' end (`fedhh
health`: "the certificate served ... has expired")."""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fedhh.errors import ConfigError
from fedhh.rpc import serving
from fedhh.rpc.credentials import load_or_create_signing_key
from fedhh.rpc.tls import TlsFiles, make_dev_pki

ROOT = Path(__file__).resolve().parents[2]


def pki_valid(tmp_path: Path, since_days: float, until_days: float) -> TlsFiles:
    """The development PKI with its server certificate re-issued (same CA, a new key) for
    127.0.0.1, valid from ``since_days`` to ``until_days`` days from now."""
    files = make_dev_pki(tmp_path / "tls", ["127.0.0.1"])
    ca_key = serialization.load_pem_private_key((tmp_path / "tls" / "ca.key").read_bytes(),
                                                None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca = x509.load_pem_x509_certificate(files.ca.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now + dt.timedelta(days=since_days))
            .not_valid_after(now + dt.timedelta(days=until_days))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return files


def test_an_expired_certificate_is_refused_naming_the_file_and_the_date(tmp_path: Path
                                                                        ) -> None:
    files = pki_valid(tmp_path, -40, -1)
    with pytest.raises(ConfigError) as error:
        serving.check_tls_files(files)
    message = str(error.value)
    assert message.startswith(f"TLS certificate {files.cert} expired on "), message
    assert "every client refuses it; renew it (`fedhh certs` again" in message


def test_a_certificate_valid_only_later_is_refused(tmp_path: Path) -> None:
    files = pki_valid(tmp_path, 2, 30)
    with pytest.raises(ConfigError, match=r"is valid only from .* and this machine's clock "
                                          r"says .* \(is the clock right\?\)"):
        serving.check_tls_files(files)


def test_a_certificate_valid_from_within_the_clock_skew_is_served(tmp_path: Path) -> None:
    serving.check_tls_files(pki_valid(tmp_path, 1 / 1440, 30))  # from a minute ahead


def test_a_certificate_that_ends_within_a_week_is_served_with_one_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    files = pki_valid(tmp_path, -1, 3)
    with caplog.at_level(logging.WARNING, logger="fedhh.rpc.serving"):
        serving.check_tls_files(files)
        serving.check_tls_files(files)  # (checked again as the service binds: no repeat)
    warned = [r for r in caplog.records if "expires soon" in r.getMessage()]
    assert len(warned) == 1 and warned[0].certificate == str(files.cert)  # type: ignore[attr-defined]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fedhh.rpc.serving"):
        serving.check_tls_files(pki_valid(tmp_path / "month", -1, 30))
    assert not [r for r in caplog.records if "expires soon" in r.getMessage()]


@pytest.mark.parametrize("service", ["aggregator", "combiner"])
def test_a_service_with_an_expired_certificate_stops_before_it_serves(
        tmp_path: Path, service: str) -> None:
    files = pki_valid(tmp_path, -40, -1)
    token = tmp_path / "control.token"
    token.write_text("c" * 32)
    load_or_create_signing_key(tmp_path / "signing.pem")
    extra = ["--worker", "127.0.0.1:9"] if service == "combiner" else []
    result = subprocess.run(
        [sys.executable, "-m", "fedhh.cli.main", service, "--listen", "127.0.0.1:0",
         "--tls-dir", str(files.cert.parent), "--coordinator-key",
         str(tmp_path / "signing.pem.pub"), "--control-token-file", str(token),
         "--state-dir", str(tmp_path / "state"), "--ready-file", str(tmp_path / "ready.json"),
         *extra],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={"PYTHONPATH": f"{ROOT}:{ROOT / 'server'}:{ROOT / 'aggregator'}:{ROOT / 'device'}",
             "PATH": "/usr/bin:/bin"})
    assert result.returncode != 0, result.stderr[-2000:]
    assert f"TLS certificate {files.cert} expired on " in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "ready.json").exists()
