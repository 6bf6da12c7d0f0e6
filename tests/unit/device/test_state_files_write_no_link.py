"""A device process's state files (its privacy budgets, its enrolled identities, its stats
file) and a service's ready file are written through a temporary file made new
(``output_paths.open_new``): a symbolic link left at the temporary's name is not followed.
Before, whatever file it named was written over, and the renamed link made the state's own
path name that file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from fedhh.rpc.observability import write_ready
from fedhh_device.budget import DeviceBudget
from fedhh_device.fleet import Fleet
from fedhh_device.main import write_stats


def budgets(path: Path) -> None:
    DeviceBudget.load(path, 4.0, 86_400.0)._save()


def identities(path: Path) -> None:
    Fleet._save_state(SimpleNamespace(state_file=path, _identities={}))  # type: ignore[arg-type]


def stats(path: Path) -> None:
    write_stats(path, 1, SimpleNamespace(
        tasks=1, completed=1, dropped=0, late=0, failed=0, report_seconds=0.0,
        outcome_seconds=0.0, calls=SimpleNamespace(seconds=0.0, bytes_sent=0)))


def ready(path: Path) -> None:
    write_ready(path, {"ready": True})


@pytest.mark.parametrize(("write", "name", "temporary"), [
    (budgets, "budget.json", ".budget.json.tmp"),
    (identities, "devices.json", "devices.tmp"),
    (stats, "stats.json", "stats.json.tmp"),
    (ready, "x.ready", "x.ready.tmp"),
])
def test_a_link_at_the_temporary_name_is_not_followed(
        tmp_path: Path, write: Callable[[Path], None], name: str, temporary: str) -> None:
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("precious\n")
    (tmp_path / temporary).symlink_to(victim)
    write(tmp_path / name)
    assert victim.read_text() == "precious\n"
    written = tmp_path / name
    assert not written.is_symlink() and written.read_text().startswith("{")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, "elsewhere.txt"])
