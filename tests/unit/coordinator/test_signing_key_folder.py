"""`fedhh coordinator --signing-key PATH`: a missing key is made in a folder that exists, never
with the folders above it. Before, every missing folder was made, so a typo in one
(`--signing-key /keys/coordnator/signing.pem`) made a new key beside the real one, and the
devices that pinned the real key at enrollment refused every task it signed (the runs then
aborted for too few devices)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc.credentials import load_or_create_signing_key
from fedhh_coordinator.main import check_signing_key


def test_a_key_whose_folder_is_missing_is_refused_naming_the_folder(tmp_path: Path) -> None:
    key = tmp_path / "typo" / "deeper" / "signing.pem"
    with pytest.raises(ConfigError, match=(
            f"^--signing-key {key}: the folder {key.parent} does not exist; the key's file is "
            "made, never a folder \\(a mistyped path would make a new key, whose tasks the "
            "devices that pinned the coordinator's key refuse\\)")):
        check_signing_key(str(key))
    assert list(tmp_path.iterdir()) == []


def test_making_the_key_makes_no_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_or_create_signing_key(tmp_path / "typo" / "signing.pem")
    assert list(tmp_path.iterdir()) == []


def test_a_new_key_in_an_existing_folder_is_made_with_its_public_half(tmp_path: Path) -> None:
    key = tmp_path / "keys" / "signing.pem"
    key.parent.mkdir()
    check_signing_key(str(key))
    load_or_create_signing_key(key)
    assert sorted(p.name for p in key.parent.iterdir()) == ["signing.pem", "signing.pem.pub"]
    check_signing_key(str(key))  # (the key now there reads)
