"""The coordinator refuses an admin token that is its control token (probe 37).

Before, one file given as both --control-token-file and --admin-token-file (or the same value
in $FEDHH_CONTROL_TOKEN and $FEDHH_ADMIN_TOKEN) was taken: the aggregator and every
aggregation worker hold the control token and are not trusted for privacy
(docs/threat-model.md), yet with it they could start and cancel runs and mint enrollment tokens
(enrolling identities of their own). Now the coordinator does not start, saying which token and
why, before it writes its store or signing key. A real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXIT_BOUND_S = 120
TOKEN = "one-token-for-everything-0123456789abcdef"


def coordinator(tmp_path: Path, env: dict[str, str], *tokens: str
                ) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("FEDHH_CONTROL_TOKEN", "FEDHH_ADMIN_TOKEN", "FEDHH_SELECTOR_TOKEN")}
    return subprocess.run(
        [sys.executable, "-m", "fedhh.cli.main", "coordinator", "--listen", "127.0.0.1:0",
         "--insecure", "--db", str(tmp_path / "store.sqlite"),
         "--signing-key", str(tmp_path / "signing.pem"), "--aggregator", "127.0.0.1:1",
         *tokens], capture_output=True, text=True, timeout=EXIT_BOUND_S, env={**base, **env})


def refusal(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    return done.stderr.strip().splitlines()[-1]


def test_one_file_for_the_control_and_admin_tokens_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "shared.token"
    token.write_text(TOKEN + "\n")
    done = coordinator(tmp_path, {}, "--control-token-file", str(token),
                       "--admin-token-file", str(token))
    assert refusal(done) == (
        f"fedhh coordinator: error: the admin token (from {token}) is the control token: give "
        "operators a token of their own (`fedhh certs --secrets DIR` writes admin.token); the "
        "aggregation workers hold the control token and must not be able to start runs or "
        "mint enrollment tokens")
    assert TOKEN not in done.stderr
    assert not (tmp_path / "store.sqlite").exists() and not (tmp_path / "signing.pem").exists()


def test_the_same_value_in_both_variables_is_refused(tmp_path: Path) -> None:
    done = coordinator(tmp_path, {"FEDHH_CONTROL_TOKEN": TOKEN, "FEDHH_ADMIN_TOKEN": TOKEN})
    assert "the admin token (from $FEDHH_ADMIN_TOKEN) is the control token" in refusal(done)
    assert TOKEN not in done.stderr
