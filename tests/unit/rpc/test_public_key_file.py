"""The coordinator's public key file (`fedhh aggregator --coordinator-key`, the selector's and
the combiner's): given the private signing key instead, the error says so and names the .pub.
Before: "secrets/coordinator-signing.pem is not a PEM public key: Valid PEM but no BEGIN PUBLIC
KEY/END PUBLIC KEY delimiters. Are you sure this is a public key?"."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.errors import ConfigError
from fedhh.rpc.credentials import load_public_key, load_signing_key


def test_the_private_signing_key_is_named_and_the_public_one_asked_for(tmp_path: Path
                                                                      ) -> None:
    key = Ed25519PrivateKey.generate()
    private = tmp_path / "coordinator-signing.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    with pytest.raises(ConfigError) as refused:
        load_public_key(private)
    assert str(refused.value) == (
        f"--coordinator-key: {private} holds a private key, where the coordinator's public key "
        f"is wanted: give {private}.pub (`fedhh certs` writes it beside the signing key), and "
        "keep the private key with the coordinator alone")
    public = tmp_path / "coordinator-signing.pem.pub"
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    assert load_public_key(public) == key.public_key().public_bytes_raw()
    other = tmp_path / "ca.pem"
    other.write_text("not a key\n")
    with pytest.raises(ConfigError, match="is not a PEM public key"):
        load_public_key(other)


def test_the_public_key_given_for_the_signing_key_is_named(tmp_path: Path) -> None:
    """The reverse mistake (`fedhh coordinator --signing-key coordinator-signing.pem.pub`).
    Before: "... is not an unencrypted PEM private key", which did not say which file was
    wanted."""
    key = Ed25519PrivateKey.generate()
    public = tmp_path / "coordinator-signing.pem.pub"
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(ConfigError) as refused:
        load_signing_key(public, f"--signing-key {public}")
    assert str(refused.value) == (
        f"--signing-key {public} holds a public key, where the coordinator's private signing "
        "key is wanted: give coordinator-signing.pem, the file beside it (its .pub is what the "
        "aggregator, combiner and selectors take)")
    other = tmp_path / "garbage.pem"
    other.write_text("not a key\n")
    with pytest.raises(ConfigError, match=r"garbage\.pem is not an unencrypted PEM private key$"):
        load_signing_key(other)
