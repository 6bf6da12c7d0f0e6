"""`fedhh deploy check`: the .env values docker compose reads itself, the services' options
made of .env values, the secret files compose mounts and the host ports it publishes, each
refused by the .env line and what to write, before `docker compose up`. Compose's own words
named no line: FEDHH_COORDINATOR_PORT=abc was "services.coordinator.ports contains an invalid
type", 70000 and two services on one host port passed `docker-compose config` and failed at
`up`, FEDHH_HEALTHCHECK_INTERVAL=10 was a traceback (Compose 1.29), and a misspelt variable
was ignored, its default used."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from cli_kit import run_cli

from fedhh.cli import deploy

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of deploy/'s compose file and .env.example as .env, with every secret file
    compose mounts, readable by the containers' user (mode 0644)."""
    folder = tmp_path / "deploy"
    folder.mkdir()
    shutil.copy(ROOT / "deploy" / "docker-compose.yml", folder)
    shutil.copy(ROOT / "deploy" / ".env.example", folder / ".env")
    _, _, secrets = deploy.compose_layout((folder / "docker-compose.yml").read_text())
    for template in secrets:
        path = folder / deploy.REFERENCE.sub(lambda m: m[2], template)
        path.parent.mkdir(exist_ok=True)
        path.write_text("x\n")
        path.chmod(0o644)
    for name in deploy.references((folder / "docker-compose.yml").read_text()):
        monkeypatch.delenv(name, raising=False)  # (compose's: the shell overrides .env)
    return folder


def edit(env: Path, **values: str) -> dict[str, int]:
    """Set each NAME=VALUE in ``env`` in place of its line (or at its end); each one's line."""
    lines = env.read_text().splitlines()
    at = {}
    for name, value in values.items():
        number = next((i for i, line in enumerate(lines) if line.startswith(f"{name}=")), None)
        if number is None:
            lines.append("")
            number = len(lines) - 1
        lines[number] = f"{name}={value}"
        at[name] = number + 1
    env.write_text("\n".join(lines) + "\n")
    return at


def check(stack: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    code, out, err = run_cli(["deploy", "check", "--dir", str(stack)], capsys)
    assert "Traceback" not in err
    return code, out.splitlines(), err


def test_the_example_env_with_its_secrets_is_ready(
        stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    values = len(deploy.read_env(stack / ".env")[0])
    code, lines, err = check(stack, capsys)
    assert (code, lines, err) == (0, [
        f"fedhh deploy check: {stack}/.env ({values} values): nothing to fix; next, from "
        f"{stack}: docker compose up -d"], ""), (lines, err)


def test_each_value_compose_reads_itself_is_named_by_its_line(
        stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = stack / ".env"
    at = edit(env, FEDHH_COORDINATOR_PORT="abc", FEDHH_AGGREGATOR_PORT="70000",
              FEDHH_HEALTHCHECK_INTERVAL="10", FEDHH_IMAGE="Fedhh:latest",
              FEDHH_OFFLINE_BUILD="true", FEDHH_DASHBOARD_BIND_ADDRESS="localhost",
              FEDHH_DASHBOARD_PORT="8443  # a comment", FEDHH_PROMETHEUS_PORT='"9091"')
    code, lines, err = check(stack, capsys)
    assert code == 1
    assert lines == [
        f"{env}:{at['FEDHH_IMAGE']}: FEDHH_IMAGE=Fedhh:latest: an image is NAME[:TAG] in "
        "lowercase, e.g. fedhh:latest or registry.example.org/fedhh:1.0 (default fedhh:latest)",
        f"{env}:{at['FEDHH_OFFLINE_BUILD']}: FEDHH_OFFLINE_BUILD=true: 0 (install from the "
        "package index) or 1 (only from deploy/wheelhouse) (default 0)",
        f"{env}:{at['FEDHH_HEALTHCHECK_INTERVAL']}: FEDHH_HEALTHCHECK_INTERVAL=10: a health "
        "check's duration is a number with its unit: 500ms, 30s, 2m, 1m30s (default 10s)",
        f"{env}:{at['FEDHH_COORDINATOR_PORT']}: FEDHH_COORDINATOR_PORT=abc: a published port "
        "is a whole number from 1 to 65535 (default 7000)",
        f"{env}:{at['FEDHH_AGGREGATOR_PORT']}: FEDHH_AGGREGATOR_PORT=70000: a published port "
        "is a whole number from 1 to 65535 (default 7100)",
        f"{env}:{at['FEDHH_DASHBOARD_BIND_ADDRESS']}: FEDHH_DASHBOARD_BIND_ADDRESS=localhost: "
        "the host address a port is published on is an IP address of this host, not a name: "
        "0.0.0.0 (every interface), 127.0.0.1 (this host alone) or one of its own "
        "(default 127.0.0.1)",
    ], lines  # (the comment and the quotes are compose's syntax too: no line of their own)
    values = len(deploy.read_env(env)[0])
    assert err == (f"fedhh deploy check: 6 to fix (read {env} ({values} values)); then run "
                   "this again\n")


def test_a_misspelt_variable_and_a_line_compose_cannot_read_are_named(
        stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = stack / ".env"
    env.write_text(env.read_text() + "FEDHH_COORDINATR_PORT=7005\nexport COMPOSE_FILE=x.yml\n"
                   "FEDHH_LOG_LEVEL DEBUG\n")
    lines = env.read_text().splitlines()
    code, said, _ = check(stack, capsys)
    assert code == 1
    assert said == [
        f"{env}:{len(lines) - 2}: FEDHH_COORDINATR_PORT is no variable "
        f"{stack}/docker-compose.yml reads, so compose ignores it: did you mean "
        "FEDHH_COORDINATOR_PORT?",
        f"{env}:{len(lines)}: 'FEDHH_LOG_LEVEL DEBUG' is not NAME=VALUE: compose reads each "
        "line as a variable's name, =, and its value (a comment line begins with #)",
    ], said  # (COMPOSE_FILE is compose's own)


def test_a_service_option_made_of_env_values_is_refused_as_the_service_would(
        stack: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, each restarted its service again and again, the reason in its log alone."""
    env = stack / ".env"
    at = edit(env, FEDHH_QUIET_CLOSE_MS="abc", FEDHH_LOG_LEVEL="verbose",
              FEDHH_AGGREGATOR_PUBLIC_HOST="https://fedhh.example.org",
              FEDHH_DEVICE_DATASET="/datasets/users.txt")  # (the container's path: not ours)
    monkeypatch.setenv("FEDHH_LIFETIME_EPS", "-1")  # (the shell's value wins over .env's)
    code, said, _ = check(stack, capsys)
    assert code == 1
    assert said == [  # (in the order of .env's lines, each variable once)
        f"{env}:{at['FEDHH_LOG_LEVEL']}: FEDHH_LOG_LEVEL=verbose: `fedhh device` refuses "
        "--log-level=verbose: one of DEBUG, INFO, WARNING, ERROR",
        f"{env}:{at['FEDHH_AGGREGATOR_PUBLIC_HOST']}: "

        "FEDHH_AGGREGATOR_PUBLIC_HOST=https://fedhh.example.org: `fedhh coordinator` refuses "
        "--aggregator-public-address=https://fedhh.example.org:7100: must be HOST:PORT with a "
        "port 1 to 65535, HOST a name or an IP address, got 'https://fedhh.example.org:7100': "
        "the host holds a colon (a scheme, or a port twice; an IPv6 address goes in brackets, "
        "[::1]:7000)",
        f"{env}:{at['FEDHH_QUIET_CLOSE_MS']}: FEDHH_QUIET_CLOSE_MS=abc: `fedhh aggregator` "
        "refuses --quiet-close-ms=abc: must be an integer, got 'abc'",
        "FEDHH_LIFETIME_EPS=-1 (set in the environment, which overrides .env): `fedhh "
        "coordinator` refuses --lifetime-eps=-1: expected a positive number, got '-1'",
    ], said


def test_two_listeners_on_one_port_are_named(stack: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    env = stack / ".env"
    at = edit(env, FEDHH_GRAFANA_PORT="7001", FEDHH_AGGREGATOR_SESSION_PORT="7180",
              FEDHH_AGGREGATOR_WEB_PORT="7181")
    code, said, _ = check(stack, capsys)
    grafana, session = at["FEDHH_GRAFANA_PORT"], at["FEDHH_AGGREGATOR_SESSION_PORT"]
    coordinator = 1 + env.read_text().splitlines().index("FEDHH_COORDINATOR_SESSION_PORT=7001")
    assert code == 1
    assert said == [
        f"{env}:{coordinator}: FEDHH_COORDINATOR_SESSION_PORT=7001 and {env}:{grafana}: "
        "FEDHH_GRAFANA_PORT=7001: coordinator and grafana both publish host port 7001: give "
        "one of them another port",
        f"{env}:{session}: FEDHH_AGGREGATOR_SESSION_PORT=7180: aggregator listens on port "
        "7180 inside its container for another of its ports already: give another port",
    ], said
    # (one on 127.0.0.1, the other on another address of the host, do not meet)
    edit(env, FEDHH_AGGREGATOR_SESSION_PORT="7101", FEDHH_MONITORING_BIND_ADDRESS="127.0.0.2",
         FEDHH_BIND_ADDRESS="127.0.0.1")
    assert check(stack, capsys)[0] == 0


@pytest.mark.skipif(os.geteuid() == deploy.CONTAINER_ID, reason="this is the containers' user")
def test_secret_files_missing_or_unreadable_by_the_containers_name_the_fix(
        stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = stack / ".env"
    shutil.rmtree(stack / "tls")
    for name in ("control.token", "admin.token"):
        (stack / "secrets" / name).chmod(0o600)
    os.chown(stack / "secrets" / "admin.token", -1, os.getegid())
    code, said, _ = check(stack, capsys)
    uid, gid = os.geteuid(), os.getegid()
    certs = (f"`fedhh certs --out {stack}/tls --secrets {stack}/secrets --owner 10001:10001`")
    tls = 1 + env.read_text().splitlines().index("FEDHH_TLS_DIR=./tls")
    secrets = 1 + env.read_text().splitlines().index("FEDHH_SECRETS_DIR=./secrets")
    assert code == 1
    assert said == [
        f"{stack}/tls: ca.pem, server.pem, server.key ({env}:{tls}: FEDHH_TLS_DIR=./tls): not "
        f"there, and compose stops at a secret file it cannot find; write them with {certs} "
        "(as root; or --group 10001), or set the variable to the folder that holds them",
        f"{stack}/secrets: control.token, admin.token ({env}:{secrets}: "
        f"FEDHH_SECRETS_DIR=./secrets): uid {uid}, gid {gid}, mode 0600, which the services, "
        f"running as uid 10001, gid 10001, cannot read: each would restart again and again; "
        f"run {certs} again as root (it keeps the CA, the tokens and the signing key), or with "
        "--group 10001 as a member of that group",
    ], said


def test_without_env_the_compose_files_defaults_are_checked(
        stack: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (stack / ".env").unlink()
    monkeypatch.chdir(stack)  # (--dir defaults to this folder, which holds the compose file)
    code, out, err = run_cli(["deploy", "check"], capsys)
    assert (code, err) == (0, "")
    assert out == ("fedhh deploy check: no .env, so the defaults in docker-compose.yml: "
                   "nothing to fix; next, from .: docker compose up -d\n")
    monkeypatch.chdir(stack.parent.parent)
    code, out, err = run_cli(["deploy", "check", "--dir", "nowhere"], capsys)
    assert (code, out) == (2, "")
    assert err == ("fedhh deploy check: error: --dir nowhere holds no docker-compose.yml: give "
                   "the folder of the compose file (the repository's deploy/)\n")


def test_every_variable_of_the_compose_file_is_checked_somewhere() -> None:
    """A variable added to deploy/docker-compose.yml is checked as compose reads it, or as the
    service option it makes, or named as the container's to check."""
    compose = (ROOT / "deploy" / "docker-compose.yml").read_text()
    published, options, _ = deploy.compose_layout(compose)
    checked = {*deploy.ROLES, *deploy.INSIDE_CONTAINERS,
               *(name for entry in published for name in (entry.address, entry.port)),
               *(m[0] for _, _, template in options for m in deploy.REFERENCE.findall(template))}
    assert set(deploy.references(compose)) - checked == set()
    # (and the options found are the services' own)
    assert {command for command, _, _ in options} == {
        "aggregator", "coordinator", "device", "selector"}
    assert all(re.fullmatch(r"--[a-z-]+", option) for _, option, _ in options)


@pytest.mark.parametrize("content,where", [
    (b"FEDHH_LOG_LEVEL=INFO\nFEDHH_WEB_ORIGINS=https://caf\xe9.example\n", "2: not UTF-8 text "
     "(invalid continuation byte at byte 50)"),
    # (before, a byte-order mark's three bytes were left out of the count: byte 4 on line 1)
    (b"\xef\xbb\xbfA=1\n\xe9=2\n", "2: not UTF-8 text (invalid continuation byte at byte 7)"),
], ids=["plain", "after-a-byte-order-mark"])
def test_an_env_file_that_is_not_utf8_is_one_line_naming_the_bad_byte(
        stack: Path, capsys: pytest.CaptureFixture[str], content: bytes, where: str) -> None:
    env = stack / ".env"
    env.write_bytes(content)
    code, out, err = run_cli(["deploy", "check", "--dir", str(stack)], capsys)
    assert (code, out) == (2, "")
    assert err == (f"fedhh deploy check: error: {env}:{where}, which compose reads .env as: "
                   "save it as UTF-8\n")


def test_a_nul_in_a_line_is_named_by_its_line(stack: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Before, FEDHH_TLS_DIR holding a NUL was a ValueError traceback (the folder's stat)."""
    env = stack / ".env"
    at = edit(env, FEDHH_TLS_DIR="./tls\0x")["FEDHH_TLS_DIR"]
    code, said, _ = check(stack, capsys)
    assert (code, said) == (1, [f"{env}:{at}: holds a NUL character, which no variable's value "
                                "can: delete it"])


def test_a_values_control_characters_are_shown_escaped(
        stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, the line quoting the value wrote its ESC to the terminal (recolouring what
    follows) and its U+202E (reversing the line)."""
    env = stack / ".env"
    at = edit(env, FEDHH_LOG_LEVEL="\x1b[31mINFO", FEDHH_COORDINATOR_PORT="\u202e0007")
    code, said, _ = check(stack, capsys)
    assert code == 1
    assert sorted(said) == sorted([
        f"{env}:{at['FEDHH_LOG_LEVEL']}: FEDHH_LOG_LEVEL=\\x1b[31mINFO: `fedhh device` refuses "
        "--log-level=\\x1b[31mINFO: one of DEBUG, INFO, WARNING, ERROR",
        f"{env}:{at['FEDHH_COORDINATOR_PORT']}: FEDHH_COORDINATOR_PORT=\\u202e0007: a published "
        "port is a whole number from 1 to 65535 (default 7000)"]), said
