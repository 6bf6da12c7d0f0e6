"""deploy/ without an engine: the compose file parses with a real Compose implementation
(compose_spec), every variable it uses is documented in .env.example, its references resolve,
every service command is a valid `fedhh` invocation, each service mounts only the secrets it
needs, and the build context and git keep secrets out. tests/deploy runs it all for real."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from compose_spec import PyCompose

from fedhh.cli.main import build_parser, main
from fedhh.rpc.device_users import read_tokens
from fedhh_device.main import coordinator_addresses

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)(?::?-([^}]*))?\}")
DEVICES = tuple(f"devices-{i}" for i in range(4))
SERVICES = ("aggregator", "coordinator", "selector", *DEVICES, "admin")
MONITORING = ("prometheus", "grafana")  # the "monitoring" profile (tests/dashboard checks it)


def env_example() -> dict[str, str]:
    values = {}
    for line in (DEPLOY / ".env.example").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key] = value
    return values


def interpolated() -> str:
    env = env_example()
    text = (DEPLOY / "docker-compose.yml").read_text()
    return VARIABLE.sub(lambda m: env.get(m.group(1), m.group(2) or ""), text)


def document() -> dict[str, Any]:
    """The interpolated file with YAML merge keys (<<) resolved, as Compose itself reads it."""
    return dict(yaml.safe_load(interpolated()))


def invocation(spec: dict[str, Any]) -> list[str]:
    """The `fedhh` arguments a service runs (the image's entrypoint is `fedhh`)."""
    entrypoint = spec.get("entrypoint")
    if entrypoint:
        assert entrypoint[0] == "fedhh"
        return [*entrypoint[1:], *spec["command"]]
    return list(spec["command"])


def test_every_variable_is_documented() -> None:
    used = set(VARIABLE.findall((DEPLOY / "docker-compose.yml").read_text()))
    documented = env_example()
    missing = sorted(name for name, _ in used if name not in documented)
    assert not missing, f"document these in .env.example: {missing}"


def test_compose_file_is_valid_compose() -> None:
    doc = document()
    assert "name" not in doc, "Compose v1 rejects a top-level name: (use COMPOSE_PROJECT_NAME)"
    compose = PyCompose.from_yaml(yaml.safe_dump(doc))
    assert sorted(compose.service_names()) == sorted(SERVICES + MONITORING)
    for name in MONITORING:
        assert doc["services"][name]["profiles"] == ["monitoring"], name


def test_references_resolve() -> None:
    doc = document()
    services = doc["services"]
    for name, service in services.items():
        for target in service.get("depends_on", {}):
            assert target in services, f"{name} depends on unknown {target}"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if not source.startswith((".", "/")):
                assert source in doc["volumes"], f"{name}: undeclared volume {source}"
        for secret in service.get("secrets", []):
            assert secret["source"] in doc["secrets"], f"{name}: undeclared secret {secret}"
        build = service.get("build")
        if build:
            assert (DEPLOY / build["context"] / build["dockerfile"]).is_file()
    for name in ("coordinator", "aggregator", "selector"):
        assert services[name]["healthcheck"]["test"][:3] == ["CMD", "fedhh", "health"]


@pytest.mark.parametrize("service", SERVICES)
def test_commands_are_valid_fedhh_invocations(service: str) -> None:
    spec = document()["services"][service]
    parser = build_parser()
    args = parser.parse_args(invocation(spec))
    assert args.command == invocation(spec)[0]
    health = spec.get("healthcheck", {}).get("test")
    if health:
        parser.parse_args(health[2:])


def mounted_secrets(service: str) -> set[str]:
    return {s["target"] for s in document()["services"][service].get("secrets", [])}


def test_each_service_mounts_only_the_secrets_it_needs() -> None:
    for name in DEVICES:
        assert mounted_secrets(name) == {"ca.pem", "device-tokens.txt"}
    assert mounted_secrets("admin") == {"ca.pem", "admin.token"}
    assert mounted_secrets("aggregator") == {"ca.pem", "server.pem", "server.key",
                                             "control.token", "coordinator-signing.pem.pub"}
    # The selectors attach with a token of their own, never the aggregator's control token.
    assert mounted_secrets("selector") == mounted_secrets("aggregator") - {"control.token"} | {
        "selector.token"}
    assert "selector.token" in mounted_secrets("coordinator")
    assert "ca.key" not in {s["file"].rsplit("/", 1)[-1] for s in document()["secrets"].values()}


def test_every_file_a_command_names_under_run_secrets_is_mounted() -> None:
    for name, spec in document()["services"].items():
        if name in MONITORING:
            continue
        named = set(re.findall(r"/run/secrets/([\w.-]+)", " ".join(invocation(spec))))
        tls_dir = "--tls-dir=/run/secrets" in invocation(spec)
        named |= {"server.pem", "server.key", "ca.pem"} if tls_dir else set()
        assert named <= mounted_secrets(name), f"{name}: {named - mounted_secrets(name)}"


def test_each_device_replica_gets_only_its_own_tokens_and_state(tmp_path: Path) -> None:
    """Issue 28: every replica mounted the whole device-tokens.txt, so any one of them (or
    whoever reads its files) could enroll the others' devices. Now replica i mounts only the
    file `fedhh certs` writes for it, whose users are disjoint from the others', and keeps its
    identities in a volume no other service mounts."""
    doc = document()
    services = doc["services"]
    sources = {name: {s["source"] for s in services[name]["secrets"]} - {"ca_cert"}
               for name in DEVICES}
    assert all(len(s) == 1 for s in sources.values()), sources
    files = [doc["secrets"][next(iter(sources[name]))]["file"].rsplit("/", 1)[-1]
             for name in DEVICES]
    assert files == [f"device-tokens-{i}-of-{len(DEVICES)}.txt" for i in range(len(DEVICES))]
    for name, spec in services.items():  # the whole file: the coordinator only
        mounts_all = any(doc["secrets"][s["source"]]["file"].endswith("/device-tokens.txt")
                         for s in spec.get("secrets", []))
        assert mounts_all == (name == "coordinator"), name
    def volumes(spec: dict[str, Any]) -> set[str]:
        return {v.split(":")[0] for v in spec.get("volumes", [])}

    for name in DEVICES:
        others = set().union(*(volumes(spec) for n, spec in services.items() if n != name))
        assert volumes(services[name]) and not volumes(services[name]) & others, name

    # The files `fedhh certs` writes for those names: disjoint users that cover every token.
    assert main(["certs", "--out", str(tmp_path / "tls"), "--secrets", str(tmp_path / "s"),
                 "--device-tokens", "30"]) == 0
    every = (tmp_path / "s" / "device-tokens.txt").read_text().split()
    shares = [read_tokens(tmp_path / "s" / name) for name in files]
    users = [set(share) for share in shares]
    assert sorted(u for mine in users for u in mine) == list(range(len(every)))
    assert all({every[u] for u in share} == set(share.values()) for share in shares)
    assert {len(mine) for mine in users} <= {len(every) // len(DEVICES),
                                             -(-len(every) // len(DEVICES))}


def test_device_replicas_host_their_tokens_users_and_get_the_public_aggregator() -> None:
    services = document()["services"]
    for name in DEVICES:
        devices = invocation(services[name])
        assert "--users=tokens" in devices
        assert "--enrollment-tokens-file=/run/secrets/device-tokens.txt" in devices
        assert any(arg.startswith("--state-dir=/data") for arg in devices)
    public = env_example()["FEDHH_AGGREGATOR_PUBLIC_HOST"]
    port = env_example()["FEDHH_AGGREGATOR_PORT"]
    session_port = env_example()["FEDHH_AGGREGATOR_SESSION_PORT"]
    assert f"--aggregator-public-address={public}:{port}" in invocation(services["coordinator"])
    assert f"--aggregator-session-address={public}:{session_port}" in \
        invocation(services["coordinator"])
    assert public in services["aggregator"]["networks"]["default"]["aliases"]
    for name in ("coordinator", "aggregator", *DEVICES):
        assert any(v.endswith(":/data") for v in services[name]["volumes"]), name


def test_the_aggregator_serves_and_publishes_its_framed_session_port() -> None:
    """The aggregator listens on its framed session port as on its gRPC port (the same port
    inside the network as on the host), publishes both on the same host address, and the
    coordinator names both to devices, which use the session port (their default transport)."""
    env = env_example()
    services = document()["services"]
    aggregator = build_parser().parse_args(invocation(services["aggregator"]))
    grpc_port, session_port = env["FEDHH_AGGREGATOR_PORT"], env["FEDHH_AGGREGATOR_SESSION_PORT"]
    assert session_port != grpc_port
    assert aggregator.listen == f"0.0.0.0:{grpc_port}"
    assert aggregator.session_listen == f"0.0.0.0:{session_port}"
    published = services["aggregator"]["ports"]
    bind = env["FEDHH_BIND_ADDRESS"]
    for port in (grpc_port, session_port):
        assert f"{bind}:{port}:{port}" in published, (port, published)
    coordinator = build_parser().parse_args(invocation(services["coordinator"]))
    public = env["FEDHH_AGGREGATOR_PUBLIC_HOST"]
    assert coordinator.aggregator_public_address == f"{public}:{grpc_port}"
    assert coordinator.aggregator_session_address == f"{public}:{session_port}"
    for name in DEVICES:
        devices = build_parser().parse_args(invocation(services[name]))
        assert devices.aggregator_transport == "framed", name
    # Every host port the file publishes is a different one.
    host_ports = [spec.rsplit(":", 2)[1] for s in services.values()
                  for spec in s.get("ports", [])]
    assert len(host_ports) == len(set(host_ports)), host_ports



def test_the_coordinator_and_selector_serve_their_framed_port_and_devices_name_it() -> None:
    """The coordinator and the selector also serve the device calls (GetTask, Enroll) on their
    framed port (--session-listen) beside gRPC; the coordinator publishes it, for devices
    outside the host, on the same host address as its gRPC port; the simulated devices name the
    selector's after its gRPC port (--coordinator GRPC=FRAMED) and use it (their default)."""
    env = env_example()
    services = document()["services"]
    parsed = {name: build_parser().parse_args(invocation(services[name]))
              for name in ("coordinator", "selector")}
    for name, args in parsed.items():
        assert args.listen == "0.0.0.0:7000", name
        assert args.session_listen == "0.0.0.0:7001", name
    bind = env["FEDHH_BIND_ADDRESS"]
    published = services["coordinator"]["ports"]
    for host_port, port in ((env["FEDHH_COORDINATOR_PORT"], 7000),
                            (env["FEDHH_COORDINATOR_SESSION_PORT"], 7001)):
        assert f"{bind}:{host_port}:{port}" in published, (port, published)
    assert env["FEDHH_COORDINATOR_SESSION_PORT"] != env["FEDHH_COORDINATOR_PORT"]
    for name in DEVICES:
        devices = build_parser().parse_args(invocation(services[name]))
        assert coordinator_addresses(devices.coordinator) == [("selector:7000",
                                                               "selector:7001")], name
        assert devices.task_transport == "framed", name

def test_dockerfile_installs_every_package_dir_and_takes_its_base_as_an_argument() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    for part in ("fedhh", "server", "aggregator", "device", "pyproject.toml"):
        assert f"COPY {part}" in dockerfile
    assert "ARG BASE_IMAGE=python:3.11-slim" in dockerfile
    assert "--no-index --find-links" in dockerfile
    assert "USER 10001:10001" in dockerfile


def test_build_context_and_git_keep_secrets_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignored[ignored.index("*") + 1:].count("!deploy/wheelhouse") == 1
    assert not [line for line in ignored if line.startswith("!") and
                line[1:] in (".venv", "cache", ".git", "deploy/tls", "deploy/secrets")]
    gitignore = (ROOT / ".gitignore").read_text().splitlines()
    for entry in ("/deploy/tls/", "/deploy/secrets/", "/deploy/.env", "/deploy/wheelhouse/*"):
        assert entry in gitignore


def test_a_health_check_may_take_what_a_loaded_host_needs() -> None:
    """Each check starts a `fedhh health` process (Python and gRPC): 5.5 to 13.5 s on a host at
    a load of 27 on 2 cores. With the 5 s limit this was, every check there timed out, each
    service read unhealthy while it served, and `up -d` stopped before starting the devices."""
    seconds = {"s": 1, "m": 60}
    for name in ("coordinator", "aggregator", "selector"):
        timeout = document()["services"][name]["healthcheck"]["timeout"]
        assert int(timeout[:-1]) * seconds[timeout[-1]] >= 30, (name, timeout)


def option_variables(command: list[str]) -> dict[str, list[str]]:
    """The .env variables each `--option=` of a command (uninterpolated) is made of."""
    found: dict[str, list[str]] = {}
    for word in command:
        option, _, value = word.partition("=")
        names = [name for name, _ in VARIABLE.findall(value)]
        if option.startswith("--") and names:
            found[option] = list(dict.fromkeys(found.get(option, []) + names))
    return found


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_says_which_env_variables_its_options_are_made_of(service: str) -> None:
    """FEDHH_OPTIONS_FROM_ENV, which the CLI's errors read, holds what the command uses: an
    option given a new variable, or a new option, without it would be named alone again."""
    spec = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"][service]
    said = spec.get("environment", {}).get("FEDHH_OPTIONS_FROM_ENV", "")
    declared = {option: names.split(",") for option, _, names in
                (word.partition("=") for word in said.split())}
    assert declared == option_variables(invocation(spec))


@pytest.mark.parametrize(("service", "variable", "value", "said"), [
    ("aggregator", "FEDHH_QUIET_CLOSE_MS", "abc", "must be an integer, got 'abc'"),
    ("aggregator", "FEDHH_AGGREGATOR_PORT", "70000", "must be a port"),
    ("coordinator", "FEDHH_LIFETIME_EPS", "ten", "must be a number, got 'ten'"),
    ("coordinator", "FEDHH_BUDGET_PERIOD_DAYS", "-1", "got '-1'"),
    # (the address devices are told, made of two variables: both named)
    ("coordinator", "FEDHH_AGGREGATOR_PUBLIC_HOST", "https://fedhh.example.org",
     "FEDHH_AGGREGATOR_PUBLIC_HOST or FEDHH_AGGREGATOR_PORT (deploy/.env, given as "
     "--aggregator-public-address): must be HOST:PORT"),
    ("selector", "FEDHH_LOG_LEVEL", "LOUD", "invalid choice: 'LOUD'"),
    ("devices-2", "FEDHH_LOG_LEVEL", "VERBOSE", "invalid choice: 'VERBOSE'"),
])
def test_a_refused_env_value_is_named_by_its_variable(
        service: str, variable: str, value: str, said: str,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The operator edits deploy/.env: a value a service refuses is named by its variable
    (before, by the option alone, "argument --quiet-close-ms: must be an integer", an option
    they never typed, in `docker compose logs`)."""
    env = {**env_example(), variable: value}
    text = VARIABLE.sub(lambda m: env.get(m.group(1), m.group(2) or ""),
                        (DEPLOY / "docker-compose.yml").read_text())
    spec = yaml.safe_load(text)["services"][service]
    monkeypatch.setenv("FEDHH_OPTIONS_FROM_ENV", spec["environment"]["FEDHH_OPTIONS_FROM_ENV"])
    with pytest.raises(SystemExit) as stop:
        main(invocation(spec))
    assert stop.value.code == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"fedhh {spec['command'][0]}: error: {variable} "), line
    assert "(deploy/.env, given as --" in line and said in line and "\n" not in line, line
