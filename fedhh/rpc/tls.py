"""TLS material: loading certificates from files, and a development CA.

Every listener serves TLS from PEM files (``TlsFiles``). ``make_dev_pki`` writes a local CA and a
certificate for the given host names, signed by it, for development and tests
(`fedhh certs --out DIR`); production deployments mount their own files.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fedhh.errors import ConfigError
from fedhh.input_files import CERTIFICATE_FILE_BYTES, read_whole
from fedhh.rpc.credentials import permission_remedy


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: this endpoint's certificate and key, and the CA that signs its peers."""

    cert: Path
    key: Path
    ca: Path

    @staticmethod
    def from_dir(directory: str | os.PathLike[str], name: str = "server") -> TlsFiles:
        """The files of a --tls-dir; ConfigError naming those it lacks. (Before, a folder that
        was not one, such as the secrets folder, was refused for its first file read, "cannot
        read CA file secrets/ca.pem: No such file or directory", naming no option.)"""
        root = Path(directory)
        files = TlsFiles(root / f"{name}.pem", root / f"{name}.key", root / "ca.pem")
        missing = [p.name for p in (files.ca, files.cert, files.key) if not p.exists()]
        if missing:
            where = "does not exist" if not root.is_dir() else f"holds no {', '.join(missing)}"
            raise ConfigError(f"--tls-dir {root} {where} (a TLS folder holds ca.pem, {name}.pem "
                              f"and {name}.key: `fedhh certs --out DIR` writes them)")
        return files

    def server_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials([(read_tls_file(self.key), read_tls_file(self.cert))])

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """A service's credentials for its peers (:func:`ca_credentials` of this ca.pem)."""
        return ca_credentials(self.ca)

    def server_context(self, what: str) -> ssl.SSLContext:
        """A server-side context for the HTTPS listeners (``what`` names one in errors): this
        certificate and key, TLS 1.2 or later, HTTP/1.1 by ALPN (aiohttp speaks no HTTP/2)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(["http/1.1"])
        read_tls_file(self.cert)  # (an unreadable file named, with the remedy)
        read_tls_file(self.key, "TLS key")
        try:
            context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as error:
            raise ConfigError(f"{what} cannot load {self.cert}: {error}") from None
        return context


def tls_ca(directory: str | os.PathLike[str]) -> str:
    """The CA file of a --tls-dir, for a check of a peer made before the service reads its own
    files: a folder without one is refused as ``TlsFiles.from_dir`` refuses it (naming the
    option and what the folder lacks), one with it gives it even if it lacks the rest, which
    the service names as it starts, after the peer's check."""
    ca = Path(directory) / "ca.pem"
    if not ca.exists():
        TlsFiles.from_dir(directory)
    return str(ca)


def read_tls_file(path: str | os.PathLike[str], what: str = "TLS file") -> bytes:
    """A certificate, key or CA file's bytes; ConfigError naming it if it cannot be read."""
    try:
        return read_whole(path, CERTIFICATE_FILE_BYTES, what)
    except OSError as error:
        raise ConfigError(f"cannot read {what} {os.fspath(path)}: {error.strerror}"
                          f"{permission_remedy(path, error)}") from None


def ca_certificates(ca: str | os.PathLike[str]) -> bytes:
    """The PEM bytes of the CA file ``ca``, read to a bound (:func:`read_tls_file`), refused
    when they hold no certificate: gRPC would take such a file, fail every handshake and
    report the server UNAVAILABLE. Every client trusts its CA through here: gRPC's
    (:func:`ca_credentials`) and the TLS contexts of the framed and Connect clients
    (:func:`client_context`). (Before, the framed and Connect clients each loaded the file
    with OpenSSL, saying "cannot load the CA" or "cannot read CA file" with OpenSSL's words,
    and a service's channels to its peers took any ca.pem.)"""
    pem = read_tls_file(ca, "CA file")
    try:
        x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise ConfigError(f"CA file {os.fspath(ca)} holds no PEM certificate (give the CA's "
                          "certificate, ca.pem, not a key)") from None
    return pem


def ca_credentials(ca: str | os.PathLike[str]) -> grpc.ChannelCredentials:
    """gRPC client credentials that trust the CA in ``ca`` (:func:`ca_certificates`)."""
    return grpc.ssl_channel_credentials(root_certificates=ca_certificates(ca))


def client_context(ca: str | os.PathLike[str], alpn: str | None = None) -> ssl.SSLContext:
    """A client's TLS context (the framed and Connect clients) trusting the CA in ``ca``
    (:func:`ca_certificates`): TLS 1.2 or later, the host name checked, offering ``alpn``
    where given."""
    der = b"".join(certificate.public_bytes(serialization.Encoding.DER)
                   for certificate in x509.load_pem_x509_certificates(ca_certificates(ca)))
    try:
        context = ssl.create_default_context(cadata=der)
    except ssl.SSLError as error:  # (a certificate OpenSSL takes for no CA)
        raise ConfigError(f"cannot load the CA file {os.fspath(ca)}: {error}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if alpn is not None:
        context.set_alpn_protocols([alpn])
    return context


CA_DAYS = 3650  # a development CA's life: renewing the server certificate keeps it


def make_dev_pki(out: str | os.PathLike[str], hosts: list[str], days: int = 30,
                 new_ca: bool = False) -> TlsFiles:
    """A server certificate (server.pem/server.key) valid for ``hosts`` (DNS names or IP
    addresses) for ``days``, signed by the development CA under ``out``: the CA already there
    (ca.pem/ca.key), so that a renewal leaves every client's ca.pem valid, else (or with
    ``new_ca``) a new one, valid ``CA_DAYS``. The server certificate ends no later than the CA
    (``fedhh certs`` says when a kept CA ends first)."""
    root = Path(out)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"cannot create {root}: {error.strerror}") from None
    now = dt.datetime.now(dt.UTC)
    kept = None if new_ca else existing_ca(root)
    if kept is not None:
        ca_key, ca_cert = kept
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fedhh development CA")])
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=max(days, CA_DAYS)))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
    ca_name = ca_cert.subject
    until = min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc)
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    private = serialization.PrivateFormat.PKCS8
    none = serialization.NoEncryption()
    if kept is None:
        _write(root / "ca.pem", ca_cert.public_bytes(pem), 0o644)
        _write(root / "ca.key", ca_key.private_bytes(pem, private, none), 0o600)
    _write(root / "server.pem", cert.public_bytes(pem), 0o644)
    _write(root / "server.key", key.private_bytes(pem, private, none), 0o600)
    return TlsFiles.from_dir(root)


def existing_ca(root: Path) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate] | None:
    """The development CA under ``root`` (its key and certificate) if both files are there,
    belong together and the CA has not expired; None if there is none. ConfigError for a CA
    that is there but unusable (a renewal would otherwise replace it, and every client's
    ca.pem with it, unsaid)."""
    cert_path, key_path = root / "ca.pem", root / "ca.key"
    if not cert_path.exists() and not key_path.exists():
        return None
    try:
        cert = x509.load_pem_x509_certificate(read_tls_file(cert_path, "CA file"))
        key = serialization.load_pem_private_key(read_tls_file(key_path, "CA key"),
                                                 password=None)
    except (ValueError, TypeError):
        raise ConfigError(f"{cert_path} and {key_path} are not a CA certificate and its key; "
                          "move them away, or pass --new-ca (every client then needs the "
                          "new ca.pem)") from None
    if (not isinstance(key, ec.EllipticCurvePrivateKey)
            or key.public_key() != cert.public_key()):
        raise ConfigError(f"{key_path} is not the key of {cert_path}; move them away, or pass "
                          "--new-ca (every client then needs the new ca.pem)")
    if cert.not_valid_after_utc <= dt.datetime.now(dt.UTC):
        raise ConfigError(f"the CA {cert_path} expired on {cert.not_valid_after_utc:%Y-%m-%d}: "
                          "pass --new-ca (every client then needs the new ca.pem)")
    return key, cert


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write ``data``; a new file gets ``mode``, an existing one keeps its owner and mode."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    except OSError as error:
        raise ConfigError(f"cannot write {path}: {error.strerror}") from None
    with os.fdopen(fd, "wb") as out:
        out.write(data)
