"""`python3 bootstrap.py` on a new operator's machine: a typo of its command, --help, a Python
whose venv cannot install pip (Debian's and Ubuntu's without python3-venv), an index pip cannot
reach, Ctrl-C during the install. Before: `upp` printed the usage with no word of what was
wrong, `--help` exited 2; ensurepip's failure was a traceback that left a .venv without pip,
on which every later run failed ("No module named pip"); pip's failure a traceback."""

from __future__ import annotations

import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import bootstrap  # noqa: E402 - the repository's root script, not a package

# What Debian's python3 without python3-venv answers `-m ensurepip` with.
NO_ENSUREPIP = """import sys
print("ensurepip is disabled in Debian/Ubuntu for the system python.", file=sys.stderr)
sys.exit(1)
"""


@pytest.fixture
def scratch_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """bootstrap's .venv moved to tmp_path (the repository's own is never touched)."""
    path = tmp_path / ".venv"
    monkeypatch.setattr(bootstrap, "VENV", path)
    monkeypatch.setattr(bootstrap, "STAMP", path / ".fedhh-installed")
    return path


def test_help_and_a_mistyped_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert bootstrap.main(["--help"]) == 0
    captured = capsys.readouterr()
    assert "python3 bootstrap.py up" in captured.out and captured.err == ""
    assert bootstrap.main(["upp"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[0] == ("bootstrap.py: unknown command 'upp': the commands "
                                            "are up and test")


def test_a_python_without_ensurepip_is_named_and_a_later_run_mends_the_venv(
        scratch_venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    fake = tmp_path / "fake" / "ensurepip"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(NO_ENSUREPIP)
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))  # found before the standard library's

    def installed(*args: object) -> None:
        raise AssertionError("pip ran")  # (would install fedhh into the scratch .venv)

    monkeypatch.setattr(bootstrap, "_pip", installed)
    assert bootstrap.main(["up"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"bootstrap: cannot install pip into .venv: {sys.executable} has no "
                          "working ensurepip; on Debian and Ubuntu install the python3-venv "
                          "package (apt-get install python3-venv), then run this again\n")
    assert "ensurepip is disabled in Debian/Ubuntu" in err  # its own words follow
    assert "Traceback" not in err
    assert bootstrap._venv_python().exists() and not bootstrap._venv_has_pip()
    # python3-venv installed: the next run puts pip into the .venv it finds
    monkeypatch.delenv("PYTHONPATH")
    bootstrap._create_venv()
    assert bootstrap._venv_has_pip()


def test_a_failed_pip_install_is_one_message_and_marks_nothing_installed(
        scratch_venv: Path) -> None:
    venv.EnvBuilder(with_pip=True).create(scratch_venv)
    with pytest.raises(bootstrap.SetupError) as refused:
        bootstrap._pip(bootstrap._venv_python(), "--no-index", "fedhh-no-such-package")
    assert str(refused.value) == (
        "`pip install --no-index fedhh-no-such-package` failed (exit 1; pip's words are above). "
        "fedhh installs from PyPI, or the index pip is configured with (pip config list): "
        "check that it can be reached, then run this again; nothing was marked installed, so "
        "the install is redone")
    assert not bootstrap.STAMP.exists()


def test_ctrl_c_during_the_install_ends_without_a_traceback(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted() -> Path:
        raise KeyboardInterrupt

    monkeypatch.setattr(bootstrap, "_setup", interrupted)
    assert bootstrap.main(["up"]) == 130
    assert capsys.readouterr().err == ("bootstrap: interrupted; run it again to finish the "
                                       "install\n")


@pytest.mark.parametrize("before, after", [
    (None, "ignore:Editable installation"),
    ("error::DeprecationWarning", "error::DeprecationWarning,ignore:Editable installation")])
def test_pip_runs_without_setuptools_editable_installation_box(
        before: str | None, after: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the first `python3 bootstrap.py up` showed setuptools' box ("Editable
    installation. ... Please be careful with folders in your working directory with the same
    name as your package"), information no operator can act on. The operator's own filters
    stay, before the one that drops it (the last matching filter acts)."""
    import subprocess

    if before is None:
        monkeypatch.delenv("PYTHONWARNINGS", raising=False)
    else:
        monkeypatch.setenv("PYTHONWARNINGS", before)
    seen: list[dict[str, str]] = []

    def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
        seen.append(env)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(bootstrap.subprocess, "run", run)
    bootstrap._pip(Path("python"), "-e", ".")
    assert seen[0]["PYTHONWARNINGS"] == after
    assert seen[0]["PATH"] == bootstrap.os.environ["PATH"]


def test_an_old_python_is_told_the_command_that_works(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "fedhh needs Python >= 3.11, this is 3.10.12", and nothing of what to do."""
    monkeypatch.setattr(sys, "version_info", (3, 10, 12, "final", 0))
    monkeypatch.setattr(sys, "version", "3.10.12 (main, Nov 20 2023)")
    monkeypatch.setattr(sys, "executable", "/usr/bin/python3")
    found = {"python3.12": "/usr/bin/python3.12"}
    monkeypatch.setattr(bootstrap.shutil, "which", found.get)
    assert bootstrap.main(["up", "--dashboard", "--dataset", "my users.jsonl"]) == 2
    assert capsys.readouterr().err == (
        "fedhh needs Python >= 3.11, this is 3.10.12 (/usr/bin/python3): run `python3.12 "
        "bootstrap.py up --dashboard --dataset 'my users.jsonl'` (python3.12 is on PATH)\n")
    found.clear()
    assert bootstrap.main(["test"]) == 2
    assert capsys.readouterr().err == (
        "fedhh needs Python >= 3.11, this is 3.10.12 (/usr/bin/python3): install Python 3.11 "
        "or newer (Debian and Ubuntu: apt-get install python3.11 python3.11-venv; else "
        "python.org), then run `python3.11 bootstrap.py test`\n")
