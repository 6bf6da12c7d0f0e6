"""The output-path checks shared by the command line and the services (``fedhh.output_paths``):
each refusal is one ConfigError naming the option, and a check writes nothing that stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh.output_paths import check_store_file


def test_a_store_file_that_can_be_made_or_opened_passes(tmp_path: Path) -> None:
    check_store_file("--db", tmp_path / "new" / "deeper" / "store.sqlite")
    existing = tmp_path / "store.sqlite"
    existing.write_bytes(b"kept")
    check_store_file("--db", existing)
    assert existing.read_bytes() == b"kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.sqlite"]


def test_a_store_file_in_place_of_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ConfigError, match=r"^--db .*afile exists and is not a folder$"):
        check_store_file("--db", tmp_path / "afile" / "store.sqlite")


def test_a_store_file_that_is_not_a_regular_file_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^--db /dev/null exists and is not a regular file$"):
        check_store_file("--db", "/dev/null")


@pytest.mark.skipif(not Path("/proc/version").is_file(), reason="needs Linux /proc")
def test_a_store_file_in_a_folder_that_takes_no_file_is_refused_even_as_root() -> None:
    """os.access said yes to /proc for root; making a file there is what the store will do."""
    with pytest.raises(ConfigError, match=r"^--db /proc: cannot write in /proc: "):
        check_store_file("--db", "/proc/fedhh.sqlite")
