"""A new user's first hour (issue 28): each command the issue tried, fed as it was typed. Every
refusal is one line naming the value and what would be accepted, with exit code 2, before any
work; Ctrl-C and a closed pipe end a command at once without a traceback; what a command
prints is the real figure; every option has help; one name per concept."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_kit import one_line_error, run_cli
from networked_kit import cpu_seconds

from fedhh.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
FEDHH = [sys.executable, "-m", "fedhh.cli.main"]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("FEDHH_CACHE", str(path))
    return path


SMALL = ["--rounds", "2", "--dim-limit", "1024", "--max-bits", "20", "--quiet"]


@pytest.mark.parametrize("value", ["1e30", "1e12"])
def test_simulate_with_an_absurd_dim_limit(value: str, cache: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a ValueError or a 4 TiB allocation, with a traceback."""
    line = one_line_error(["simulate", "--dim-limit", value], capsys)
    assert "--dim-limit" in line and "dim_limit must be at most 67108864" in line
    assert not cache.exists()  # refused before the dataset was even looked at


@pytest.mark.parametrize("option", ["--json", "--plot"])
def test_simulate_output_paths_are_checked_before_the_run(
        option: str, users: Path, cache: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: --json DIR failed with a traceback after the whole run; --plot DIR silently
    wrote DIR.png."""
    line = one_line_error(["simulate", "--dataset", str(users), option, str(tmp_path)], capsys)
    assert f"{option} {tmp_path} is a folder; give a file name" in line
    line = one_line_error(["simulate", "--dataset", str(users), option,
                           str(tmp_path / "missing" / "out.json")], capsys)
    assert "does not exist" in line
    assert not cache.exists()


def test_simulate_plot_needs_a_format(users: Path, tmp_path: Path, cache: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(["simulate", "--dataset", str(users), "--plot",
                           str(tmp_path / "marginal")], capsys)
    assert "must end in one of .png, .pdf" in line


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The services a command tried to start (each refused at once): a refusal that comes
    before any work starts none. (Counted, not timed: a bound on the wall time failed only
    on a busy machine, and a late refusal is slow by starting services.)"""
    from fedhh.rpc.topology import LocalTopology

    tried: list[str] = []

    def start(self: LocalTopology, name: str, *args: object, **kwargs: object) -> None:
        tried.append(name)
        raise AssertionError(f"{name} started")

    monkeypatch.setattr(LocalTopology, "_start", start)
    return tried


def test_loadtest_json_in_a_missing_folder_is_refused_before_any_service_starts(
        tmp_path: Path, starts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the whole load test ran, then writing its report failed."""
    line = one_line_error(["loadtest", "--devices", "10", "--json",
                           str(tmp_path / "missing" / "x.json"), "--workdir",
                           str(tmp_path / "work")], capsys)
    assert "--json" in line and "does not exist" in line
    assert not (tmp_path / "work").exists() and starts == []


def test_privacy_with_eps_agg_1000_answers(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: OverflowError in the solver's Gaussian start (e^1000)."""
    code, out, err = run_cli(["privacy", "--eps-agg", "1000", "--delta", "1e-6", "--rounds", "4",
                          "--devices", "1000"], capsys)
    assert code == 0 and "capped at eps_local = 40.0" in out and not err


@pytest.mark.parametrize("eps", ["41", "710", "1e308"])
def test_privacy_amplify_refuses_an_eps_local_past_what_is_accounted(
        eps: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: OverflowError (e^710) or decimal.Overflow tracebacks."""
    line = one_line_error(["privacy", "amplify", "--eps-local", eps, "--delta", "1e-6",
                           "--rounds", "4", "--devices", "1000"], capsys)
    assert "argument --eps-local: must be in (0, 40]" in line


def test_simulate_with_eps_agg_1000_runs(users: Path, cache: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["simulate", "--dataset", str(users), "--eps-agg", "1000", *SMALL],
                       capsys)
    assert code == 0 and "Traceback" not in err


def test_simulate_prints_what_an_explicit_eps_local_really_spends(
        users: Path, cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "eps_agg=0.1" and no ledger, whatever --eps-local 9 really spent."""
    import json

    out_file = tmp_path / "out.json"
    code, out, _ = run_cli(["simulate", "--dataset", str(users), "--eps-agg", "0.1",
                        "--eps-local", "9", "--rounds", "2", "--dim-limit", "1024",
                        "--max-bits", "20", "--json", str(out_file)], capsys)
    assert code == 0
    payload = json.loads(out_file.read_text())
    spent = payload["privacy"]["eps_agg"]
    assert spent > 1.0 and payload["privacy"]["eps_agg_target"] == 0.1
    assert payload["ledger"] is not None and payload["ledger"]["eps_agg"] == spent
    assert len(payload["ledger"]["spends"]) == len(payload["rounds"]) >= 2
    assert re.search(rf"privacy: eps_agg {spent:.4g} \(what --eps-local spends; --eps-agg "
                     r"asked 0.1\)", out), out


def test_ctrl_c_in_simulate_is_one_line_and_exit_130_at_once(tmp_path: Path) -> None:
    """Before: a KeyboardInterrupt traceback, 13 s (25 s on a busy machine) after the key:
    the round under way ran to its end first. "At once" is counted in the process's own CPU
    time after the key (the rest of a round is seconds of it), not in wall time, which a busy
    machine stretches."""
    words = [f"w{i}" for i in range(3000)]
    data = tmp_path / "big.txt"
    data.write_text("".join(f"{words[(u * 7) % 3000]} {words[(u * 13) % 3000]}\n"
                            for u in range(20_000)))
    process = subprocess.Popen(
        [*FEDHH, "simulate", "--quiet", "--dataset", str(data), "--per-device",
         "--dim-limit", "65536", "--rounds", "4", "--eps-local", "4"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "FEDHH_CACHE": str(tmp_path / "cache")})
    assert process.stderr is not None
    try:
        deadline = time.monotonic() + 300
        while (at_key := cpu_seconds(process.pid)) < 4.0:  # computing (reading, the rounds)
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.1)  # polling the process's CPU time
        process.send_signal(signal.SIGINT)
        err = process.stderr.read()  # (to its end: the process has closed it, exiting)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    assert err.strip().splitlines() == ["fedhh simulate: interrupted"], err
    assert usage.ru_utime + usage.ru_stime - at_key < 2.0, (usage, at_key)


def test_privacy_amplify_into_a_closed_pipe_ends_quietly() -> None:
    """`fedhh privacy amplify ... | head -1`: before, a BrokenPipeError traceback."""
    process = subprocess.Popen(
        [*FEDHH, "privacy", "amplify", "--eps-local", "4", "--delta", "1e-6", "--rounds", "1",
         "--devices", "100000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()  # what `head -1` does after its line
    err = process.stderr.read().decode()
    process.wait(120)
    assert process.returncode in (0, 141) and not err, err


def readme_commands(path: Path, prefix: str) -> Iterator[list[str]]:
    """The command lines of a page that start with ``prefix`` (continuation lines joined),
    without the program name."""
    text = path.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.split("  #")[0].strip().strip("`")
        if line.startswith(prefix):
            yield shlex.split(line)[1:]


def test_the_readme_privacy_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the README's `fedhh privacy amplify` line failed (--delta is required)."""
    commands = list(readme_commands(ROOT / "README.md", ".venv/bin/fedhh privacy"))
    assert any(c[:2] == ["privacy", "amplify"] for c in commands)
    for argv in commands:
        code, _, err = run_cli(argv, capsys)
        assert code == 0, (argv, err)


def code_block_lines(path: Path) -> Iterator[str]:
    """The lines of a page's fenced code blocks, continuation lines joined."""
    inside = False
    for line in path.read_text().replace("\\\n", " ").splitlines():
        if line.strip().startswith("```"):
            inside = not inside
        elif inside:
            yield line.split("  #")[0].strip()


@pytest.mark.parametrize("doc", ["README.md", "docs/codecs.md", "docs/privacy.md",
                                 "docs/networked.md", "docs/datasets.md", "docs/dashboard.md",
                                 "docs/web-devices.md", "docs/scaling.md"])
def test_documented_options_exist(doc: str) -> None:
    """Every option a `fedhh ...` command of these pages' code blocks names is an option of
    that command (docs/codecs.md said `fedhh simulate --encoding german`: the option is
    --codec)."""
    commands = {}
    for path, action in walk(build_parser(), "fedhh"):
        command = path.split()[1] if len(path.split()) > 1 else ""
        commands.setdefault(command, set()).update(action.option_strings)
    checked = 0
    for line in code_block_lines(ROOT / doc):
        words = line.split()
        if not words or words[0] not in ("fedhh", ".venv/bin/fedhh") or len(words) < 2:
            continue
        known = commands.get(words[1])
        if known is None:
            continue
        used = {w.split("=")[0] for w in words[2:] if w.startswith("--")}
        assert used <= known, f"{doc}: {line}: {sorted(used - known)}"
        checked += 1
    assert checked


def test_up_with_an_empty_dataset(tmp_path: Path, cache: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "need 3 <= min_devices <= target_devices", naming neither the dataset nor
    the problem."""
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    line = one_line_error(["up", "--dataset", str(empty)], capsys)
    assert f"(imported from text file {empty}): none of its 2 users holds an item" in line


def test_up_with_too_few_devices_says_so_at_once(tmp_path: Path, cache: Path, starts: list[str],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `up --devices 5` started every service and tried five attempts before saying
    that no secure-aggregation parameters exist for 5 devices."""
    data = tmp_path / "five.txt"
    data.write_text("apple\nbanana\ncherry\ndamson\nelder\n")
    line = one_line_error(["up", "--dataset", str(data), "--workdir", str(tmp_path / "w")],
                          capsys)
    assert "a cohort of 5 devices cannot run secure aggregation" in line
    assert "use more devices, or a lower --expected-dropout or --corrupt-fraction" in line
    assert not (tmp_path / "w").exists() and starts == []


def test_up_in_a_workdir_in_use_announces_nothing(users: Path, tmp_path: Path, cache: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Before, a refused second `up` printed "fedhh up: 300 devices from ..." and then the
    refusal, as if it had started."""
    from fedhh.rpc.topology import LocalTopology

    with LocalTopology(workdir=tmp_path / "w", tls=False):
        code, out, err = run_cli(["up", "--dataset", str(users), "--workdir",
                                  str(tmp_path / "w")], capsys)
    assert code == 2 and "is in use by another fedhh up" in err, err
    assert "devices from" not in out + err


def test_data_import_of_an_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    """Before: "imported" with 0 users."""
    empty = tmp_path / "nothing.txt"
    empty.write_text("")
    line = one_line_error(["data", "import", str(empty), "--format", "text", "--out",
                           str(tmp_path / "out")], capsys)
    assert "none of its 0 users holds an item" in line
    assert not (tmp_path / "out").exists()


def walk(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, f"{path} {name}")
        else:
            yield path, action


def test_every_option_has_help() -> None:
    """Before: loadtest --devices/--rounds, every service's --metrics-host and --log-level,
    combiner --max-tombstones/--tombstone-ttl and health --timeout had none."""
    missing = [f"{path} {'/'.join(a.option_strings) or a.dest}"
               for path, a in walk(build_parser(), "fedhh")
               if not a.help and not isinstance(a, argparse._HelpAction)]
    assert missing == []


@pytest.mark.parametrize(("argv", "dest", "value"), [
    (["privacy", "--privacy-method", "clones", "--delta", "1e-6", "--rounds", "1"],
     "method", "clones"),
    (["privacy", "--method", "clones", "--delta", "1e-6", "--rounds", "1"], "method",
     "clones"),
    (["loadtest", "--devices", "9", "--drop-rate", "0.1"], "dropout", 0.1),
    (["loadtest", "--devices", "9", "--dropout", "0.1"], "dropout", 0.1),
    (["loadtest", "--devices", "9", "--shard-size", "3"], "shard_size", 3),
    (["device", "--coordinator", "x:1", "--state-dir", "s", "--drop-rate", "0.2"], "drop_rate",
     0.2),
    (["device", "--coordinator", "x:1", "--state-dir", "s", "--dropout", "0.2"], "drop_rate",
     0.2),
])
def test_one_name_per_concept_and_the_old_names_still_work(argv: list[str], dest: str,
                                                           value: object) -> None:
    """The run settings' names (--privacy-method, --shard-size) and the devices' --drop-rate
    everywhere; --method and --dropout are kept as the former names."""
    assert getattr(build_parser().parse_args(argv), dest) == value


def test_a_path_the_command_cannot_use_is_one_line(tmp_path: Path, cache: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a traceback for each (FileNotFoundError, IsADirectoryError, ValueError from
    Dask's address parser), some only after the work. Now one line naming the path or the
    option, exit 2, before the work where the command can tell."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    line = one_line_error(["data", "inspect", "shakespeare", "--cache-dir",
                           str(a_file / "cache")], capsys)
    assert line == f"fedhh data inspect: error: Not a directory: {a_file / 'cache'}"
    line = one_line_error(["data", "warm-start", "--out", str(tmp_path)], capsys)
    assert line.startswith(f"fedhh data warm-start: error: --out {tmp_path} is a folder")
    study = ["experiments", "segmentation", "--dataset", "shakespeare", "--seeds", "1"]
    assert one_line_error([*study, "--out", str(a_file)], capsys) == \
        f"fedhh experiments segmentation: error: --out {a_file} exists and is not a folder"
    assert one_line_error([*study, "--store", str(a_file / "store")], capsys) == (
        f"fedhh experiments segmentation: error: --store {a_file / 'store'}: {a_file} is not a "
        "folder")
    assert "argument --scheduler: a scheduler is [tcp://]HOST:PORT" in one_line_error(
        [*study, "--scheduler", "bogus"], capsys)


def test_a_drop_rate_out_of_range_is_refused_as_it_is_parsed(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: loadtest said "--dropout must be in [0, 1)", the option's former name, and
    `fedhh device --drop-rate 2` was accepted (a probability above 1)."""
    for command, value in (("loadtest", "1.5"), ("device", "2")):
        line = one_line_error([command, "--drop-rate", value], capsys)
        assert line == (f"fedhh {command}: error: argument --drop-rate/--dropout: expected a "
                        f"number in [0, 1), got '{value}'")


def test_an_empty_deny_list_path_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `simulate --deny-list ""` ran with no deny list, exit 0."""
    assert one_line_error(["simulate", "--deny-list", ""], capsys) == (
        "fedhh simulate: error: argument --deny-list: give a file of items, one per line (or "
        "a .json array of strings), not an empty path")


def test_the_deny_list_help_names_the_json_form(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the help named only the one-a-line form, the one that cannot hold an item
    beginning or ending with a space."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["simulate", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "a .json file of one JSON array of strings" in help_text


def test_a_health_timeout_past_a_day_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: --timeout 1e308 read a SERVING service as DEADLINE_EXCEEDED (exit 1)."""
    assert one_line_error(["health", "--address", "127.0.0.1:1", "--timeout", "1e308"],
                          capsys) == ("fedhh health: error: argument --timeout: at most "
                                      "86400 s, got '1e308'")


@pytest.mark.parametrize("argv, line", [
    (["--privacy-method", "bogus"], "argument --privacy-method: privacy_method must be one of "
     "sum, clones, paper, closed-form (or exact, a former name), got 'bogus'"),
    (["--fp-ratio", "1"], "argument --fp-ratio: fp_ratio 1.0 relative to the kept set never "
     "raises the threshold"),
    (["--round-fp-ratio", "nan,0.5,0.5,0.5"],
     "argument --round-fp-ratio: round_fp_ratio targets must be > 0, got nan"),
    (["--fp-ratio-finished", "0"], "argument --fp-ratio-finished: fp_ratio_finished must be "
     "in (0, 1)"),
    (["--fp-ratio-finished", "abc"], "argument --fp-ratio-finished: must be a number, got "
     "'abc' (or 'none')"),
    (["--algorithm", "triehh", "--theta", "3"], "argument --theta: theta must be >= 4, got 3"),
    (["--rounds", "1"], "argument --max-bits: max_bits 60 is more than the 1 main rounds can "
     "add (23 bits each at dim_limit 10000000): run at least 3 main rounds (--rounds), or "
     "lower max_bits to at most 23"),
])
def test_a_refused_value_names_its_option(argv: list[str], line: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "method must be one of sum, clones, paper, closed-form" (no option, and the
    accepted former name `exact` not listed); "round false-positive target 1.0 relative to the
    kept set ..." (no option)."""
    assert one_line_error(["simulate", *argv], capsys).startswith(
        f"fedhh simulate: error: {line}")


@pytest.mark.parametrize("argv, prog", [
    (["up", "--bogus"], "fedhh up"),
    (["admin", "list", "--bogus"], "fedhh admin list"),
    (["data", "inspect", "shakespeare", "--bogus"], "fedhh data inspect"),
])
def test_an_unknown_option_is_named_by_its_command(argv: list[str], prog: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "fedhh: error: unrecognized arguments: --bogus", whichever command it was
    given to."""
    assert one_line_error(argv, capsys) == f"{prog}: error: unrecognized arguments: --bogus"


def test_an_option_is_spelled_out(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: any unique prefix was taken (`--eps-a 2` ran as --eps-agg 2): hidden aliases
    that an option added later would change the meaning of."""
    assert build_parser().parse_args(["simulate", "--eps-agg", "2"]).eps_agg == 2
    assert one_line_error(["simulate", "--eps-a", "2"], capsys) == \
        "fedhh simulate: error: unrecognized arguments: --eps-a 2 (did you mean --eps-agg?)"


@pytest.mark.parametrize("argv, option", [
    (["coordinator", "--aggregator", "bogus"], "--aggregator"),
    (["coordinator", "--aggregator", "127.0.0.1:1", "--aggregator-public-address",
      "host:0"], "--aggregator-public-address"),
    (["selector", "--leader", "host:99999"], "--leader"),
    (["health", "--address", "no-port"], "--address"),
    (["admin", "list", "--coordinator", "host:"], "--coordinator"),
    # a host that is not one: a URL's scheme or path, a port twice, a space, IPv6 unbracketed
    (["coordinator", "--aggregator", "127.0.0.1:1", "--aggregator-public-address",
      "https://fedhh.example.org:7100"], "--aggregator-public-address"),
    (["coordinator", "--aggregator", "aggregator:7100:7100"], "--aggregator"),
    (["selector", "--leader", "fedhh.example.org/api:7000"], "--leader"),
    (["health", "--address", "fedhh .example.org:7000"], "--address"),
    (["admin", "list", "--coordinator", "::1:7000"], "--coordinator"),
])
def test_an_address_to_dial_is_checked_as_the_command_starts(
        argv: list[str], option: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `coordinator --aggregator bogus` started and failed only when a run began."""
    line = one_line_error(argv, capsys)
    assert f"error: argument {option}: must be HOST:PORT with a port 1 to 65535" in line


def test_a_triehh_budget_that_samples_fewer_devices_than_theta_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `privacy triehh --theta 100000` printed "devices per round = 0", exit 0."""
    assert one_line_error(["privacy", "triehh", "--theta", "100000", "--eps-agg", "1",
                           "--delta", "1e-6", "--rounds", "4", "--devices", "1000"], capsys) \
        == ("fedhh privacy: error: TrieHH samples 0 of the 1000 devices a round at this budget, "
            "fewer than theta = 100000 votes: it could find nothing; use more devices, a lower "
            "--theta or a larger --eps-agg")


def test_a_ca_file_without_a_certificate_is_named(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `health --ca` of an empty file, a key or junk reported the server UNAVAILABLE."""
    key = b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
    for content in (b"", b"junk", key):
        ca = tmp_path / "ca.pem"
        ca.write_bytes(content)
        assert one_line_error(["health", "--address", "127.0.0.1:1", "--ca", str(ca)],
                              capsys) == (f"fedhh health: error: CA file {ca} holds no PEM "
                                          "certificate (give the CA's certificate, ca.pem, not "
                                          "a key)")


@pytest.mark.parametrize("argv, line", [
    (["privacy", "--eps-agg", "1", "--eps-local", "3", "--delta", "1e-6", "--rounds", "4",
      "--devices", "1600000"], "--eps-local does not apply to optprefixtree"),
    (["privacy", "amplify", "--eps-agg", "1", "--eps-local", "4", "--delta", "1e-6",
      "--rounds", "1", "--devices", "100000"], "--eps-agg does not apply to amplify"),
    (["privacy", "central-gaussian", "--eps-agg", "1", "--delta", "1e-6", "--rounds", "4",
      "--theta", "10"], "--theta does not apply to central-gaussian"),
])
def test_a_privacy_option_the_form_does_not_read_is_refused(
        argv: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ignored; `--eps-local 3` beside the form that solves for eps_local printed the
    solved value as if it were the answer for 3."""
    assert one_line_error(argv, capsys) == f"fedhh privacy: error: {line}"


@pytest.mark.parametrize("command", [
    ["aggregator", "--insecure", "--listen", "127.0.0.1:0", "--coordinator-key", "k.pub"],
    ["coordinator", "--insecure", "--listen", "127.0.0.1:0", "--aggregator", "127.0.0.1:1"],
    ["selector", "--leader", "127.0.0.1:1", "--store", "s.sqlite", "--coordinator-key", "k.pub"],
])
def test_web_origins_without_the_web_port_are_refused(
        command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Before: accepted, and no page could call the port that was never opened."""
    assert one_line_error([*command, "--web-origin", "https://a.example"], capsys) == (
        f"fedhh {command[0]}: error: --web-origin needs --web-listen: the origins may call the "
        "Connect port, which is off without it")


def test_version_typos_and_counts_from_zero_are_answered(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A second probe of the first hour: no --version; a mistyped dataset name got the list
    of names but no suggestion; `--web-devices -1` was told "a positive integer" where 0 is
    accepted."""
    code, out, _ = run_cli(["--version"], capsys)
    assert code == 0 and re.fullmatch(r"fedhh \S+\n", out), out
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    error = run_cli(["simulate", "--dataset", "shakespear"], capsys)[2]
    assert error.strip().endswith("did you mean 'shakespeare'?"), error
    assert "did you mean" not in run_cli(["simulate", "--dataset", "nothing.txt"], capsys)[2]
    assert "must be an integer >= 0, got -1" in one_line_error(
        ["up", "--web-devices", "-1"], capsys)
