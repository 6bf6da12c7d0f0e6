"""Fixtures shared by the command-line tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from _admin_recorder import Recorder

from fedhh.rpc import admin_client


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The admin client replaced by a ``Recorder``; returns an admin token file."""
    Recorder.calls = []
    Recorder.enrolled = 1_000_000
    monkeypatch.setattr(admin_client, "AdminClient", Recorder)
    token = tmp_path / "admin.token"
    token.write_text("0123456789abcdef0123\n")
    return token


@pytest.fixture
def users(tmp_path: Path) -> Path:
    """300 users over a few words: a dataset that simulates in a second."""
    words = ["apple", "banana", "cherry", "damson", "elder"]
    path = tmp_path / "users.txt"
    path.write_text("".join(f"{words[u % 5]} {words[(u * 3) % 5]}\n" for u in range(300)))
    return path
