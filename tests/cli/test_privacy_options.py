"""`fedhh privacy`: every option a form does not read is refused, those with defaults too.

Before, --sampling-rate, --sensitivity, --coordinates and --privacy-method had defaults (or were
read only by some forms) and were silently ignored elsewhere: `fedhh privacy triehh
--sampling-rate 0.5 ...` printed the sampling rate TrieHH needs as if 0.5 had been taken into
account, and `--sensitivity 2` beside the local epsilon's form changed nothing.
"""

from __future__ import annotations

import json

import pytest
from cli_kit import one_line_error, run_cli

LOCAL = ["--eps-agg", "1", "--delta", "1e-6", "--rounds", "4", "--devices", "100000"]
AMPLIFY = ["amplify", "--eps-local", "4", "--delta", "1e-6", "--rounds", "1",
           "--devices", "100000"]
TRIEHH = ["triehh", "--theta", "10", "--eps-agg", "1", "--delta", "1e-6", "--rounds", "4",
          "--devices", "100000"]
TRIEHHPP = ["triehh++", "--theta", "10", "--eps-agg", "1", "--delta", "1e-6", "--rounds", "4"]
GAUSS = ["central-gaussian", "--eps-agg", "1", "--delta", "1e-6", "--rounds", "4"]
LAPLACE = ["central-laplace", "--eps-agg", "1", "--delta", "1e-6", "--rounds", "4"]


@pytest.mark.parametrize("form, extra, flag", [
    (LOCAL, ["--sensitivity", "2"], "--sensitivity"),
    (LOCAL, ["--coordinates", "2"], "--coordinates"),
    (AMPLIFY, ["--sensitivity", "2"], "--sensitivity"),
    (TRIEHH, ["--sampling-rate", "0.5"], "--sampling-rate"),
    (TRIEHH, ["--privacy-method", "clones"], "--privacy-method"),
    (TRIEHH, ["--method", "clones"], "--privacy-method"),
    (TRIEHHPP, ["--sampling-rate", "1"], "--sampling-rate"),
    (TRIEHHPP, ["--coordinates", "1"], "--coordinates"),
    (GAUSS, ["--coordinates", "2"], "--coordinates"),
    (GAUSS, ["--sampling-rate", "0.1"], "--sampling-rate"),
    (LAPLACE, ["--privacy-method", "sum"], "--privacy-method"),
])
def test_an_option_with_a_default_the_form_does_not_read_is_refused(
        form: list[str], extra: list[str], flag: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    mechanism = form[0] if not form[0].startswith("-") else "optprefixtree"
    assert one_line_error(["privacy", *form, *extra], capsys) == \
        f"fedhh privacy: error: {flag} does not apply to {mechanism}"


def answer(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code, out, err = run_cli(["privacy", *argv, "--json"], capsys)
    assert code == 0, err
    return json.loads(out)


def test_the_options_a_form_reads_still_apply_with_the_same_defaults(
        capsys: pytest.CaptureFixture[str]) -> None:
    # The defaults are unchanged: spelled out or left out, the same answer.
    assert answer(LAPLACE, capsys) == answer(
        [*LAPLACE, "--sensitivity", "1", "--coordinates", "1"], capsys)
    assert answer(GAUSS, capsys) == answer([*GAUSS, "--sensitivity", "1"], capsys)
    assert answer(AMPLIFY, capsys) == answer([*AMPLIFY, "--sampling-rate", "1"], capsys)
    # And given other values, they change it.
    laplace = answer(LAPLACE, capsys)["scale"]
    assert answer([*LAPLACE, "--sensitivity", "2"], capsys)["scale"] > laplace
    gauss = answer(GAUSS, capsys)["sigma"]
    assert answer([*GAUSS, "--sensitivity", "2"], capsys)["sigma"] > gauss
    full = answer(AMPLIFY, capsys)
    sampled = answer([*AMPLIFY, "--sampling-rate", "0.5"], capsys)
    assert sampled["sampling_rate"] == 0.5 and full["sampling_rate"] == 1.0
