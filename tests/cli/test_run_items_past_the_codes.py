"""`fedhh simulate` and `fedhh up` say, before the run's first round, which of the dataset's
items are longer than that run's codes (828 bits at simulate's defaults, 576 networked, fewer
where the budget drops completion rounds: far below the codebook's 4,096), which the run can
find only cut. Before, a user learned it from the output ("the codes' limit"), their privacy
budget spent."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cli_kit import run_cli

import fedhh.cli.simulate as simulate_cli
from fedhh.codec import Codec
from fedhh.config import Mode, RunConfig, with_most_completions
from fedhh.data.dataset import from_user_counts
from fedhh.data.long_items import past_the_codes
from fedhh.rpc import topology

URL = "https://example.com/" + "/".join(f"section{i}" for i in range(12))  # (~500 bits)
ADDRESS = "someone." + "x" * 60 + "@example.org"


def _write(tmp_path: Path, users: list[list[str]]) -> Path:
    path = tmp_path / "users.jsonl"
    path.write_text("".join(json.dumps(user) + "\n" for user in users), encoding="utf-8")
    return path


def _users(count: int) -> list[list[str]]:
    """``count`` users, a fifth holding URL and a tenth ADDRESS, every one a short word."""
    return [[f"w{u % 7}", *([URL] if u % 5 == 0 else []), *([ADDRESS] if u % 10 == 1 else [])]
            for u in range(count)]


def test_the_count_is_of_the_items_past_the_codes_and_their_holders() -> None:
    codec = Codec("unicode", 120)
    longest = max(range(1, 200), key=lambda k: k if not codec.encode_many(
        ["a" * k]).truncated[0] else 0)
    fits, past = "a" * longest, "a" * (longest + 1)
    unheld = "b" * 300
    dataset = from_user_counts([{past: 1, "x": 1}, {past: 1, fits: 1}, {fits: 1}, {"x": 1},
                                {past: 1, URL: 1}, {unheld: 1}])
    found = past_the_codes(dataset, codec, 5, users=5)  # (unheld's user is not among them)
    assert found["codec"] == "unicode" and found["bits"] == 120
    assert found["items"] == 2 and found["users"] == pytest.approx(3 / 5)
    assert [(row["item"], row["unweighted"]) for row in found["heaviest"]] == [
        (past, pytest.approx(3 / 5)), (URL, pytest.approx(1 / 5))]
    widest = Codec("unicode", 4096).encode_many([past, URL]).lengths.tolist()
    assert [row["needs_bits"] for row in found["heaviest"]] == widest
    assert past_the_codes(dataset, codec, 5)["items"] == 3  # (every user: unheld's too)
    # (a deny-list item cut alike denies it: never output, so not counted)
    denied = past_the_codes(dataset, codec, 5, users=5, deny=(past + "z", "x"))
    assert denied["items"] == 1 and denied["users"] == pytest.approx(1 / 5)
    assert [row["item"] for row in denied["heaviest"]] == [URL]


def test_simulate_warns_before_its_rounds_and_lists_them_in_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    data = _write(tmp_path, _users(400))
    said: list[str] = []
    real = simulate_cli.simulate

    def recording(*args: Any, **kwargs: Any) -> Any:
        said.append(capsys.readouterr().err)  # (what stderr held as the run began)
        return real(*args, **kwargs)

    monkeypatch.setattr(simulate_cli, "simulate", recording)
    out = tmp_path / "out.json"
    argv = ["simulate", "--dataset", str(data), "--dim-limit", "4096", "--rounds", "5",
            "--top", "0", "--json", str(out)]
    code, _, _ = run_cli(argv, capsys)
    assert code == 0
    # The run's own codes: 12 bits a round, 5 main rounds and the completion rounds 400 users
    # can budget (not the 32 asked).
    planned = simulate_cli.prepare(RunConfig(dim_limit=4096, rounds=5), 400).config
    bits = planned.code_bits(Mode.SIMULATION)
    assert planned.completion() < 32 and bits < 576
    warning = next(line for line in said[0].splitlines() if "longer than" in line)
    assert warning.startswith(
        f"fedhh simulate: warning: 2 items held by 30.0% of the users are longer than this "
        f"run's codes ({bits:,} bits): the run can find them only cut, as the prefix of every "
        "item starting so; the most held: https://example.com/section0/section1/s… (20.0% of "
        "the users, ")
    assert (f"Only {planned.completion()} of the 32 completion rounds asked fit the privacy "
            "budget here: more devices or a larger --eps-agg fits more (each adds 12 bits)"
            ) in warning
    past = json.loads(out.read_text(encoding="utf-8"))["past_the_codes"]
    assert (past["bits"], past["items"], past["users"]) == (bits, 2, pytest.approx(0.3))
    assert [row["item"] for row in past["heaviest"]] == [URL, ADDRESS]
    # (and the run did cut them: neither is found whole)
    hitters = json.loads(out.read_text(encoding="utf-8"))["heavy_hitters"]
    assert not {URL, ADDRESS} & {h["item"] for h in hitters if not h["truncated"]}


def test_simulate_says_nothing_when_every_item_fits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    data = _write(tmp_path, [[f"w{u % 7}", "short"] for u in range(300)])
    code, out, err = run_cli(["simulate", "--dataset", str(data), "--dim-limit", "4096",
                              "--rounds", "5", "--top", "0", "--json", "-"], capsys)
    assert code == 0 and "longer than" not in err
    assert json.loads(out)["past_the_codes"]["items"] == 0


def test_the_reach_names_the_options_and_their_cost() -> None:
    named = [{"needs_bits": 984}, {"needs_bits": None}]
    run = RunConfig()  # (828 bits: 23 a round over 4 + 32 rounds)
    eps = {32: 7.8, 39: 7.7}
    reach = simulate_cli._past_reach(named, run, Mode.SIMULATION, run,
                                     lambda c: eps.get(c.completion()))
    assert reach == ("--completion-rounds 39 reach the items named whole (each adds "
                     "log2(--dim-limit) = 23 bits, a larger --dim-limit more a round); the "
                     "cost: the main rounds' eps_local 7.800 falls to 7.700. docs/codecs.md")
    fixed = RunConfig(segment_bits=5, rounds=8, max_bits=40)
    reach = simulate_cli._past_reach(named, fixed, Mode.SIMULATION, fixed,
                                     lambda c: 7.0 if c.rounds == 8 else None)
    assert reach.startswith("--max-bits 984 with --rounds 197 reach the items named whole (a "
                            "round covers 5 bits, --segment-bits; completion rounds do not "
                            "run with --segment-bits 5); the cost: more than the privacy "
                            "budget can fit")
    assert simulate_cli._past_reach([{"needs_bits": None}], run, Mode.SIMULATION, run,
                                    None).startswith("No setting reaches them whole")
    # (past the rounds a run can have: only a larger --dim-limit helps)
    narrow = RunConfig(dim_limit=4, max_bits=8, rounds=4)  # (72 bits: 2 a round over 36)
    assert simulate_cli._past_reach([{"needs_bits": 4000}], narrow, Mode.SIMULATION, narrow,
                                    None).startswith(
        "That takes 1,996 completion rounds at log2(--dim-limit) = 2 bits each, more than the "
        "1,024 a run can have: a larger --dim-limit adds more bits a round")
    # (nor past them with --max-bits where completion rounds cannot run)
    assert simulate_cli._past_reach([{"needs_bits": 3000}], replace(narrow, algorithm="triehh"),
                                    Mode.SIMULATION, None, None).startswith(
        "That takes 1,500 rounds of 2 bits (log2(--dim-limit)), more than the 1,024 a run can "
        "have: a larger --dim-limit covers more bits a round")
    one_bit = RunConfig(segment_bits=1, rounds=60)
    assert simulate_cli._past_reach([{"needs_bits": 3000}], one_bit, Mode.SIMULATION, None,
                                    None).startswith(
        "That takes 3,000 rounds of 1 bit (--segment-bits), more than the 1,024 a run can "
        "have: a larger --dim-limit with longer --segment-bits covers more bits a round")
    # (at a given eps_local, devices and --eps-agg do not fit more completion rounds)
    given = RunConfig(eps_local=3.0, completion_rounds=4)
    reach = simulate_cli._past_reach(named, given, Mode.SIMULATION,
                                     replace(given, completion_rounds=32), None)
    assert reach.startswith("Only 4 of the 32 completion rounds asked fit the privacy budget "
                            "here: a larger --eps-local or --completion-weight fits more")


class Started(Exception):
    """What the fake topology raises when `up` starts a device process."""


class FakeTopology:
    """LocalTopology's start-up calls; no process is started."""

    def __init__(self, workdir: Any = None, tls: bool = True) -> None:
        self.workdir = Path("/nonexistent")

    def __enter__(self) -> FakeTopology:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def start_aggregator(self, *args: Any, **kwargs: Any) -> None:
        pass

    def start_coordinator(self, *args: Any, **kwargs: Any) -> None:
        pass

    def refuse_moved_users(self, *args: Any, **kwargs: Any) -> None:
        pass

    def start_devices(self, *args: Any, **kwargs: Any) -> None:
        raise Started


def test_up_warns_at_the_coordinators_plan_before_any_device_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from fedhh.cli.main import main
    from fedhh_coordinator.runs import open_ledger

    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(topology, "LocalTopology", FakeTopology)
    data = _write(tmp_path, _users(300))
    with pytest.raises(Started):
        main(["up", "--dataset", str(data), "--insecure", "--devices", "200"])
    err = capsys.readouterr().err
    # (n_min: 0.9 of the 200 devices; the completion rounds its budget fits)
    asked = replace(RunConfig(eps_agg=2.0, selection="weighted", codec="unicode",
                              stage_ms=30_000, checkin_ms=30_000),
                    target_devices=200, min_devices=180)
    planned, _ = with_most_completions(asked, open_ledger, lambda ledger: ledger.eps_local)
    bits = planned.code_bits(Mode.NETWORK)
    assert bits < 576
    assert (f"fedhh up: warning: 2 items held by 30.0% of the users are longer than this "
            f"run's codes ({bits:,} bits)") in err
    assert "--json" not in err  # (fedhh up has none)
