"""PI-RAPPOR in the system: the `randomizer` knob and its refusals, the shuffle accounting,
the round-dependent thresholding, and whole simulated discoveries (library and CLI)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from fedhh.cli.main import main
from fedhh.codec import Codec
from fedhh.config import Mode, RunConfig
from fedhh.config.flags import add_run_arguments, config_from_args
from fedhh.data.dataset import from_user_counts
from fedhh.errors import ConfigError, FedhhError
from fedhh.pirappor.accounting import accounting_method
from fedhh.pirappor.decoders import DECODERS
from fedhh.pirappor.mechanism import PiRappor, PiRapporRound
from fedhh.server import PrefixTree, TreeConfig
from fedhh.server.mechanisms import LocalRandomizer, TailKind, for_round
from fedhh.simulation.rounds import draw_sums
from fedhh.simulation.runner import prepare, simulate

PI = RunConfig(randomizer="pi-rappor")


def test_knob_defaults_and_flag() -> None:
    assert RunConfig().randomizer == "ohe-rr"
    PI.validate(Mode.SIMULATION)
    parser = argparse.ArgumentParser()
    add_run_arguments(parser, Mode.SIMULATION)
    args = parser.parse_args(["--randomizer", "pi-rappor", "--eps-local", "6"])
    assert config_from_args(args, Mode.SIMULATION).randomizer == "pi-rappor"
    with pytest.raises(SystemExit):
        parser.parse_args(["--randomizer", "rappor"])
    with pytest.raises(ConfigError, match="randomizer"):
        RunConfig(randomizer="rappor").validate()


def test_networked_runs_refuse_pi_rappor() -> None:
    with pytest.raises(ConfigError, match="shuffler"):
        PI.validate(Mode.NETWORK)
    parser = argparse.ArgumentParser()
    add_run_arguments(parser, Mode.NETWORK)
    with pytest.raises(SystemExit):  # not even a flag of the networked commands
        parser.parse_args(["--randomizer", "pi-rappor"])


@pytest.mark.parametrize("values, match", [
    ({"algorithm": "triehh"}, "optprefixtree"),
    ({"dim_limit": 1 << 31}, "at most 67108864"),  # fields below 2^31: the general bound
    ({"eps_local": 25.0}, "2\\^31"),
])
def test_configurations_pi_rappor_cannot_run(values: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        RunConfig(randomizer="pi-rappor", **values).validate()  # type: ignore[arg-type]


def test_accounting_is_a_shuffle_bound() -> None:
    assert accounting_method(None) == "clones"
    assert accounting_method("closed-form") == "closed-form"
    assert accounting_method("exact") == "clones"  # the clones bound's former name
    with pytest.raises(ConfigError, match="shuffle"):
        accounting_method("sum")
    with pytest.raises(ConfigError, match="shuffle"):
        RunConfig(randomizer="pi-rappor", privacy_method="sum").validate()
    with pytest.raises(FedhhError):
        accounting_method("magic")
    prepared = prepare(PI, 1_600_000)
    assert isinstance(prepared.mechanism, PiRappor)
    assert prepared.privacy["accounting"] == "clones"
    assert prepared.privacy["randomizer"] == "pi-rappor"
    ohe = prepare(RunConfig(privacy_method="clones"), 1_600_000)
    # The same eps_local: PI-RAPPOR is accounted exactly like any eps_local-LDP randomizer.
    assert prepared.privacy["eps_local"] == ohe.privacy["eps_local"]
    assert prepared.ledger is not None and prepared.ledger.to_dict()["method"] == "clones"
    # The default accountant of one-hot + randomized response (the released sums) allows more.
    assert prepare(RunConfig(), 1_600_000).privacy["eps_local"] > prepared.privacy["eps_local"]


def test_round_mechanism_depends_on_the_segment() -> None:
    mechanism = PiRappor(8.0)
    first, later = for_round(mechanism, 23), for_round(mechanism, 10)
    assert isinstance(first, PiRapporRound) and isinstance(later, PiRapporRound)
    assert (first.params.q, later.params.q) == (8388617, 2999)
    ohe = LocalRandomizer(8.0)
    assert for_round(ohe, 10) is ohe
    with pytest.raises(TypeError, match="decoded one by one"):
        draw_sums(mechanism, np.zeros(4, np.int64), 10, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="decoder"):
        PiRappor(8.0, decoder="fast")


def test_tree_thresholds_decoded_counts_with_the_rounds_rates() -> None:
    codec = Codec("5bit")
    tree = PrefixTree(TreeConfig(rounds=12, dim_limit=32), codec, PiRappor(6.0))
    state = tree.initial_state()
    round_ = PiRappor(6.0).at_segment(tree.query(state).segment_bits)
    n = 10_000
    sums = np.full(32, round(n * round_.params.a0))
    sums[3] = round(n * round_.params.a0 + 600 * (round_.params.a1 - round_.params.a0))
    _, report = tree.advance(state, sums, n)
    assert report.kept == 1
    estimates = round_.estimate(sums, n)
    assert estimates[3] == pytest.approx(600, abs=1)
    assert abs(estimates[0]) < 1


def small_population() -> list[dict[str, int]]:
    rng = np.random.default_rng(0)
    words = ["apple", "banana", "cherry", "delta", "echo", "fox"]
    users = []
    for _ in range(4000):
        held = rng.choice(words, size=int(rng.integers(1, 3)), replace=False,
                          p=[0.4, 0.25, 0.15, 0.1, 0.06, 0.04])
        users.append({str(w): int(rng.integers(1, 4)) for w in held})
    return users


@pytest.mark.parametrize("per_device", [False, True])
def test_simulated_discovery_with_pi_rappor(per_device: bool) -> None:
    dataset = from_user_counts(small_population())
    from fedhh.data.truth import ground_truth

    # q > n in the first round: with q close to n, the reports with v_d = 0 (probability 1/q
    # each) move the counts of a whole prefix together (docs/pi-rappor.md), which small tests
    # feel.
    config = RunConfig(randomizer="pi-rappor", eps_local=6.0, codec="5bit", max_bits=30,
                       rounds=3, dim_limit=1 << 16, per_device=per_device, seed=4)
    result = simulate(dataset, config, ground_truth(dataset))
    found = {h.item.rstrip("…") for h in result.heavy_hitters}  # 30 bits: 6 letters shown
    assert {"apple", "banana", "cherry", "delta"} <= found
    for r in result.rounds:
        extra = r["extra"]
        assert extra["randomizer"] == "pi-rappor" and extra["decoder"] in DECODERS
        assert extra["q"] > 1 << r["segment_bits"] and extra["report_bytes"] <= 8
    assert result.rounds[0]["extra"]["decoder"] == "direct+prefix"
    again = simulate(dataset, config, ground_truth(dataset))
    assert [h.item for h in again.heavy_hitters] == [h.item for h in result.heavy_hitters]
    assert [r["threshold"] for r in again.rounds] == [r["threshold"] for r in result.rounds]


def test_cli_simulate_with_pi_rappor(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "users.txt"
    data.write_text("\n".join(" ".join(u) for u in small_population()) + "\n")
    out = tmp_path / "r.json"
    code = main(["simulate", "--dataset", str(data), "--randomizer", "pi-rappor",
                 "--eps-local", "6", "--dim-limit", "65536", "--json", str(out), "--quiet"])
    assert code == 0
    payload = json.loads(out.read_text())
    assert payload["config"]["randomizer"] == "pi-rappor"
    assert "apple" in {h["item"] for h in payload["heavy_hitters"]}
    assert payload["privacy"]["accounting"] == "clones"
    assert all(r["extra"]["decoder"] for r in payload["rounds"])
    assert TailKind(payload["config"]["tail"]) is TailKind.BINOMIAL
