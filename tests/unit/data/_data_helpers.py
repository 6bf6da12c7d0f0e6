"""Shared helpers for the dataset tests: tiny datasets, file fingerprints, refused imports,
SIGTERM on cue."""

from __future__ import annotations

import hashlib
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fedhh.data.dataset import FederatedDataset
from fedhh.errors import DatasetError

TINY_USERS: list[dict[str, int]] = [
    {"the": 3, "cat": 1, "sat": 1},
    {},
    {"the": 1, "dog": 2},
    {"zebra": 70000},
    {"cat": 4},
]


def fingerprint(root: Path) -> dict[str, str]:
    """Hash of every file under ``root`` (to assert that nothing changed)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def import_refused(importer: Callable[..., Path], source: Path, text: str,
                   **options: Any) -> str:
    """The message of the DatasetError ``importer`` (import_jsonl, import_text, ...) raises for
    ``source`` holding ``text``, having written no dataset (its target, ``ds`` beside it)."""
    source.write_text(text, encoding="utf-8")
    target = source.parent / "ds"
    with pytest.raises(DatasetError) as caught:
        importer(source, target, **options)
    assert not target.exists()
    return str(caught.value)


def as_dicts(ds: FederatedDataset) -> list[dict[str, int]]:
    """Every user's {item: count}."""
    out = []
    for u in range(ds.num_users):
        items, counts = ds.user_items(u)
        out.append({ds.vocabulary[i]: int(c) for i, c in zip(items, counts, strict=True)})
    return out


class SigtermAsCtrlC:
    """SIGTERM raising KeyboardInterrupt, as the CLI takes it (`fedhh.cli.main`), for a block;
    ``send`` delivers one at once (its handler runs in the call)."""

    def __enter__(self) -> SigtermAsCtrlC:
        self.previous = signal.signal(signal.SIGTERM, self._interrupt)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGTERM, self.previous)

    @staticmethod
    def _interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    @staticmethod
    def send() -> None:
        signal.raise_signal(signal.SIGTERM)


def signal_after(call: Callable[..., Any], cue: Callable[..., bool]) -> Callable[..., Any]:
    """``call`` (such as os.mkdir or os.replace), then SIGTERM (`SigtermAsCtrlC.send`) the
    first time ``cue`` holds for the same arguments: the signal arrives exactly as that call
    returns."""
    sent: list[bool] = []

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = call(*args, **kwargs)
        if not sent and cue(*args, **kwargs):
            sent.append(True)
            SigtermAsCtrlC.send()
        return result

    return wrapped


def named(prefix: str) -> Callable[..., bool]:
    """A cue: the call's first argument is a path whose name starts with ``prefix``."""
    return lambda path, *rest, **kw: os.path.basename(os.fsdecode(path)).startswith(prefix)
