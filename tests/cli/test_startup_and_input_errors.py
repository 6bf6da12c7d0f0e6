"""Extreme or wrong inputs at startup are refused with one line naming the option and the value,
exit code 2, no traceback, and nothing written: allocation weights a double cannot divide,
central-DP targets whose numbers overflowed or took minutes, a codebook nested too deeply for
the JSON parser, addresses and TLS files gRPC could not bind with (it said only "Failed to
bind"), coordinator stores that were a folder, a URL it made a folder of, or throwaway, an
attestation factory that was a module, a ready file that was a folder, and aggregator limits
named by their internal fields."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_kit import one_line_error

from fedhh.cli.main import main
from fedhh.codec import Codebook
from fedhh.errors import ConfigError
from fedhh.privacy import accountant, central
from fedhh.privacy.solver import EPS_LOCAL_MAX
from fedhh.rpc.credentials import load_or_create_signing_key
from fedhh.rpc.tls import make_dev_pki

FEDHH = [sys.executable, "-m", "fedhh.cli.main"]
TOKEN = "0123456789abcdef0123"  # a valid control or admin token (16 to 1024 printable bytes)
# A refused service ends at once (before the fixes some served on); a deadline, not a window:
# starting a process that imports grpc can take tens of seconds on a busy machine.
SERVICE_EXIT_S = 300


# ---- helpers ---------------------------------------------------------------------------------
def service_error(cwd: Path, command: str, *args: str) -> str:
    """The single line a refused service process prints, run in ``cwd`` (exit code 2)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("FEDHH_CONTROL_TOKEN", "FEDHH_ADMIN_TOKEN")}
    done = subprocess.run([*FEDHH, command, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=SERVICE_EXIT_S)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, (done.returncode, done.stderr[-3000:])
    assert lines[0].startswith(f"fedhh {command}: error: "), lines
    return lines[0].removeprefix(f"fedhh {command}: error: ")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("FEDHH_CACHE", str(path))
    return path


SMALL = ["--dim-limit", "1024", "--max-bits", "20", "--quiet"]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something listens on (the OS's choice)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.fixture
def secrets(tmp_path: Path) -> Path:
    """Tokens and the coordinator's public key, outside the services' working folder."""
    root = tmp_path / "secrets"
    root.mkdir()
    (root / "control.token").write_text(TOKEN)
    (root / "admin.token").write_text(TOKEN[::-1])  # (the admin token may not be the control token)
    load_or_create_signing_key(root / "signing.pem")
    return root


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The services' working folder: a refusal must leave it as it was (one folder, adir)."""
    path = tmp_path / "work"
    (path / "adir").mkdir(parents=True)
    return path


def left_in(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


# ---- 1. allocation weights -------------------------------------------------------------------
def test_allocation_weights_wider_than_any_local_epsilon_are_refused(
        users: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ValueError: math domain error (1e-300 / 1e300 underflowed to 0)."""
    line = one_line_error(["simulate", "--dataset", str(users), "--rounds", "4", *SMALL,
                           "--round-budget", "1e300,1e-300,1,1"], capsys)
    assert "round_budget weights must be within a factor e^40" in line
    assert "got 1e-300 against 1e+300" in line
    # The bound is the largest eps_local the accountants solve for: a round further below the
    # largest could not get a positive epsilon at any of them.
    assert accountant.MAX_LOG_WEIGHT_RATIO == EPS_LOCAL_MAX
    with pytest.raises(ConfigError, match=r"round 2 would get eps_local - 46\.05"):
        accountant.allocation_offsets([1e20, 1, 1])
    near = accountant.allocation_offsets([1e17, 1.0])
    assert near[0] == 0.0 and near[1] == pytest.approx(-17 * 2.302585092994046, rel=1e-15)


# ---- 2. central DP calibration ---------------------------------------------------------------
def test_a_tiny_laplace_target_is_calibrated_not_divided_by_zero(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ZeroDivisionError (KOV's inverse returned 0 below its absolute tolerance)."""
    assert main(["privacy", "central-laplace", "--eps-agg", "1e-300", "--delta", "1e-6",
                 "--rounds", "4", "--json"]) == 0
    out = capsys.readouterr().out
    cal = central.laplace_calibration(1e-300, 1e-6, 4, 1.0)
    assert f'"noise_scale": {cal.noise_scale}' in out
    # basic composition's T / eps_agg stays a valid route for KOV
    assert cal.advanced_noise_scale == pytest.approx(4e300, rel=1e-12)
    assert 1e5 < cal.noise_scale < central.MAX_MULTIPLIER


@pytest.mark.parametrize("mechanism", ["central-laplace", "central-gaussian"])
def test_an_eps_agg_past_what_a_double_holds_is_refused(
        mechanism: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: OverflowError (Gaussian: e^1000) or over a minute of PLD work (Laplace)."""
    line = one_line_error(["privacy", mechanism, "--eps-agg", "1000", "--delta", "1e-6",
                           "--rounds", "4"], capsys)
    assert "eps_agg must be at most 709" in line and "got 1000" in line


@pytest.mark.parametrize("mechanism", ["central-laplace", "central-gaussian"])
def test_noise_past_the_largest_multiplier_is_refused_not_infinite(
        mechanism: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the Gaussian printed sigma = inf."""
    line = one_line_error(["privacy", mechanism, "--eps-agg", "1e-300", "--delta", "1e-12",
                           "--rounds", "4"], capsys)
    assert "eps_agg=1e-300, delta=1e-12 over 4 round(s) needs" in line
    assert "above 1e+09 x the sensitivity" in line


def test_the_simulator_refuses_the_same_central_targets(
        users: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(["simulate", "--dataset", str(users), "--rounds", "2", *SMALL,
                           "--algorithm", "central-gaussian", "--eps-agg", "1000"], capsys)
    assert "eps_agg must be at most 709" in line


def test_the_laplace_pld_grid_does_not_grow_with_eps_agg(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a 1e-4 grid whatever eps_agg: about 2 eps_agg / 1e-4 points, 36 s at 100."""
    from dp_accounting.pld import privacy_loss_distribution

    built = privacy_loss_distribution.from_laplace_mechanism
    points: list[float] = []

    def counting(parameter: float, **kwargs: Any) -> Any:
        interval = float(kwargs.get("value_discretization_interval", 1e-4))
        points.append(2.0 / (parameter * interval))  # the loss grid of [-1/z, 1/z]
        return built(parameter, **kwargs)

    monkeypatch.setattr(privacy_loss_distribution, "from_laplace_mechanism", counting)
    cal = central.laplace_calibration(100.0, 1e-6, 4, 1.0)
    assert cal.noise_scale == pytest.approx(0.04, rel=1e-3)  # basic composition's T / eps
    assert points and max(points) <= 1e5
    # and the answer still holds on an independent route: the RDP accountant at that scale
    assert cal.rdp_noise_scale >= cal.noise_scale


# ---- 3. a codebook nested too deeply ---------------------------------------------------------
@pytest.fixture
def deep_codebook(tmp_path: Path) -> Path:
    path = tmp_path / "deep.json"
    path.write_text('{"format": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return path


def test_a_deeply_nested_codebook_is_a_codebook_error(
        deep_codebook: Path, users: Path, cache: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: RecursionError from json.loads, in simulate and in admin start."""
    line = one_line_error(["simulate", "--dataset", str(users), "--rounds", "2", *SMALL,
                           "--codec", str(deep_codebook)], capsys)
    assert line.endswith(f"argument --codec: {deep_codebook}: not a codebook: JSON nested "
                         "too deeply")
    line = one_line_error(["admin", "--coordinator", "127.0.0.1:1", "start",
                           "--codec", str(deep_codebook)], capsys)
    assert "argument --codec" in line and "JSON nested too deeply" in line
    with pytest.raises(ConfigError, match=r"^codebook: not a codebook: JSON nested too deeply$"):
        Codebook.from_json("[" * 100_000)


# ---- 4 and 8. the aggregator -----------------------------------------------------------------
def aggregator_error(work: Path, secrets: Path, *args: str) -> str:
    return service_error(work, "aggregator", "--coordinator-key",
                         str(secrets / "signing.pem.pub"), "--control-token-file",
                         str(secrets / "control.token"), *args)


def test_the_aggregator_names_a_port_in_use(work: Path, secrets: Path, busy_port: int) -> None:
    """Before: RuntimeError: Failed to bind to address 127.0.0.1:PORT, with a traceback."""
    line = aggregator_error(work, secrets, "--insecure", "--listen", f"127.0.0.1:{busy_port}")
    assert line == (f"--listen: cannot listen on 127.0.0.1:{busy_port}: the port is in use "
                    "(Address already in use)")
    assert left_in(work) == ["adir"]


def test_the_aggregator_names_a_host_that_does_not_resolve(
        work: Path, secrets: Path, tmp_path: Path) -> None:
    make_dev_pki(tmp_path / "tls", ["localhost"])
    line = aggregator_error(work, secrets, "--tls-dir", str(tmp_path / "tls"),
                            "--listen", "no-such-host.invalid:0")
    assert line.startswith("--listen: cannot listen on no-such-host.invalid:0: the host "
                           "'no-such-host.invalid' does not resolve")


def test_the_aggregator_checks_its_tls_key_before_binding(
        work: Path, secrets: Path, tmp_path: Path) -> None:
    tls = make_dev_pki(tmp_path / "tls", ["localhost"])
    other = make_dev_pki(tmp_path / "other", ["localhost"])
    tls.key.write_bytes(other.key.read_bytes())
    line = aggregator_error(work, secrets, "--tls-dir", str(tmp_path / "tls"),
                            "--listen", "127.0.0.1:0")
    assert line == f"TLS key {tls.key} is not the key of the certificate {tls.cert}"
    tls.key.write_text("junk\n")
    line = aggregator_error(work, secrets, "--tls-dir", str(tmp_path / "tls"),
                            "--listen", "127.0.0.1:0")
    assert line == f"TLS key {tls.key} does not load as a PEM private key"


@pytest.mark.parametrize(("args", "expected"), [
    (["--quiet-close-ms", "-1"], "argument --quiet-close-ms: must be an integer >= 0, got -1"),
    (["--max-wait-ms", "0"], "argument --max-wait-ms: must be an integer >= 1, got 0"),
    # Before: accepted (a float option took inf), and "invalid int value: '1e3'".
    (["--result-ttl", "inf"], "argument --result-ttl: expected a positive number, got 'inf'"),
    (["--quiet-close-tail", "1"], "argument --quiet-close-tail: must be in [0, 1), got 1"),
    (["--tombstone-ttl", "5"],
     "argument --tombstone-ttl: must be at least --max-round-seconds (3600), got 5.0"),
])
def test_the_aggregator_names_the_limit_option_typed(
        args: list[str], expected: str, work: Path, secrets: Path) -> None:
    """Before: "quiet_close_s must be >= 0, got -0.001" (the field, in seconds)."""
    assert aggregator_error(work, secrets, "--insecure", "--listen", "127.0.0.1:0",
                            *args) == expected


# ---- 5, 6 and 7. the coordinator -------------------------------------------------------------
def coordinator_error(work: Path, secrets: Path, *args: str) -> str:
    return service_error(work, "coordinator", "--aggregator", "127.0.0.1:1", "--insecure",
                         "--listen", "127.0.0.1:0",
                         "--control-token-file", str(secrets / "control.token"),
                         "--admin-token-file", str(secrets / "admin.token"), *args)


@pytest.mark.parametrize(("args", "expected"), [
    # Before: sqlite3.OperationalError, with a traceback.
    (["--db", "adir"], "--db adir is a folder; give the SQLite file's path, e.g. "
                       "adir/fedhh-coordinator.sqlite"),
    # Before: served from a SQLite file in a new folder named mysql:
    (["--db", "mysql://x"], "--db mysql://x: mysql:// is not a supported store; give a "
                            "postgresql:// URL or a SQLite file path"),
    # Before: served from a throwaway store, the privacy ledger with it.
    (["--db", ""], "--db '' would keep the store, the devices' privacy ledger with it, in a "
                   "throwaway database: give a SQLite file path or a postgresql:// URL"),
    # Before: TypeError: 'module' object is not callable.
    (["--attestation", "os:path"], "--attestation 'os:path': path is a module, not a factory "
                                   "to call with the store"),
    # Before: the line, then an "Event loop is closed" traceback, and adir.tmp left behind.
    (["--ready-file", "adir"], "--ready-file adir is a folder; give a file name, e.g. "
                               "adir/results.json"),
    # Before: read until memory ran out (a MemoryError traceback at 1.2 GB under ulimit -v).
    (["--enrollment-tokens-file", "/dev/zero"], "enrollment tokens file /dev/zero holds more "
                                                "than 256 MiB; is it the right file?"),
])
def test_the_coordinator_refuses_before_writing_anything(
        args: list[str], expected: str, work: Path, secrets: Path) -> None:
    assert coordinator_error(work, secrets, *args) == expected
    assert left_in(work) == ["adir"]  # no signing key, no store, no mysql:, no adir.tmp


def test_the_coordinator_without_tokens_writes_no_signing_key(work: Path) -> None:
    """Before: coordinator-signing.pem (and .pub) were written, then the token was missed."""
    line = service_error(work, "coordinator", "--aggregator", "127.0.0.1:1", "--insecure",
                         "--listen", "127.0.0.1:0")
    assert line == ("no control token was given: pass --control-token-file PATH or set "
                    "$FEDHH_CONTROL_TOKEN")
    assert left_in(work) == ["adir"]


def test_the_coordinator_removes_what_it_wrote_when_the_verifier_cannot_be_made(
        work: Path, secrets: Path) -> None:
    """A factory that does not take the store fails only once the store exists."""
    line = coordinator_error(work, secrets, "--attestation", "json:JSONDecoder")
    assert line.startswith("--attestation 'json:JSONDecoder': ")
    assert left_in(work) == ["adir"]


def test_the_coordinator_names_a_port_in_use(work: Path, secrets: Path, busy_port: int) -> None:
    line = service_error(work, "coordinator", "--aggregator", "127.0.0.1:1", "--insecure",
                         "--listen", f"127.0.0.1:{busy_port}",
                         "--control-token-file", str(secrets / "control.token"),
                         "--admin-token-file", str(secrets / "admin.token"))
    assert line.startswith(f"--listen: cannot listen on 127.0.0.1:{busy_port}: the port is "
                           "in use")
    assert left_in(work) == ["adir"]


@pytest.mark.parametrize(("users", "said"), [
    ('["😀"]\n', "1 of its users holds an item"),  # (before, "1 of its users hold")
    ('["😀"]\n[]\n["a b"]\n', "2 of its users hold an item"),
])
def test_fedhh_up_counts_the_users_holding_an_item_in_good_english(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        users: str, said: str) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "users.jsonl"
    data.write_text(users, encoding="utf-8")
    line = one_line_error(["up", "--dataset", str(data), "--insecure"], capsys)
    assert line == (f"fedhh up: error: --dataset {data}: {said}; a round needs at least 3 "
                    "devices (far more to hide each report: the default Shakespeare fleet has "
                    "1,387)"), line
