"""A TLS file this process may not read: the error names this process's uid and gid, the
file's owner and mode, and the remedy (`fedhh certs --owner UID:GID` or `--group GID`)
(outside probe, thirty-sixth stop). Before, a container's service, given certificates made
without --owner/--group, said only "cannot read TLS file /run/secrets/server.key: Permission
denied"."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc import tls
from fedhh.rpc.tls import TlsFiles, make_dev_pki, read_tls_file


def check_remedy(text: str, path: Path) -> None:
    assert str(path) in text and "Permission denied" in text
    assert f"uid {os.geteuid()}" in text and f"gid {os.getegid()}" in text
    info = path.stat()
    assert f"owned by uid {info.st_uid}, gid {info.st_gid}, mode 0000" in text
    assert f"--owner {os.geteuid()}:{os.getegid()}" in text and f"--group {os.getegid()}" in text


def unreadable_key(tmp_path: Path) -> TlsFiles:
    make_dev_pki(tmp_path, ["localhost"])
    files = TlsFiles.from_dir(tmp_path)
    files.key.chmod(0)
    return files


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-0000 file")
def test_an_unreadable_key_names_owner_mode_and_remedy(tmp_path: Path) -> None:
    files = unreadable_key(tmp_path)
    with pytest.raises(ConfigError) as caught:
        read_tls_file(files.key)
    check_remedy(str(caught.value), files.key)
    with pytest.raises(ConfigError) as caught:  # the HTTPS listeners' way in
        files.server_context("the dashboard")
    check_remedy(str(caught.value), files.key)


def test_the_remedy_as_a_container_service_sees_it(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """(root reads a mode-0000 file: the denial is made here, as a uid-10001 service sees it)"""
    files = unreadable_key(tmp_path)
    real = tls.read_whole

    def denied(path: object, *args: object) -> bytes:
        if Path(str(path)) == files.key:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(tls, "read_whole", denied)
    with pytest.raises(ConfigError) as caught:
        read_tls_file(files.key)
    check_remedy(str(caught.value), files.key)
    with pytest.raises(ConfigError) as caught:
        files.server_context("the dashboard")
    check_remedy(str(caught.value), files.key)
    read_tls_file(files.cert)  # the readable files still read


def test_a_missing_file_gets_no_permission_remedy(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        read_tls_file(tmp_path / "absent.key")
    assert "No such file" in str(caught.value) and "--owner" not in str(caught.value)
