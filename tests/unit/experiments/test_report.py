"""`fedhh experiments` end to end on a tiny dataset: the report folder holds the markdown,
the PNGs, CSV/JSON of every number and the exact command and configuration of every run."""

from __future__ import annotations

import contextlib
import csv
import functools
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from cli_kit import run_cli

from fedhh.cli.main import main
from fedhh.data import wordlists
from fedhh.experiments.analysis import Ratio, Stat
from fedhh.experiments.verdicts import (
    FAILS,
    HOLDS,
    MIXED,
    STRONGER,
    VERDICTS,
    WEAKER,
    ratio_verdict,
)

PNG = b"\x89PNG\r\n\x1a\n"



@pytest.fixture(scope="module")
def report(tiny_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("report")
    out = base / "out"
    # Every run of the deny-list study reads pyspellchecker's English list afresh for its
    # warm start (7 runs, ~1 s each of decompressing and sorting): here it is read once and
    # each caller given its own copy of the same pairs, so every run computes what it did.
    read = functools.cache(wordlists.spellchecker_counts)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wordlists, "spellchecker_counts", lambda lang: list(read(lang)))
        # Segmentation at two seeds, deny-list at one (~8 s of runs a seed: before, two; the
        # seeds' rows and the report's seeds are read on segmentation's report).
        for study, seeds in (("segmentation", "2"), ("deny-list", "1")):
            code = main(["experiments", study, "--dataset", str(tiny_path), "--out",
                         str(out / study), "--store", str(base / "store"), "--seeds", seeds,
                         "--quiet"])
            assert code == 0
    return out


def test_report_folder_layout(report: Path) -> None:
    root = report / "deny-list"
    readme = (root / "README.md").read_text()
    assert readme.index("## Claims") < readme.index("## 6. Deny lists")
    assert "fedhh experiments deny-list" in readme
    for name in ("claims.csv", "claims.json", "report.json"):
        assert (root / name).is_file()
    folder = root / "deny-list"
    for name in ("summary.csv", "runs.csv", "runs.json", "curves.csv", "claims.json"):
        assert (folder / name).stat().st_size > 0
    pngs = sorted(folder.glob("*.png"))
    assert {p.name for p in pngs} == {"deny-list.png", "found.png"}
    assert all(p.read_bytes()[:8] == PNG for p in pngs)
    for image in ("deny-list/deny-list.png", "deny-list/found.png"):
        assert f"]({image})" in readme


def test_every_run_has_its_command_and_configuration(report: Path) -> None:
    folder = report / "deny-list" / "deny-list"
    with open(folder / "runs.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["configuration"] for r in rows} == {"1 run", "1 run + warm start", "2 runs",
                                                  "warm start list"}
    assert [r["seed"] for r in rows if r["configuration"] == "2 runs"] == ["0"]
    for row in rows:
        if row["configuration"] != "warm start list":
            assert row["command"].startswith("fedhh simulate --dataset ")
            assert row["command"].endswith(f"--seed {row['seed']}")
    runs = json.loads((folder / "runs.json").read_text())
    two = [r for r in runs if r["configuration"] == "2 runs"]
    assert all("--two-runs" in r["argv"] and r["config"]["two_runs"] for r in two)
    assert all(r["privacy"]["charged_rounds"] == 8 for r in two)
    assert all(r["rounds"] and "metrics" in r for r in two)
    meta = json.loads((report / "deny-list" / "report.json").read_text())
    assert meta["seeds"] == [0] and meta["settings"]["eps_agg"] == 1.0
    assert meta["timings"]["runs"] == 4  # 3 simulated configurations x 1 seed + the list
    # Every seed has its rows, its command and its place in report.json (segmentation's two).
    with open(report / "segmentation" / "segmentation" / "runs.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for configuration in ("adaptive", "uniform s=15"):
        seeds = sorted(r["seed"] for r in rows if r["configuration"] == configuration)
        assert seeds == ["0", "1"], configuration
    assert all(r["command"].endswith(f"--seed {r['seed']}") for r in rows)
    meta = json.loads((report / "segmentation" / "report.json").read_text())
    assert meta["seeds"] == [0, 1] and meta["timings"]["runs"] == 4


def test_summary_and_claims_hold_every_number(report: Path) -> None:
    folder = report / "segmentation"
    with open(folder / "segmentation" / "summary.csv", newline="") as handle:
        summary = {r["configuration"]: r for r in csv.DictReader(handle)}
    with open(folder / "segmentation" / "runs.csv", newline="") as handle:
        runs = list(csv.DictReader(handle))
    adaptive = [float(r["true_positives"]) for r in runs if r["configuration"] == "adaptive"]
    assert float(summary["adaptive"]["true_positives_mean"]) == pytest.approx(
        np.mean(adaptive), rel=1e-5)
    claims = json.loads((folder / "claims.json").read_text())
    assert len(claims) == 3 and all(c["verdict"] in VERDICTS for c in claims)
    assert all(c["paper"] and c["ours"] for c in claims)
    with open(folder / "segmentation" / "curves.csv", newline="") as handle:
        curves = list(csv.DictReader(handle))
    assert {c["configuration"] for c in curves} == {"adaptive", "uniform s=15", "TruHist"}


def test_rerun_reuses_the_store(tiny_path: Path, report: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    store = report.parent / "store"
    code, out, _ = run_cli(["experiments", "segmentation", "--dataset", str(tiny_path),
                            "--out", str(tmp_path / "again"), "--store", str(store),
                            "--seeds", "2"], capsys)
    assert code == 0
    assert "4 runs (0 computed, 4 reused)" in out
    code, out, _ = run_cli(["experiments", "segmentation", "--dataset", str(tiny_path),
                            "--store", str(store), "--seeds", "3", "--dry-run"], capsys)
    assert code == 0
    assert "6 runs, 4 stored, 2 to run" in out
    assert "fedhh simulate --dataset" in out


def test_dry_run_counts_an_unreadable_entry_as_to_run(
        tiny_path: Path, report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    store = tmp_path / "store"
    shutil.copytree(report.parent / "store", store)
    for damaged in store.glob("*.npz"):  # both files of every entry there, none readable
        damaged.write_bytes(damaged.read_bytes()[:300])
    code, out, _ = run_cli(["experiments", "segmentation", "--dataset", str(tiny_path),
                            "--store", str(store), "--seeds", "2", "--dry-run"], capsys)
    assert code == 0
    assert "4 runs, 0 stored, 4 to run" in out  # as the run counts: it computes them again
    assert caplog.text.count("ignoring unreadable stored run") == 4  # each named


@pytest.mark.parametrize("argv,needle", [
    (["--seeds", "0"], "--seeds"),
    (["--eps-agg", "-1"], "--eps-agg"),
    (["--delta", "2"], "--delta"),
])
def test_bad_options_fail_in_one_line(argv: list[str], needle: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["experiments", "segmentation", *argv], capsys)
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1


def test_every_study_is_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["experiments", "--help"], capsys)
    assert code == 0
    for name in ("segmentation", "dimension", "fp-ratio", "sampling", "selection",
                 "deny-list", "comparison", "rounds", "all"):
        assert name in out


def test_ratio_verdicts() -> None:
    def ratio(*per_seed: float) -> Ratio:
        return Ratio(np.array(per_seed), float(np.mean(per_seed)))

    assert ratio_verdict(ratio(1.35, 1.45), 1.40) == HOLDS
    assert ratio_verdict(ratio(1.05, 1.10), 1.40) == WEAKER
    assert ratio_verdict(ratio(3.0, 3.2), 1.40) == STRONGER
    assert ratio_verdict(ratio(0.8, 0.9), 1.40) == FAILS
    assert ratio_verdict(ratio(0.9, 1.1), 1.40) == MIXED
    assert ratio_verdict(ratio(0.5, 0.6), greater=False) == HOLDS
    assert ratio_verdict(ratio(1.2, 1.3)) == HOLDS
    assert ratio_verdict(ratio(1.005, 1.01)) == FAILS  # below 2%: no effect
    assert ratio_verdict(Ratio(np.array([]), float("nan"))) == MIXED


def test_stat_uses_the_sample_standard_deviation() -> None:
    s = Stat.of(np.array([1.0, 2.0, 3.0, float("nan")]))
    assert (s.mean, s.sd, s.min, s.max, s.n) == (2.0, 1.0, 1.0, 3.0, 3)
    assert s.fmt() == "2 ± 1"
    assert Stat.of(np.array([5.0])).fmt(1) == "5.0"
    assert Stat.of(np.array([])).fmt() == "-"


def test_the_accounting_study_shows_both_accountants(tiny_path: Path, report: Path,
                                                      tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "accounting"
    # Its two runs accounted with the sums' PLD are runs of the module's studies at seed 0: a
    # copy of the module's store holds them (the same results as computed; 2 of its 4 runs).
    store = tmp_path / "store"
    shutil.copytree(report.parent / "store", store)
    code, _, err = run_cli(["experiments", "accounting", "--dataset", str(tiny_path), "--out",
                            str(out), "--store", str(store), "--seeds", "1", "--quiet"],
                           capsys)
    assert code == 0, err
    claims = json.loads((out / "claims.json").read_text())
    eps = [c for c in claims if c["claim"].startswith("Accounting for the released sums")]
    assert len(eps) == 2
    # 3,000 devices, T = 4, eps_agg 1: the exact accountant of the sums allows more eps_local.
    assert all(c["verdict"] == HOLDS for c in eps), eps


def _segmentation_over(previous: Path, tiny_path: Path, report: Path, tmp_path: Path,
                       capsys: pytest.CaptureFixture[str]) -> tuple[Path, int, str]:
    """`segmentation` (every run stored) written into a copy of the ``previous`` report."""
    out = tmp_path / "out"
    shutil.copytree(previous, out)
    code, _, err = run_cli(["experiments", "segmentation", "--dataset", str(tiny_path),
                            "--out", str(out), "--store", str(report.parent / "store"),
                            "--seeds", "2", "--quiet"], capsys)
    return out, code, err


def test_a_report_over_another_keeps_none_of_the_other_studies(
        tiny_path: Path, report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    # Before, the deny-list folder of the previous report stayed beside the new README (and
    # its numbers, maybe of another dataset, read as the new report's).
    out, code, err = _segmentation_over(report / "deny-list", tiny_path, report, tmp_path,
                                        capsys)
    assert code == 0, err
    assert not (out / "deny-list").exists()
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["segmentation"]
    assert json.loads((out / "report.json").read_text())["studies"] == ["segmentation"]
    assert "Deny lists" not in (out / "README.md").read_text()
    assert {c["study"] for c in json.loads((out / "claims.json").read_text())} \
        == {"segmentation"}
    # A previous study folder holding something else (the user's notes) is left, with a word.
    out2 = tmp_path / "notes"
    shutil.copytree(report / "deny-list", out2)
    (out2 / "deny-list" / "notes.txt").write_text("mine")
    shutil.rmtree(out)
    _, code, err = _segmentation_over(out2, tiny_path, report, tmp_path, capsys)
    assert code == 0, err
    assert (out / "deny-list" / "notes.txt").read_text() == "mine"
    assert "holds files other than the report's: left as it is" in caplog.text


def test_a_report_cut_short_leaves_no_readme_of_the_previous_one(
        tiny_path: Path, report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Before, the previous report's README stayed over the new numbers written so far.
    from fedhh.experiments import report as report_module

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report_module, "draw_summary", broken)
    out, code, _ = _segmentation_over(report / "deny-list", tiny_path, report, tmp_path,
                                      capsys)
    assert code != 0
    assert not (out / "README.md").exists()
    # What it had begun is named, so that the next report removes it with the rest.
    assert json.loads((out / "report.json").read_text())["studies"] == ["segmentation"]


@contextlib.contextmanager
def _size_limited_writes() -> Iterator[Callable[[int | None], None]]:
    """Within, ``cap(n)`` makes a write past n bytes fail with EFBIG, as a full disk would,
    rather than kill the process (SIGXFSZ ignored); ``cap(None)`` lifts it. Both are restored
    on leaving."""
    import resource
    import signal

    limits = resource.getrlimit(resource.RLIMIT_FSIZE)

    def cap(size: int | None) -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE,
                           (limits[0] if size is None else size, limits[1]))

    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        yield cap
    finally:
        cap(None)
        signal.signal(signal.SIGXFSZ, previous)


def test_a_readme_whose_write_is_cut_short_is_not_left_as_a_complete_report(
        tiny_path: Path, report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # README.md marks a complete report. Before, it was written in place, so a write cut
    # short (here the file-size limit, as a full disk would) left part of one under that name.
    from fedhh.experiments import report as report_module

    header = report_module._header
    with _size_limited_writes() as cap:
        def cut_after_half(*args: object) -> str:
            text = header(*args)  # type: ignore[arg-type]
            cap(len(text.encode()) // 2)  # (every other file is written: the README alone)
            return text

        monkeypatch.setattr(report_module, "_header", cut_after_half)
        out, code, _ = _segmentation_over(report / "deny-list", tiny_path, report, tmp_path,
                                          capsys)
    assert code != 0
    assert not (out / "README.md").exists()
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def test_a_figure_whose_write_is_cut_short_leaves_the_previous_png_whole(
        tiny_path: Path, report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Before, savefig wrote over the previous report's PNG in place: a write cut short (here
    # the file-size limit, as a full disk would) left its first 1,000 bytes under the name.
    # (Pillow removes a PNG it created and could not finish, not one it wrote over.)
    from fedhh.experiments import report as report_module

    draw = report_module.draw_figure
    with _size_limited_writes() as cap:
        def cut_short(*args: object) -> object:
            cap(1000)  # (a figure is ~50 kB)
            try:
                return draw(*args)  # type: ignore[arg-type]
            finally:
                cap(None)

        monkeypatch.setattr(report_module, "draw_figure", cut_short)
        out, code, _ = _segmentation_over(report / "segmentation", tiny_path, report,
                                          tmp_path, capsys)
    assert code != 0
    figures = sorted((report / "segmentation" / "segmentation").glob("*.png"))
    assert figures
    for figure in figures:
        assert (out / "segmentation" / figure.name).read_bytes() == figure.read_bytes()
    assert not [p.name for p in (out / "segmentation").iterdir() if p.suffix == ".tmp"]


KILLED_WRITER = """
import contextlib, os, signal, sys
from pathlib import Path
from fedhh.data.dataset import atomic_file
with contextlib.ExitStack() as stack:
    for target in sys.argv[1:]:
        stack.enter_context(atomic_file(Path(target), "w")).write("part of it")
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_report_removes_the_temporaries_a_killed_writer_left(
        tiny_path: Path, report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    # Before, a report writer SIGKILLed mid-write left its temporaries for good, and a study
    # folder holding one was kept, with a warning, when the next report dropped its study.
    import os
    import signal
    import subprocess
    import sys

    previous = tmp_path / "previous"
    shutil.copytree(report / "deny-list", previous)
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITER,
                             str(previous / "README.md"),
                             str(previous / "deny-list" / "runs.csv"),
                             str(previous / "segmentation" / "found.png")], check=False)
    assert killed.returncode == -signal.SIGKILL
    left = sorted(p.relative_to(previous) for p in previous.rglob("*.tmp"))
    assert len(left) == 3
    # A temporary whose writer is alive (this process) is not the report's to remove.
    alive = previous / "segmentation" / f".runs.csv.{os.getpid()}.0123abcd.tmp"
    alive.write_text("being written")
    out, code, err = _segmentation_over(previous, tiny_path, report, tmp_path, capsys)
    assert code == 0, err
    assert not (out / "deny-list").exists()
    assert sorted(p.relative_to(out) for p in out.rglob("*.tmp")) \
        == [alive.relative_to(previous)]
    assert "left as it is" not in caplog.text


def test_two_reports_in_one_folder_are_written_one_after_the_other(
        tiny_path: Path, report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Before, two suites given the same --out wrote at once: one's README over the other's
    # claims and study files. Now the writer holds the folder's lock (flock) throughout.
    import fcntl
    import os

    from fedhh.experiments import report as report_module

    write_study = report_module._write_study
    tried: list[bool] = []

    def probing(root: Path, *args: object) -> str:
        descriptor = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            tried.append(True)  # another writer could have taken it
        except BlockingIOError:
            tried.append(False)
        finally:
            os.close(descriptor)
        return write_study(root, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(report_module, "_write_study", probing)
    _, code, err = _segmentation_over(report / "deny-list", tiny_path, report, tmp_path,
                                      capsys)
    assert code == 0, err
    assert tried == [False]


def test_a_folder_that_holds_no_report_is_not_written_over(
        tiny_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before, `--out .` in a project replaced its README.md (and would its claims.csv or a
    # folder named as a study) with the report's, unasked: now refused before any run.
    out = tmp_path / "project"
    out.mkdir()
    (out / "README.md").write_text("# my project\n")
    (out / "main.py").write_text("print()\n")
    (out / "segmentation").mkdir()  # (a folder named as the study: its files would be mixed in)
    code, _, err = run_cli(["experiments", "segmentation", "--dataset", str(tiny_path),
                            "--out", str(out), "--store", str(tmp_path / "store"),
                            "--seeds", "1", "--quiet"], capsys)
    assert code != 0
    assert f"--out {out} holds README.md, segmentation but no report of fedhh" in err
    assert len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "main.py", "segmentation"]
    assert (out / "README.md").read_text() == "# my project\n"
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").iterdir())


def test_the_report_writer_checks_the_folder_again_under_its_lock(tmp_path: Path) -> None:
    # Another program may write the folder between the command's check and the report.
    from fedhh.errors import ConfigError
    from fedhh.experiments.report import write_report

    (tmp_path / "claims.csv").write_text("theirs\n")
    with pytest.raises(ConfigError, match=r"holds claims\.csv but no report"):
        write_report(tmp_path, [], {"command": "fedhh experiments segmentation"})
    assert (tmp_path / "claims.csv").read_text() == "theirs\n"
    assert [p.name for p in tmp_path.iterdir()] == ["claims.csv"]


def test_a_folder_written_by_another_program_during_the_runs_says_they_are_kept(
        tiny_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The writer's second check (above) refused without a word of the runs: that they are
    # stored and a rerun with another --out only writes the report.
    from fedhh.experiments import report as report_module

    out = tmp_path / "out"
    write = report_module.write_report

    def after_another_program(root: Path, *args: object) -> object:
        Path(root).mkdir(exist_ok=True)
        (Path(root) / "claims.csv").write_text("theirs\n")
        return write(root, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(report_module, "write_report", after_another_program)
    code, _, err = run_cli(["experiments", "segmentation", "--dataset", str(tiny_path),
                            "--out", str(out), "--store", str(tmp_path / "store"),
                            "--seeds", "1", "--quiet"], capsys)
    assert code != 0
    assert f"--out {out} holds claims.csv but no report" in err
    assert f"runs are stored in {tmp_path / 'store'}" in err, err
    assert "only writes the report" in err and len(err.strip().splitlines()) == 1, err
    assert (out / "claims.csv").read_text() == "theirs\n"


def test_a_dry_run_lists_the_runs_whatever_the_folder_holds(
        tiny_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "README.md").write_text("# my project\n")
    code, out, _ = run_cli(["experiments", "segmentation", "--dataset", str(tiny_path),
                            "--out", str(tmp_path), "--store", str(tmp_path / "store"),
                            "--seeds", "1", "--dry-run"], capsys)
    assert code == 0 and "2 to run" in out, out
    assert (tmp_path / "README.md").read_text() == "# my project\n"
