"""The deployment test's wheelhouse: deploy/wheels.sh fills one kept outside the checkout
(FEDHH_DEPLOY_CACHE), and a checkout's deploy/wheelhouse gets its wheels by link, so a fresh
clone does not resolve and copy every wheel again. The wheels.sh here is a stand-in that counts
its fills; no engine, no network."""

from __future__ import annotations

from pathlib import Path

import pytest
from dockerkit import wheelhouse

# Writes two wheels and the key into DIR ($1) unless DIR/.key is already $KEY, as wheels.sh does
# (a changed key refills DIR from scratch); each fill appends a line to $FILLS.
STAND_IN = """#!/bin/sh
set -eu
out=$1
if [ -f "$out/.key" ] && [ "$(cat "$out/.key")" = "$KEY" ]; then exit 0; fi
mkdir -p "$out"
rm -f "$out"/*.whl "$out/.key"
echo "a $KEY" > "$out/a-1.0-py3-none-any.whl"
echo "b $KEY" > "$out/b-$KEY-py3-none-any.whl"
echo "$KEY" > "$out/.key"
echo fill >> "$FILLS"
"""


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FEDHH_DEPLOY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FILLS", str(tmp_path / "fills"))
    monkeypatch.setenv("KEY", "k1")
    path = tmp_path / "wheels.sh"
    path.write_text(STAND_IN)
    path.chmod(0o755)
    return path


def fills(tmp_path: Path) -> int:
    path = tmp_path / "fills"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_fresh_checkout_links_the_cached_wheels(script: Path, tmp_path: Path) -> None:
    first = wheelhouse(script, tmp_path / "clone-a" / "wheelhouse")
    second = wheelhouse(script, tmp_path / "clone-b" / "wheelhouse")
    assert fills(tmp_path) == 1  # the second checkout's wheels were not fetched again
    names = sorted(p.name for p in first.iterdir())
    assert names == [".key", "a-1.0-py3-none-any.whl", "b-k1-py3-none-any.whl"]
    assert sorted(p.name for p in second.iterdir()) == names
    for name in names:
        assert (second / name).read_bytes() == (first / name).read_bytes()
    cached = tmp_path / "cache" / "wheelhouse" / "a-1.0-py3-none-any.whl"
    assert (second / "a-1.0-py3-none-any.whl").stat().st_ino == cached.stat().st_ino


def test_a_changed_key_replaces_the_checkouts_wheels(script: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    target = wheelhouse(script, tmp_path / "clone" / "wheelhouse")
    monkeypatch.setenv("KEY", "k2")
    assert wheelhouse(script, target) == target
    assert fills(tmp_path) == 2
    assert sorted(p.name for p in target.iterdir()) == [
        ".key", "a-1.0-py3-none-any.whl", "b-k2-py3-none-any.whl"]  # b-k1 is gone
    assert (target / ".key").read_text() == "k2\n"
    assert (target / "a-1.0-py3-none-any.whl").read_text() == "a k2\n"


def test_a_checkout_missing_a_wheel_gets_it_again(script: Path, tmp_path: Path) -> None:
    target = wheelhouse(script, tmp_path / "clone" / "wheelhouse")
    (target / "a-1.0-py3-none-any.whl").unlink()
    wheelhouse(script, target)
    assert fills(tmp_path) == 1
    assert (target / "a-1.0-py3-none-any.whl").read_text() == "a k1\n"
