"""Every client trusts its CA through one loader (``fedhh.rpc.tls.ca_certificates``): gRPC's
credentials (a device's, a command's, a service's to its peers) and the TLS contexts of the
framed and Connect clients. Before, the framed and Connect clients each loaded the file with
OpenSSL and said so in words of their own ("cannot load the CA ...", "cannot read CA file
...: [X509: NO_CERTIFICATE_OR_CRL_FOUND] ..."), and ``TlsFiles.channel_credentials`` (the
coordinator's, a selector's and a combiner's channels to their peers) took any ca.pem, a key
too, and failed every handshake afterwards."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc.connect_client import ConnectChannel
from fedhh.rpc.framed.client import client_context as framed_context
from fedhh.rpc.framed.frames import ALPN
from fedhh.rpc.tls import TlsFiles, ca_credentials, client_context, make_dev_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_dev_pki(tmp_path_factory.mktemp("pki"), ["localhost"])


def _loaders(path: Path) -> dict[str, object]:
    return {
        "grpc": lambda: ca_credentials(path),
        "peers": lambda: TlsFiles(path, path, path).channel_credentials(),
        "framed": lambda: framed_context(path),
        "connect": lambda: ConnectChannel("127.0.0.1:1", str(path)),
    }


@pytest.mark.parametrize("client", ["grpc", "peers", "framed", "connect"])
def test_every_client_refuses_a_ca_file_without_a_certificate_alike(
        client: str, pki: TlsFiles, tmp_path: Path) -> None:
    key = tmp_path / "ca.pem"
    key.write_bytes(pki.key.read_bytes())
    with pytest.raises(ConfigError) as refused:
        _loaders(key)[client]()  # type: ignore[operator]
    assert str(refused.value) == (f"CA file {key} holds no PEM certificate (give the CA's "
                                  "certificate, ca.pem, not a key)")
    missing = tmp_path / "none.pem"
    with pytest.raises(ConfigError, match=rf"^cannot read CA file {missing}: No such file"):
        _loaders(missing)[client]()  # type: ignore[operator]


def test_a_client_context_trusts_the_ca_as_openssl_would_load_it(
        pki: TlsFiles, tmp_path: Path) -> None:
    # The CA with a key and some text around it (a bundle): the same certificates as OpenSSL's
    # own reading of the file, TLS 1.2 at least, the host name checked, ALPN where asked.
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(b"the development CA\n" + pki.ca.read_bytes() + pki.key.read_bytes())
    context = client_context(bundle, ALPN)
    assert context.get_ca_certs() == ssl.create_default_context(
        cafile=str(bundle)).get_ca_certs()
    assert len(context.get_ca_certs()) == 1
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert framed_context(pki.ca).get_ca_certs() == context.get_ca_certs()
