"""`fedhh simulate` as a new user meets it (issue 13, "the first hour"): every long step shows
its progress on a terminal and nothing elsewhere, and a dataset with nothing to discover is one
specific line, not a traceback."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_kit import run_cli

from fedhh.data import progress as progress_module
from fedhh.data.dataset import from_user_counts
from fedhh.device import Selection, SelectionRule
from fedhh.errors import DatasetError
from fedhh.simulation.population import Population


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def users_file(tmp_path: Path) -> Path:
    """3,000 users; two long items share their first 60 bits (one code, recounted)."""
    rng = np.random.default_rng(0)
    words = ["apple", "banana", "cherry", "averyveryverylongwordnumberone",
             "averyveryverylongwordnumbertwo"]
    lines = [" ".join(rng.choice(words, size=2, p=[0.4, 0.3, 0.1, 0.1, 0.1]))
             for _ in range(3000)]
    path = tmp_path / "users.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


# Without completion rounds: two items then share one truncated 60-bit code (recounted). The
# explicit eps_local spends at most 4 x 8 (basic composition), within the --eps-agg target.
SIMULATE = ["simulate", "--eps-local", "8", "--eps-agg", "32", "--rounds", "4",
            "--dim-limit", "1e6", "--max-bits", "60", "--seed", "1", "--completion-rounds", "0"]


def _unwarned(text: str) -> str:
    """``text`` less the warning that the two long words are past the 60-bit codes, which
    every run of SIMULATE gives (test_run_items_past_the_codes.py)."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if "longer than this run's codes" not in line)


def test_every_long_step_shows_progress_on_a_terminal(
        users_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    code, stdout, _ = run_cli([*SIMULATE, "--dataset", str(users_file)], capsys)
    assert code == 0 and "heavy hitters discovered" in stdout
    shown = screen.getvalue()
    for step in (r"reading users\.txt: 100%", r"users: writing: 100%", r"checking users: 100%",
                 r"ground truth of users: 100%", r"encoding users's items: 100%",
                 r"ground truth of users's codes: 100%", r"rounds: 100%.* 4/4 \[",
                 r"counting users's words: 100%"):
        assert re.search(step, shown), step


@pytest.mark.parametrize("quiet", [True, False])
def test_no_progress_off_a_terminal_or_with_quiet(
        quiet: bool, users_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    screen = Terminal() if quiet else io.StringIO()
    monkeypatch.setattr(sys, "stderr", screen)
    code, stdout, _ = run_cli(SIMULATE + ["--dataset", str(users_file)]
                          + (["--quiet"] if quiet else []), capsys)
    assert code == 0 and ("heavy hitters discovered" in stdout) != quiet
    assert _unwarned(screen.getvalue()) == ""


@pytest.mark.parametrize("content,needle", [
    ("\n\n\n\n", "nothing (imported from text file {path}): none of its 4 users holds an item"),
    ("  \n\t\n", "nothing (imported from text file {path}): none of its 2 users holds an item"),
    ("", "nothing (imported from text file {path}): none of its 0 users holds an item"),
    ("hello world\n", "the dataset has 1 user(s): the aggregate guarantee needs at least 2"),
])
def test_a_dataset_with_nothing_to_discover_is_one_line(
        content: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "nothing.txt"
    path.write_text(content)
    code, stdout, stderr = run_cli(["simulate", "--dataset", str(path)], capsys)
    assert code == 2 and stdout == ""
    assert stderr.count("\n") == 1, stderr
    assert needle.format(path=path) in stderr
    if "holds an item" in needle:  # refused before anything is written to the cache
        assert not any(p.name.startswith("nothing-") for p in (tmp_path / "cache").rglob("*"))


def test_users_without_items_select_nothing() -> None:
    """The population's selection over users who hold nothing (an empty vocabulary) is 'no
    report' for each, not an IndexError."""
    from fedhh.codec import Codec
    from fedhh.codec import codes as cw
    from fedhh.server import RoundQuery

    population = Population.build(from_user_counts([{}, {}, {}]), Codec.from_spec("english", 60))
    query = RoundQuery(round=1, prefix_bits=0, prefixes=cw.from_ints([0], 0), segment_bits=4,
                       deny=cw.empty(60), max_bits=60)
    picked = population.selected_domain_indices(
        query, Selection(SelectionRule.WEIGHTED, prefix_conditioning=True),
        np.random.SeedSequence(0))
    assert picked.tolist() == [-1, -1, -1]


def test_the_library_refuses_a_dataset_without_items() -> None:
    from fedhh.config import RunConfig
    from fedhh.simulation.runner import simulate

    with pytest.raises(DatasetError, match="none of its 3 users holds an item"):
        simulate(from_user_counts([{}, {}, {}], name="blank"), RunConfig(eps_local=4.0))


@pytest.mark.parametrize("codec,bits", [("english", 60), ("bytes", 256)])
def test_the_vocabulary_encoded_in_blocks_is_encoded_as_a_whole(
        codec: str, bits: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from fedhh.codec import Codec
    from fedhh.simulation import population as population_module

    items = [f"w{i}" + "x" * (i % 40) for i in range(50)]
    dataset = from_user_counts([{item: 1 for item in items}])
    monkeypatch.setattr(population_module, "ENCODE_ITEMS", 7)
    built = Population.build(dataset, Codec.from_spec(codec, bits)).item_codes
    whole = Codec.from_spec(codec, bits).encode_many(list(dataset.vocabulary)).codes
    assert built.dtype == whole.dtype and built.tolist() == whole.tolist()


def test_an_explicit_eps_local_above_the_target_is_run_with_a_warning(
        users_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An explicit --eps-local that spends more than --eps-agg is run (experiments set
    eps_local themselves) and reports what it spends, as before, but now says so on stderr,
    --quiet or not: it was silent, where a coordinator refuses such a run."""
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    argv = [*SIMULATE[:3], "--eps-agg", "1", *SIMULATE[5:], "--dataset", str(users_file),
            "--quiet", "--json", str(tmp_path / "r.json")]
    code, stdout, stderr = run_cli(argv, capsys)
    assert code == 0 and stdout == ""
    privacy = json.loads((tmp_path / "r.json").read_text())["privacy"]
    assert privacy["eps_agg"] > privacy["eps_agg_target"] == 1
    assert _unwarned(stderr) == (f"fedhh simulate: warning: --eps-local 8 spends eps_agg "
                      f"{privacy['eps_agg']:.4g} over the run, above the --eps-agg target 1 "
                      "(a coordinator would refuse it); the figures are for the eps_agg "
                      "spent\n")
