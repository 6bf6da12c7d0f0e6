"""The populations by name: resolve() opens them and absolute() leaves their names as they are,
from one mapping (a name that were only in one of them would be taken for a relative path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fedhh.experiments import populations


def test_a_named_population_is_opened_by_name_and_never_made_a_path(
        tiny_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(populations.NAMED, "new-population", lambda: tiny_path)
    monkeypatch.chdir(tmp_path)
    for name in populations.NAMED:  # a directory of that name here is not the population
        (tmp_path / name).mkdir()
        assert populations.absolute(name) == name
    assert populations.resolve("new-population").root == tiny_path
    (tmp_path / "elsewhere").mkdir()
    assert populations.absolute("elsewhere") == os.path.join(tmp_path, "elsewhere")


def test_a_population_build_stopped_as_its_scratch_folder_is_made_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM, taken as Ctrl-C as the CLI takes it, exactly as the build's scratch folder in
    the cache is made: nothing stays there (before, TemporaryDirectory made it before its
    clean-up was set up, and the signal there left it in the cache)."""
    import signal

    import numpy as np

    from fedhh.data.lexicon import WeightedStrings

    mkdir = os.mkdir

    def mkdir_then_signal(path: str | os.PathLike[str], *args: object, **kwargs: object) -> None:
        mkdir(path, *args, **kwargs)  # type: ignore[arg-type]
        if Path(path).parent == tmp_path:
            monkeypatch.setattr(os, "mkdir", mkdir)  # (once)
            signal.raise_signal(signal.SIGTERM)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    words = WeightedStrings(("a", "b", "c"), np.array([0.5, 0.3, 0.2]))
    monkeypatch.setattr(os, "mkdir", mkdir_then_signal)
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            populations._built(tmp_path / "p", lambda: words, 20, 3.0, 0, "p", "test")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert list(tmp_path.iterdir()) == []
