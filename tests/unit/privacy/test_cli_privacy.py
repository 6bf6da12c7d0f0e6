"""`fedhh privacy`: forms, JSON keys, one-line errors with exit code 2."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from fedhh.cli import privacy as cli
from fedhh.cli.main import OneLineErrorParser, usage_error
from fedhh.errors import FedhhError
from fedhh.privacy import solve_local_epsilon


def run(argv: list[str]) -> int:
    parser = OneLineErrorParser(prog="fedhh")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    cli.register(sub)
    args: argparse.Namespace = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except FedhhError as error:
        usage_error(f"fedhh {args.command}", str(error))


BASE = ["--eps-agg", "1", "--delta", "1e-6", "--rounds", "4"]


def test_default_mechanism_is_optprefixtree(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["privacy", *BASE, "--devices", "100000", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mechanism"] == "optprefixtree" and data["method"] == "sum"
    assert data["eps_local"] == solve_local_epsilon(1.0, 1e-6, 4, 100_000).eps_local
    assert data["breakdown"]["tightest"] == "pld"
    assert data["breakdown"]["pld_epsilon"] <= 1.0


def test_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["privacy", *BASE, "--devices", "100000", "--sampling-rate", "0.5",
                "--method", "clones"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("eps_local = ") and "alpha" in out


def test_amplify_reproduces_the_published_clones_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Feldman, McMillan, Talwar 2021 (apple/ml-shuffling-amplification example.py):
    # n = 1e5, eps0 = 4, delta = 1e-6: 0.1675 to 0.1728 numerically, at most 0.538 closed form
    argv = ["privacy", "amplify", "--eps-local", "4", "--delta", "1e-6", "--rounds", "1",
            "--devices", "100000", "--json"]
    assert run(argv) == 0
    data = json.loads(capsys.readouterr().out)
    by_method = {r["method"]: r for r in data["results"]}
    assert set(by_method) == {"sum", "clones", "paper", "closed-form"}
    assert 0.1675 <= by_method["clones"]["eps_agg"] <= 0.1728
    assert by_method["closed-form"]["eps_agg"] <= 0.538
    assert by_method["sum"]["eps_agg"] < by_method["clones"]["eps_agg"]
    assert not by_method["paper"]["conditions_verified"]
    assert run([*argv[:-1], "--method", "clones"]) == 0
    text = capsys.readouterr().out
    assert "clones: eps = 0.1" in text and "delta = 1e-06" in text and "sum" not in text


def test_amplify_is_the_inverse_of_the_solver(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["privacy", *BASE, "--devices", "50000", "--json"]) == 0
    eps_local = json.loads(capsys.readouterr().out)["eps_local"]
    assert run(["privacy", "amplify", "--eps-local", str(eps_local), "--delta", "1e-6",
                "--rounds", "4", "--devices", "50000", "--method", "sum", "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert 0.99 <= result["eps_agg"] <= 1.0


@pytest.mark.parametrize(
    ("argv", "key"),
    [
        (["triehh", "--theta", "10", "--devices", "1600000"], "sampling_rate"),
        (["triehh++", "--theta", "10"], "sampling_rate"),
        (["central-gaussian"], "sigma"),
        (["central-laplace", "--sensitivity", "2"], "scale"),
    ],
)
def test_variants(argv: list[str], key: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["privacy", *argv, *BASE, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[key] > 0 and data["mechanism"] == argv[0]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--eps-agg", "0", "--delta", "1e-6", "--rounds", "4", "--devices", "10"], "--eps-agg"),
        (["--eps-agg", "inf", "--delta", "1e-6", "--rounds", "4", "--devices", "10"],
         "--eps-agg: must be positive and finite, got inf"),
        (["--eps-agg", "nan", "--delta", "1e-6", "--rounds", "4", "--devices", "10"],
         "--eps-agg: must be positive and finite, got nan"),
        (["central-laplace", *BASE, "--sensitivity", "inf"],
         "--sensitivity: must be positive and finite, got inf"),
        (["--eps-agg", "0.01", "--delta", "1e-6", "--rounds", "16", "--devices", "10",
          "--privacy-method", "clones"], "below 0.001953 (the smallest tried), at the solver's "
         "resolution of 0.001; basic composition meets it at eps_local = eps_agg / rounds = "
         "0.000625"),
        (["--eps-agg", "1", "--delta", "1", "--rounds", "4", "--devices", "10"], "--delta"),
        (["--eps-agg", "1", "--delta", "1e-6", "--rounds", "0", "--devices", "10"], "--rounds"),
        (["--eps-agg", "1", "--delta", "1e-6", "--rounds", "2", "--devices", "1"], "--devices"),
        ([*BASE, "--devices", "10", "--sampling-rate", "1.5"], "--sampling-rate"),
        ([*BASE], "--devices"),
        (["triehh", *BASE, "--devices", "100"], "--theta"),
        (["triehh", "--theta", "5", *BASE, "--devices", "100"], "theta=5"),
        (["--delta", "1e-6", "--rounds", "4", "--devices", "10"], "--eps-agg"),
        (["amplify", "--delta", "1e-6", "--rounds", "4", "--devices", "10"], "--eps-local"),
        (["amplify", "--eps-local", "-1", "--delta", "1e-6", "--rounds", "4"], "--eps-local"),
        (["amplify", "--eps-local", "3", "--delta", "1e-6", "--rounds", "4"], "--devices"),
        ([*BASE, "--devices", "10", "--method", "nope"], "--method"),
    ],
)
def test_errors_are_one_line_exit_2(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        run(["privacy", *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err


@pytest.mark.parametrize("eps_local", ["1e-20", "1e-300", "1e-9"])
def test_amplify_answers_a_tiny_eps_local(eps_local: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # 1e-20 and 1e-300 ended in a math domain error (the clone probability rounded to 1);
    # 1e-9 was flagged "not eps_local-DP" by a float check with a tolerance
    argv = ["privacy", "amplify", "--eps-local", eps_local, "--delta", "1e-6", "--rounds", "4",
            "--devices", "1000", "--json"]
    assert run(argv) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["method"] for r in results] == ["sum", "clones", "paper", "closed-form"]
    for r in results:
        assert 0.0 <= r["eps_agg"] <= 4 * float(eps_local)
        assert r["conditions_verified"] is (r["method"] != "paper")
        assert not any("not eps_local-DP" in note for note in r["notes"])


def test_privacy_cli_imports_no_accounting_until_asked() -> None:
    # `fedhh privacy` parses its options with only the light modules loaded; the main entry
    # point imports only the subcommand it runs.
    code = (
        "import sys; from fedhh.cli.main import build_parser, _command; "
        "p = build_parser(_command(['privacy', '--eps-agg', '1'])); "
        "import fedhh.privacy; "
        "heavy = [m for m in ('scipy', 'dp_accounting', 'matplotlib', 'grpc', "
        "'fedhh.simulation', 'fedhh.cli.simulate') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_public_names_resolve() -> None:
    import fedhh.privacy as privacy

    assert sorted(privacy.__all__) == sorted(privacy._WHERE)
    for name in privacy.__all__:
        assert getattr(privacy, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = privacy.nope  # type: ignore[attr-defined]
