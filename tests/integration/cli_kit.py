"""Running the ``fedhh`` CLI in-process from a test, with what it printed."""

from __future__ import annotations

import pytest

from fedhh.cli.main import main


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``fedhh argv``'s exit code, stdout and stderr (an argparse exit included)."""
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The single line a refused command prints (exit code 2, no traceback)."""
    code, _, err = run_cli(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err[-2000:])
    return lines[0]
