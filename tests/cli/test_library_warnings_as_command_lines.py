"""A library's warning under a command reads as the command's own warnings do ('fedhh data
import: warning: ...'), not in the log's form; --verbose keeps the log's form (time, level,
logger), which its debugging lines share. Run in a process of its own: under pytest the root
logger already has handlers, and the CLI's is never installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROGRAM = "import sys\nfrom fedhh.cli.main import main\nsys.exit(main(sys.argv[1:]))"


def _import(tmp_path: Path, *options: str) -> str:
    data = tmp_path / "users.txt"
    data.write_bytes(b"a\x0bb c\nd e\n")  # a vertical tab: the text reader warns of it
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", PROGRAM, *options, "data", "import",
                           str(data), "--out", str(out)], capture_output=True, text=True,
                          env={**os.environ, "FEDHH_CACHE": str(tmp_path / "cache")},
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_a_library_warning_is_the_commands_line(tmp_path: Path) -> None:
    lines = _import(tmp_path).splitlines()
    assert lines[0].startswith("fedhh data import: warning: users.txt: 1 line holds "
                               "whitespace other than the space and the tab (U+000B control)")


def test_verbose_keeps_the_logs_form(tmp_path: Path) -> None:
    assert " WARNING fedhh.data.text: users.txt: 1 line holds whitespace" in _import(tmp_path,
                                                                                     "-v")
