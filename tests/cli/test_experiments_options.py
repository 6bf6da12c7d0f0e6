"""`fedhh experiments --worker-memory` without --workers is refused, not ignored.

Before: `fedhh experiments all --worker-memory 8` ran every run one after the other in this
process, and `--scheduler ADDRESS --worker-memory 8` sent them to workers with whatever limit
they were started with; the option set nothing either way and nothing said so.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_kit import one_line_error


def _argv(tmp_path: Path, *extra: str) -> list[str]:
    return ["experiments", "segmentation", "--dataset", "shakespeare", "--seeds", "1",
            "--store", str(tmp_path / "store"), "--out", str(tmp_path / "report"), *extra]


@pytest.mark.parametrize("extra, where", [
    ((), "without --workers the runs go one after the other in this process"),
    (("--scheduler", "tcp://127.0.0.1:1"),
     "a scheduler's workers have the limit they were started with (`dask worker ADDRESS "
     "--nthreads 1 --memory-limit 4GiB`)"),
])
def test_worker_memory_without_workers_is_refused_before_any_work(
        tmp_path: Path, extra: tuple[str, ...], where: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(_argv(tmp_path, "--worker-memory", "8", *extra), capsys)
    assert line == ("fedhh experiments segmentation: error: --worker-memory sets the memory of "
                    "--workers' "
                    f"LocalCluster workers; {where}: drop it, or add --workers")
    assert not (tmp_path / "store").exists() and not (tmp_path / "report").exists()


def test_worker_memory_with_workers_still_applies(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # Past what the machine holds, the memory it was given is the one refused: it was read.
    line = one_line_error(_argv(tmp_path, "--workers", "2", "--worker-memory", "100000"), capsys)
    assert line.startswith("fedhh experiments segmentation: error: --workers 2 needs 2 x 100000 "
                           "GiB")


def test_the_default_worker_memory_is_unchanged(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(_argv(tmp_path, "--workers", "100000"), capsys)
    assert line.startswith("fedhh experiments segmentation: error: --workers 100000 needs 100000 "
                           "x 4 GiB")
