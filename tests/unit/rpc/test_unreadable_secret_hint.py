"""A token or key file this process may not read: the error names the remedy (`fedhh certs
--owner/--group`, or the file's mode/owner) and this process's uid, as for a TLS file (one
``permission_remedy`` for both). Before: only "Permission
denied", and the compose services restarted for ever with no clue."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc.credentials import load_signing_key, read_secret


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-0000 file")
def test_an_unreadable_token_file_names_the_remedy(tmp_path: Path) -> None:
    token = tmp_path / "control.token"
    token.write_text("x" * 32)
    token.chmod(0)
    with pytest.raises(ConfigError) as caught:
        read_secret(token, "FEDHH_UNUSED_TOKEN_ENV", "control token")
    text = str(caught.value)
    assert "Permission denied" in text and "mode 0000" in text
    assert f"--owner {os.geteuid()}:{os.getegid()}" in text and f"--group {os.getegid()}" in text
    assert f"uid {os.geteuid()}" in text
    with pytest.raises(ConfigError, match="fedhh certs"):
        load_signing_key(token)


def test_a_missing_file_gets_no_permission_hint(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        read_secret(tmp_path / "absent", "FEDHH_UNUSED_TOKEN_ENV", "control token")
    assert "--owner" not in str(caught.value)


def test_a_permission_error_names_the_remedy_even_as_root(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """(root reads a mode-0000 file: the denial is made here, as a uid-10001 service sees it)"""
    import errno

    import fedhh.rpc.credentials as credentials

    def denied(path: object, *_: object) -> bytes:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    monkeypatch.setattr(credentials, "read_whole", denied)
    with pytest.raises(ConfigError) as caught:
        read_secret(tmp_path / "control.token", "FEDHH_UNUSED_TOKEN_ENV", "control token")
    text = str(caught.value)
    assert f"--owner {os.geteuid()}:{os.getegid()}" in text and f"--group {os.getegid()}" in text
