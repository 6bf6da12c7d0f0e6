"""deploy/: the compose file parses with a real Compose implementation (compose_spec), every
variable it uses is documented in .env.example, its references resolve, and every service
command is a valid `fedhh` invocation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from compose_spec import PyCompose

from fedhh.cli.main import build_parser

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)(?::?-([^}]*))?\}")


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


def test_every_variable_is_documented() -> None:
    used = set(VARIABLE.findall((DEPLOY / "docker-compose.yml").read_text()))
    documented = env_example()
    missing = sorted(name for name, _ in used if name not in documented)
    assert not missing, f"document these in .env.example: {missing}"


def test_compose_file_is_valid_compose() -> None:
    compose = PyCompose.from_yaml(interpolated())
    assert sorted(compose.service_names()) == ["aggregator", "coordinator", "devices"]


def test_references_resolve() -> None:
    doc = yaml.safe_load(interpolated())
    services = doc["services"]
    for name, service in services.items():
        for target in service.get("depends_on", {}):
            assert target in services, f"{name} depends on unknown {target}"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if not source.startswith((".", "/")):
                assert source in doc["volumes"], f"{name}: undeclared volume {source}"
        for secret in service.get("secrets", []):
            assert secret in doc["secrets"], f"{name}: undeclared secret {secret}"
        build = service.get("build")
        if build:
            assert (DEPLOY / build["context"] / build["dockerfile"]).is_file()
    assert "healthcheck" in services["coordinator"] and "healthcheck" in services["aggregator"]


@pytest.mark.parametrize("service", ["coordinator", "aggregator", "devices"])
def test_commands_are_valid_fedhh_invocations(service: str) -> None:
    doc = yaml.safe_load(interpolated())
    parser = build_parser()
    spec = doc["services"][service]
    args = parser.parse_args(spec["command"])
    assert args.command == spec["command"][0]
    health = spec.get("healthcheck", {}).get("test")
    if health:
        assert health[:2] == ["CMD", "fedhh"]
        parser.parse_args(health[2:])


def test_dockerfile_installs_every_package_dir() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    for part in ("fedhh", "server", "aggregator", "device", "pyproject.toml"):
        assert f"COPY {part}" in dockerfile
