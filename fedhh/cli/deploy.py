"""`fedhh deploy check`: deploy/.env and the files compose mounts, checked before `up`.

    fedhh deploy check [--dir deploy]

docker compose reads part of .env itself (the published ports and their addresses, the images,
the health checks' durations, where the TLS files and secrets lie) and refuses a bad value in
its own words, naming neither the line nor the fix, some only at `up`, once other containers
have started; a misspelt variable it ignores, its default used. The rest reaches the services
as options, and a bad one restarts its service again and again. This reads the .env as compose
does (a variable set in the shell overrides it) and names each line that either would refuse,
why, and what to write; each secret file missing or unreadable by the containers' user (uid
10001); and two services publishing one host port. Exit 0 when nothing is wrong, else 1.
"""

from __future__ import annotations

import argparse
import codecs
import ipaddress
import os
import re
import stat
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

COMPOSE_FILE = "docker-compose.yml"
CONTAINER_ID = 10001  # deploy/Dockerfile's user and group
REFERENCE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")
# A ports entry whose host address and port come from .env: "${ADDR:-a}:${PORT:-p}:CONTAINER"
PUBLISHED = re.compile(r'^\s*- "\$\{(\w+):-[^}]*\}:\$\{(\w+):-[^}]*\}:(.+)"\s*$')
# A service option made of .env values, the command word it belongs to given before it
OPTION = re.compile(r"^\s*- (--[\w-]+)=(.*\$\{.*)$")
COMMAND_WORD = re.compile(r"^\s*- (aggregator|coordinator|selector|device)\s*$")
# Compose's own variables, and Docker's, which .env may set beside the stack's
COMPOSE_OWN = ("COMPOSE_", "DOCKER_")
# Docker's image reference: [registry[:port]/]name[/name...][:tag][@digest], names lowercase
IMAGE = re.compile(r"(?:[a-zA-Z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
                   r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
                   r"(?::[\w][\w.-]{0,127})?(?:@[a-z0-9]+:[0-9a-fA-F]{32,})?")
# A Go duration as compose's health checks read it (Compose v1 wants the units in this order)
DURATION = re.compile(r"(?:(?:\d+\.?\d*|\.\d+)h)?(?:(?:\d+\.?\d*|\.\d+)m)?"
                      r"(?:(?:\d+\.?\d*|\.\d+)s)?(?:(?:\d+\.?\d*|\.\d+)ms)?"
                      r"(?:(?:\d+\.?\d*|\.\d+)(?:us|µs))?(?:(?:\d+\.?\d*|\.\d+)ns)?")
# Prometheus's --storage.tsdb.retention.time
RETENTION = re.compile(r"(?:\d+y)?(?:\d+w)?(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?(?:\d+ms)?")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "deploy", help="check deploy/.env and the secrets before docker compose up",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="action", required=True, parser_class=type(parser))
    check = actions.add_parser(
        "check", help="name each .env line compose or a service would refuse, and the fix",
        description="Name each line of .env that docker compose or a service would refuse, "
                    "why and what to write; each secret file compose mounts that is missing "
                    "or that the containers' user cannot read; and two services publishing "
                    "one host port. Exit 0 when nothing is wrong, else 1.")
    check.add_argument("--dir", type=Path, default=None,
                       help=f"the folder of {COMPOSE_FILE} and .env (default: this folder "
                            f"if it holds {COMPOSE_FILE}, else ./deploy)")
    check.set_defaults(handler=run)


@dataclass(frozen=True)
class Setting:
    """A variable's value as compose would use it, and where it was set."""

    name: str
    value: str
    where: str  # "deploy/.env:12", "the environment", or "" for the compose file's default

    def told(self) -> str:
        said = f"{self.name}={self.value}"
        if self.where == "the environment":
            return f"{said} (set in the environment, which overrides .env)"
        return f"{self.where}: {said}" if self.where else f"{said} (the default)"


def read_env(path: Path) -> tuple[dict[str, tuple[str, int]], list[str]]:
    """``path``'s variables as compose reads them (NAME=VALUE lines, # comments, an optional
    `export `, a value in quotes taken whole, an unquoted one cut at " #"), each with its line
    number; and the lines it cannot read."""
    from fedhh.errors import ConfigError

    values: dict[str, tuple[str, int]] = {}
    problems = []
    data = path.read_bytes()
    # (the mark dropped by hand: "utf-8-sig"'s error counted from after it, and named the
    # line before where the bad byte stood on the first bytes of the second line)
    mark = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[mark:].decode("utf-8")
    except UnicodeDecodeError as error:
        start = mark + error.start
        at = data[:start].count(b"\n") + 1
        raise ConfigError(f"{path}:{at}: not UTF-8 text ({error.reason} at byte "
                          f"{start}), which compose reads .env as: save it as UTF-8"
                          ) from None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "\0" in line:
            # (no variable can carry it: a secret folder's path holding one was a ValueError
            # traceback at its stat)
            problems.append(f"{path}:{number}: holds a NUL character, which no variable's "
                            "value can: delete it")
            continue
        name, sep, value = line.removeprefix("export ").partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_]\w*", name):
            problems.append(f"{path}:{number}: {raw.strip()!r} is not NAME=VALUE: compose "
                            "reads each line as a variable's name, =, and its value (a "
                            "comment line begins with #)")
            continue
        if value[:1] in ("'", '"') and value.endswith(value[0]) and len(value) > 1:
            value = value[1:-1]
        else:
            value = re.split(r"\s+#", value, maxsplit=1)[0]
        values[name] = (value, number)
    return values, problems


def references(compose: str) -> dict[str, str]:
    """Each variable the compose file uses, with its default there."""
    found: dict[str, str] = {}
    for match in REFERENCE.finditer(compose):
        found.setdefault(match[1], match[2] or "")
    return found


def settings(defaults: Mapping[str, str], env: Mapping[str, tuple[str, int]], env_path: Path,
             environ: Mapping[str, str]) -> dict[str, Setting]:
    """What compose uses for each variable: the shell's value, else .env's, else the default."""
    chosen = {}
    for name, default in defaults.items():
        if name in environ:
            chosen[name] = Setting(name, environ[name], "the environment")
        elif name in env:
            value, line = env[name]
            chosen[name] = Setting(name, value, f"{env_path}:{line}")
        else:
            chosen[name] = Setting(name, default, "")
    return chosen


def value_problem(name: str, value: str, role: str) -> str | None:
    """Why compose cannot use ``value`` in ``role``, and what to write; None if it can."""
    if role == "port":
        if value.isascii() and value.isdigit() and 1 <= int(value) <= 65535:
            return None
        return "a published port is a whole number from 1 to 65535"
    if role == "address":
        try:
            ipaddress.ip_address(value.removeprefix("[").removesuffix("]"))
            return None
        except ValueError:
            return ("the host address a port is published on is an IP address of this host, "
                    "not a name: 0.0.0.0 (every interface), 127.0.0.1 (this host alone) or one "
                    "of its own")
    if role == "duration":
        if value and DURATION.fullmatch(value) and re.search(r"[1-9]", value):
            return None
        return "a health check's duration is a number with its unit: 500ms, 30s, 2m, 1m30s"
    if role == "image":
        if IMAGE.fullmatch(value) and len(value) <= 255:
            return None
        return ("an image is NAME[:TAG] in lowercase, e.g. fedhh:latest or "
                "registry.example.org/fedhh:1.0")
    if role == "flag":
        return None if value in ("0", "1") else "0 (install from the package index) or 1 " \
            "(only from deploy/wheelhouse)"
    if role == "retention":
        if value and RETENTION.fullmatch(value):
            return None
        return "Prometheus keeps samples for a duration such as 15d, 12h or 2w"
    if role == "folder":
        return None if value else "the folder, relative to the compose file's, e.g. ./tls"
    raise AssertionError(role)


# The variables compose reads itself, by what they are; the published ports and their
# addresses are read from the compose file's ports entries.
ROLES = {
    "FEDHH_IMAGE": "image", "FEDHH_BASE_IMAGE": "image",
    "FEDHH_PROMETHEUS_IMAGE": "image", "FEDHH_GRAFANA_IMAGE": "image",
    "FEDHH_OFFLINE_BUILD": "flag",
    "FEDHH_HEALTHCHECK_INTERVAL": "duration", "FEDHH_HEALTHCHECK_TIMEOUT": "duration",
    "FEDHH_PROMETHEUS_RETENTION": "retention",
    "FEDHH_TLS_DIR": "folder", "FEDHH_SECRETS_DIR": "folder",
}
# Read by a service from a path inside its container, which this host cannot check
INSIDE_CONTAINERS = ("FEDHH_DEVICE_DATASET",)


@dataclass(frozen=True)
class Published:
    service: str
    address: str  # the variables' names
    port: str
    container: str  # the container's port, a number or a variable reference


def compose_layout(compose: str) -> tuple[list[Published], list[tuple[str, str, str]],
                                          list[str]]:
    """From the compose file's text: its published ports; each service option made of .env
    values (command, option, template); and the secret files (templates)."""
    published, options, secrets = [], [], []
    service, command, section = "", "", ""
    for line in compose.splitlines():
        top = re.match(r"^([\w-]+):", line)
        if top:
            section, service, command = top[1], "", ""
            continue
        header = re.match(r"^  ([\w-]+):\s*$", line)
        if header and section == "services":
            service, command = header[1], ""
            continue
        word = COMMAND_WORD.match(line)
        if word:
            command = word[1]
        ports = PUBLISHED.match(line)
        if ports:
            published.append(Published(service, ports[1], ports[2], ports[3]))
        option = OPTION.match(line)
        if option and command:
            options.append((command, option[1], option[2].strip()))
        secret = re.match(r"^\s+file: (.+)$", line)
        if secret and section == "secrets":
            secrets.append(secret[1].strip())
    return published, options, secrets


def fill(template: str, chosen: Mapping[str, Setting]) -> str:
    return REFERENCE.sub(lambda m: chosen[m[1]].value if m[1] in chosen else m[2] or "",
                         template)


def option_problem(command: str, option: str, value: str) -> str | None:
    """Why `fedhh COMMAND` refuses OPTION=VALUE as it reads its options; None if it does not.
    (Checks after parsing, such as a dataset's path, are the service's.)"""
    from fedhh.cli.main import build_parser

    parser = build_parser(only=command)
    sub = next(a for a in parser._actions  # argparse keeps its actions private
               if isinstance(a, argparse._SubParsersAction)).choices[command]
    action = sub._option_string_actions[option]
    if action.nargs == 0:
        return None
    converted: object = value
    if callable(action.type):
        try:
            converted = action.type(value)
        except argparse.ArgumentTypeError as error:
            return str(error)
        except (TypeError, ValueError):
            return f"not a {getattr(action.type, '__name__', 'valid value')}: {value!r}"
    if action.choices is not None and converted not in action.choices:
        return f"one of {', '.join(map(str, action.choices))}"
    return None


def readable_by_containers(info: os.stat_result) -> bool:
    mode = info.st_mode
    return bool((info.st_uid == CONTAINER_ID and mode & stat.S_IRUSR)
                or (info.st_gid == CONTAINER_ID and mode & stat.S_IRGRP)
                or mode & stat.S_IROTH)


def secret_problems(folder: Path, templates: list[str],
                    chosen: Mapping[str, Setting]) -> Iterator[str]:
    """The secret files compose would not find, or whose containers could not read them: one
    line for each folder and cause."""
    def under(template: str) -> str:
        return os.path.normpath(folder / fill(template, chosen))

    certs = (f"fedhh certs --out {under('${FEDHH_TLS_DIR}')} --secrets "
             f"{under('${FEDHH_SECRETS_DIR}')} --owner {CONTAINER_ID}:{CONTAINER_ID}")
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for template in templates:
        path = Path(under(template))
        variables = ", ".join(chosen[m[0]].told() for m in REFERENCE.findall(template)
                              if m[0] in chosen)
        try:
            info = path.stat()
        except FileNotFoundError:
            cause = "missing"
        except OSError as error:
            cause = error.strerror or "unreadable"
        else:
            cause = ("not a file" if not stat.S_ISREG(info.st_mode) else "" if
                     readable_by_containers(info) else
                     f"uid {info.st_uid}, gid {info.st_gid}, mode "
                     f"{stat.S_IMODE(info.st_mode):04o}")
        if cause:
            grouped.setdefault((str(path.parent), variables, cause), []).append(path.name)
    for (parent, variables, cause), names in grouped.items():
        files = f"{parent}: {', '.join(names)} ({variables})"
        if cause == "missing":
            yield (f"{files}: not there, and compose stops at a secret file it cannot find; "
                   f"write them with `{certs}` (as root; or --group {CONTAINER_ID}), or set "
                   "the variable to the folder that holds them")
        elif cause == "not a file":
            yield f"{files}: not a file, where compose mounts a secret file"
        elif cause.startswith("uid "):
            yield (f"{files}: {cause}, which the services, running as uid {CONTAINER_ID}, gid "
                   f"{CONTAINER_ID}, cannot read: each would restart again and again; run "
                   f"`{certs}` again as root (it keeps the CA, the tokens and the signing key), "
                   f"or with --group {CONTAINER_ID} as a member of that group")
        else:
            yield f"{files}: {cause}"

def port_problems(published: list[Published], chosen: Mapping[str, Setting]) -> Iterator[str]:
    """Two entries publishing one host port on addresses that meet, and two of a service's
    listeners on one container port."""
    def meet(a: str, b: str) -> bool:
        return a.strip("[]") == b.strip("[]") or bool({a, b} & {"0.0.0.0", "::", "[::]"})

    seen: list[Published] = []
    for entry in published:
        address, port = chosen[entry.address].value, chosen[entry.port].value
        if value_problem(entry.port, port, "port") or \
                value_problem(entry.address, address, "address"):
            continue  # (said once, as a value)
        for other in seen:
            if chosen[other.port].value == port and entry.port != other.port \
                    and meet(chosen[other.address].value, address):
                both = (f"{entry.service} publishes host port {port} twice"
                        if entry.service == other.service else
                        f"{other.service} and {entry.service} both publish host port {port}")
                yield (f"{chosen[other.port].told()} and {chosen[entry.port].told()}: {both}: "
                       "give one of them another port")
        seen.append(entry)
    inside: dict[tuple[str, str], Published] = {}
    for entry in published:
        port = fill(entry.container, chosen)
        other = inside.setdefault((entry.service, port), entry)
        named = [m[0] for e in (other, entry) for m in REFERENCE.findall(e.container)]
        if other is not entry and named and not any(
                value_problem(name, chosen[name].value, "port") for name in named):
            yield (f"{'; '.join(chosen[name].told() for name in named)}: {entry.service} "
                   f"listens on port {port} inside its container for another of its ports "
                   "already: give another port")


def problems(folder: Path, environ: Mapping[str, str]) -> tuple[list[str], str]:
    """Every problem found, and a line on what was read."""
    from fedhh.cli.main import _guess

    compose_path = folder / COMPOSE_FILE
    compose = compose_path.read_text(encoding="utf-8")
    defaults = references(compose)
    env_path = folder / ".env"
    env, found = (read_env(env_path) if env_path.is_file() else ({}, []))
    chosen = settings(defaults, env, env_path, environ)
    for name, (_, line) in env.items():
        if name not in defaults and not name.startswith(COMPOSE_OWN):
            close, _ = _guess(name, sorted(defaults))
            found.append(f"{env_path}:{line}: {name} is no variable {compose_path} reads, so "
                         "compose ignores it" + (f": did you mean {close[0]}?" if close else ""))
    published, service_options, secrets = compose_layout(compose)
    roles = dict(ROLES)
    for entry in published:
        roles[entry.address], roles[entry.port] = "address", "port"
    said: set[str] = set()  # the variables whose value is refused already
    for name, role in roles.items():
        if name in chosen:
            why = value_problem(name, chosen[name].value, role)
            if why:
                default = f" (default {defaults[name]})" if defaults[name] else ""
                found.append(f"{chosen[name].told()}: {why}{default}")
                said.add(name)
    for command, option, template in service_options:
        names = list(dict.fromkeys(m[0] for m in REFERENCE.findall(template)))
        if said.intersection(names) or set(INSIDE_CONTAINERS).intersection(names):
            continue  # (said once, or the container's to check)
        value = fill(template, chosen)
        why = option_problem(command, option, value)
        if why:
            # (the variable whose default would make the value good, where one alone would)
            blamed = [name for name in names if len(names) > 1 and option_problem(
                command, option, fill(template, {**chosen, name: Setting(
                    name, defaults[name], "")})) is None] or names
            told = "; ".join(chosen[name].told() for name in blamed)
            found.append(f"{told}: `fedhh {command}` refuses {option}={value}: {why}")
            said.update(names)
    found.extend(port_problems(published, chosen))
    found.extend(secret_problems(folder, secrets, chosen))
    if env_path.is_file():
        read = f"{env_path} ({len(env)} values)"
    else:
        read = f"no {env_path}, so the defaults in {compose_path}"
    # (in the order of .env's lines, then the rest)
    at = re.compile(rf"^{re.escape(str(env_path))}:(\d+): ")
    found.sort(key=lambda line: int(m[1]) if (m := at.match(line)) else sys.maxsize)
    return found, read


def run(args: argparse.Namespace) -> int:
    from fedhh.errors import ConfigError

    folder = args.dir
    if folder is None:
        folder = Path(".") if Path(COMPOSE_FILE).is_file() else Path("deploy")
    if not (folder / COMPOSE_FILE).is_file():
        raise ConfigError(f"--dir {folder} holds no {COMPOSE_FILE}: give the folder of the "
                          "compose file (the repository's deploy/)")
    from fedhh.codec.shown import message_text

    found, read = problems(folder, os.environ)
    for line in found:
        # (a value's control or bidirectional characters escaped: before, a value holding
        # ESC recoloured the terminal, and one holding U+202E reversed its line)
        print(message_text(line))
    if found:
        print(f"fedhh deploy check: {len(found)} to fix (read {read}); then run this again",
              file=sys.stderr)
        return 1
    print(f"fedhh deploy check: {read}: nothing to fix; next, from {folder}: "
          "docker compose up -d")
    return 0
