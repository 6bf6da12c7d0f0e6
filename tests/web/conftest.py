"""Fixtures of the web device's tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def demo_dist(tmp_path: Path) -> Path:
    """A dist folder with a stand-in for the demo page's bundle, all that DemoPage needs of it."""
    (tmp_path / "browser").mkdir()
    (tmp_path / "browser" / "demo.js").write_text("// the bundle")
    return tmp_path
