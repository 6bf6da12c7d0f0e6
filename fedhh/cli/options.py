"""Option value parsers shared by subcommands: each rejects a bad value with a message that
argparse prefixes with the option's name."""

from __future__ import annotations

import argparse
import ipaddress
import math
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedhh.errors import ConfigError
from fedhh.integers import read_integer, read_number
from fedhh.output_paths import (  # noqa: F401 - the CLI's options, kept importable here
    STDOUT,
    check_output,
    check_output_dir,
    write_output,
)

if TYPE_CHECKING:
    from fedhh.config import RunConfig

# What each column of the tables of rounds (`fedhh up`'s, `fedhh simulate`'s) counts: their
# headings were explained nowhere, a new operator's first table.
ROUND_COLUMNS = {
    "s": "the bits a round adds to each prefix",
    "domain": "prefixes x 2^s, the entries each device reports",
    "n": "the devices that reported",
    "tau": "PruneHH's threshold multiplier",
    "kept": "elements over the threshold, the count in devices an element's estimate had to "
            "clear",
    "exp-fp": "how many of the kept noise alone is expected to lift",
    "found": "items that ended there, listed below",
    "cut": "prefixes listed unfinished, ending in \u2026",
    "not queried": "kept prefixes the next round left out (below)",
    "next s": "the segment the round chose for the next",
    "FP": "kept elements no device holds (the simulation knows the data)",
}
ROUND_COLUMNS["E[FP]"] = ROUND_COLUMNS["exp-fp"]


def round_columns_legend(headings: Sequence[str]) -> str:
    """One line saying what the ``headings`` of a table of rounds that need saying count."""
    return "(" + "; ".join(f"{name}: {ROUND_COLUMNS[name]}" for name in headings
                           if name in ROUND_COLUMNS) + ")"


# What matplotlib can write, by file suffix (--plot); without one it would append ".png".
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff",
                 ".webp")


def integer_in(minimum: int, maximum: int | None = None,
               why: str = "") -> Callable[[str], int]:
    """The option type of an integer from ``minimum`` to ``maximum`` (None: no upper bound),
    the one every command's counts use, so that each says the same of the same mistake with
    the allowed range: "must be an integer >= 1, got 0", "must be at most 1,024 ``why``, got
    5000". The text is read by ``fedhh.integers.read_integer``, as a run's integer knobs are:
    integral scientific notation such as 1e7 or 1.6e6 is the integer, exactly (the notation the
    README writes populations in), and so is 4.0; 1.5, 1e-3, inf and nan are refused. (Before,
    each command had its own copy, and the aggregator took Python's int: --max-rounds 1e3 was
    "invalid int value", and its float options took inf.)"""
    def parse(text: str) -> int:
        try:
            value = read_integer(text)  # (exact: fedhh/integers.py)
        except ConfigError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        shown = text if len(text) <= 24 else _shown_integer(value)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {shown}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(
                f"must be at most {maximum:,}{' ' + why if why else ''}, got {shown}")
        return value

    return parse


def _shown_integer(value: int) -> str:
    """A long integer in a refusal as 1e+300 (not its hundreds of digits)."""
    try:
        return f"{float(value):.3g}"
    except OverflowError:
        return "less than -1e+308" if value < 0 else "more than 1e+308"


#: An integer >= 1 (:func:`integer_in`).
positive_int = integer_in(1)
#: An integer >= 0 (:func:`integer_in`).
non_negative_int = integer_in(0)


def number_in(check: Callable[[float], bool], what: str) -> Callable[[str], float]:
    """The option type of a finite number for which ``check`` holds, ``what`` saying which
    ("positive and finite", "in (0, 1]"): "must be in (0, 1], got 2". inf and nan are always
    refused (inf passes "> 0": a ``what`` of an unbounded range says finite)."""
    def parse(text: str) -> float:
        value = _number(text)
        if not (math.isfinite(value) and check(value)):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
        return value

    return parse


def _number(text: str) -> float:
    """``text`` read by ``fedhh.integers.read_number`` (ASCII digits, no '_'), its refusal
    argparse's."""
    try:
        return read_number(text)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def positive_float(text: str) -> float:
    value = _number(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    value = _number(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def probability(text: str) -> float:
    """A number in (0, 1]."""
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


def drop_rate(text: str) -> float:
    """A fraction of devices that drop out: a number in [0, 1)."""
    value = non_negative_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}")
    return value


def open_unit(text: str) -> float:
    """A number in (0, 1)."""
    value = positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def port_number(text: str) -> int:
    """A TCP port to listen on: 0 (the OS chooses) to 65535."""
    if not (text.isascii() and text.isdigit()) or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"must be a port, 0 to 65535 (0: the OS chooses), "
                                         f"got {text!r}")
    return int(text)


def listen_address(text: str) -> str:
    """HOST:PORT to listen on (``[::1]:PORT`` for IPv6), PORT 0 to 65535 (0: the OS chooses):
    out of range, the port was taken modulo 65536 (99999 served on 34463)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"must be HOST:PORT, got {text!r}")
    port_number(port)
    return text


def remote_address(text: str) -> str:
    """HOST:PORT of a service to dial, PORT 1 to 65535: checked as the command starts, not
    when the first call fails (a coordinator dials its aggregator only when a run starts)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit()) \
            or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"must be HOST:PORT with a port 1 to 65535, got "
                                         f"{text!r}")
    # A host with a scheme, a path, a port of its own, a space (compose's
    # FEDHH_AGGREGATOR_PUBLIC_HOST=https://fedhh.example.org made the address devices are told
    # "https://fedhh.example.org:7100", accepted until every device failed to dial it) or any
    # other character no host name has (bad_host! was accepted, and failed at the first call)
    bracketed = re.fullmatch(r"\[([0-9A-Fa-f:.]+)(%[\w.-]+)?\]", host)
    if bracketed:
        # (brackets hold an IPv6 address alone: [1.2.3.4] and [:::] were accepted and failed
        # at the first call)
        if _is_ipv6(bracketed.group(1)):
            return text
        problem: str | None = (f"holds {bracketed.group(1)!r} in brackets, which hold an IPv6 "
                               "address alone ([::1]:7000; an IPv4 address goes bare)")
    elif ":" in host:
        problem = ("holds a colon (a scheme, or a port twice; an IPv6 address goes in "
                   "brackets, [::1]:7000)")
    elif host == ".":
        problem = "is a dot alone"
    else:
        problem = host_problem(host.removesuffix("."))
    if problem is not None:
        raise argparse.ArgumentTypeError(
            f"must be HOST:PORT with a port 1 to 65535, HOST a name or an IP address, got "
            f"{text!r}: the host {problem}")
    return text


def _is_ipv6(text: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv6Address)
    except ValueError:
        return False


DNS_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def host_problem(host: str) -> str | None:
    """Why ``host`` is not a host name, or None: an IP address, or a DNS name of labels of 1 to
    63 characters (no wildcard: a server certificate names each host; ``fedhh certs``)."""
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    if not host:
        return "is empty (two commas in a row, or one at an end)"
    if any(c.isspace() for c in host):
        return "contains a space"
    if "*" in host:
        return "is a wildcard: name each host"
    if not host.isascii():
        return "is not ASCII; give an international name in its xn-- form"
    if len(host) > 253:
        return f"is {len(host)} characters long; a DNS name has at most 253"
    for label in host.split("."):
        if not label:
            return "has an empty label (two dots in a row, or a dot at an end)"
        if len(label) > 63:
            return f"has a label of {len(label)} characters; a DNS label has at most 63"
        if not DNS_LABEL.fullmatch(label):
            return (f"has the label {label!r}: a label is letters, digits, hyphens (not at "
                    "either end) and underscores")
    if host.rsplit(".", 1)[-1].isdigit():
        # (a resolver reads 1.2.3.999 or 2130706433 as an IPv4 address, or fails: no top-level
        # domain is digits alone, RFC 3696 section 2)
        return "ends in a label of digits alone, as an IPv4 address does, but is not one"
    return None


def connection_problem(details: str, address: str | None, ca: str | None,
                       tls_name: str | None = None, ca_option: str = "--ca"
                       ) -> tuple[str, bool]:
    """Why a gRPC call to ``address`` found no service, from the details of its UNAVAILABLE,
    and what to do: (the explanation, or "" when the details say nothing known; whether it is
    a mistake of the caller's that waiting will not mend: a certificate the CA does not sign
    or that does not name the address, a port that is not gRPC, TLS against plaintext).
    gRPC's own words (``Tls handshake failed ... BAD_SIGNATURE: certificate signature failure:
    OK``, ``Cannot check peer: missing selected ALPN property``) name none of these.
    ``ca_option``: where the caller's CA comes from (a service's --tls-dir holds its ca.pem)."""
    where = address or "the service"
    host = tls_name or (address.rpartition(":")[0].strip("[]") if address else "its name")
    lowered = details.lower()
    if "hostname verification" in lowered:
        names = certificate_names(address) if address else []
        held = f", only for {', '.join(names)}" if names else ""
        return (f"the certificate served at {where} is not valid for {host}{held}: dial the "
                f"service by a name it holds, or add {host} to it with fedhh certs --hosts "
                f"...,{host} and restart the services that serve it"), True
    if "expired" in lowered:
        return (f"the certificate served at {where} has expired: renew it (fedhh certs again, "
                "or your PKI) and restart the services that serve it"), True
    if any(word in lowered for word in ("bad_signature", "certificate_verify_failed",
                                        "certificate verify failed", "unknown ca",
                                        "local issuer", "self signed", "self-signed")):
        give = ("give --ca the ca.pem" if ca_option == "--ca" else
                f"{ca_option} must hold the ca.pem")
        return (f"the certificate served at {where} is not signed by the CA in {ca}: {give} "
                "of the CA that signed the services' certificates; for a stack set up with "
                "fedhh certs, the one in its --out folder, such as deploy/tls/ca.pem"), True
    if "alpn" in lowered:
        return (f"{where} speaks TLS but not gRPC, so it is another port of a service: a "
                "framed, Connect, dashboard or metrics port; give the service's gRPC port, its "
                "--listen: in the compose stack 7000 for the coordinator, 7100 for the "
                "aggregator"), True
    if "wrong_version_number" in lowered:
        return (f"{where} does not speak TLS: a service started with --insecure, or another "
                "program; a plaintext service on loopback is dialled without --ca"), True
    if "connection refused" in lowered:
        return (f"nothing listens at {where}: is the service running, and is this its "
                "address and port?"), False
    if any(words in lowered for words in ("dns resolution failed", "lookup", "name not found",
                                          "name or service not known")):
        return f"{host} does not resolve to an address here", False
    if "socket closed" in lowered and not ca:
        return "if the service is served over TLS, pass --ca with its ca.pem", False
    return "", False


# How long a start waits for the health answer of a service it depends on.
PREFLIGHT_S = 10.0


def check_service(address: str, ca: str | None, option: str, what: str, meanwhile: str,
                  log_level: str, service: str, ca_option: str = "--ca",
                  warn: bool = True) -> None:
    """Ask the gRPC health of ``address`` (``what``, given as ``option``) once, as a process
    that depends on it starts: TLS trusting ``ca``, else plaintext on loopback only (a
    plaintext address elsewhere is refused, naming ``ca_option``). A mistake that waiting
    will not mend (``connection_problem``) ends it with one line (ConfigError); a service not
    reachable yet gets one warning in the process's JSON log, saying what it does
    ``meanwhile`` (unless not ``warn``: a service whose own start checks its inputs after
    this), and the process goes on."""
    import logging

    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from fedhh.rpc import serving
    from fedhh.rpc.observability import configure_logging

    if not ca:
        serving.check_plaintext_peer(address, option, ca_option)
    with serving.command_channel(address, ca) as channel:
        try:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                      timeout=PREFLIGHT_S)
            return
        except grpc.RpcError as error:
            code, details = error.code(), error.details() or ""
    if code == grpc.StatusCode.UNAVAILABLE:
        why, mistake = connection_problem(details, address, ca, ca_option=ca_option)
        if mistake:
            raise ConfigError(f"{option} {address}: {why}")
        why = why or details
    elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
        why = f"no answer within {PREFLIGHT_S:g} s (a firewall that drops, or a busy service)"
    else:
        return  # it answered: what it said is for the process's own calls to find out
    if not warn:
        return
    configure_logging(log_level, service)
    logging.getLogger("fedhh.cli").warning(
        f"cannot reach {what} at {address} yet, {meanwhile}: {why}", extra={"address": address})


def certificate_names(address: str, timeout_s: float = 3.0) -> list[str]:
    """The names (DNS names and addresses) in the certificate served at ``address``, read
    without verifying it, to say which names a hostname mismatch could use; [] if it cannot
    be read."""
    import socket
    import ssl

    from cryptography import x509

    host, _, port = address.rpartition(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # only to read the names; nothing is sent
    context.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as raw, \
                context.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
        if der is None:
            return []
        names = x509.load_der_x509_certificate(der).extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return []
    from fedhh.codec.shown import printable

    # (escaped: the certificate is not verified, and its names go to a terminal)
    return [printable(str(name.value)) for name in names
            if isinstance(name, x509.DNSName | x509.IPAddress)][:20]


def warn_deny_items_cut(config: RunConfig, program: str, shown: int = 5) -> None:
    """Say on stderr which deny-list items of a networked run are longer than its codes: each
    denies every item whose code starts as its own does (``RunConfig.deny_items_cut``), which
    the coordinator, knowing no items, cannot name (`fedhh simulate` names the dataset's)."""
    from fedhh.codec.shown import printable
    from fedhh.config import Mode

    cut = config.deny_items_cut(Mode.NETWORK)
    bits = config.code_bits(Mode.NETWORK)
    for item in cut[:shown]:
        print(f"{program}: warning: deny-list item {printable(item)} is longer than the codes "
              f"({bits} bits), so it denies every item whose code starts with the same {bits} "
              "bits (a longer URL or query beside it too; docs/datasets.md)", file=sys.stderr)
    if len(cut) > shown:
        print(f"{program}: warning: {len(cut) - shown:,} more deny-list items are longer than "
              "the codes", file=sys.stderr)


def output_path(text: str) -> Path:
    """A path to write: never the empty string, which a Path reads as the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a file or folder, got an empty string")
    return Path(text)


def check_dataset_out(out: Path, force: bool, inputs: tuple[Path, ...] = ()) -> None:
    """Refuse a dataset directory to write that would replace what is not an earlier one: a
    file, a folder holding anything but a dataset, an input (or a folder holding one); an
    earlier dataset only with ``force``. Writing a dataset replaces the whole target."""
    target = out.resolve()
    for source in inputs:
        if source.resolve() == target or target in source.resolve().parents:
            raise ConfigError(f"--out {out} is (or holds) the input {source}; write the "
                              "dataset elsewhere")
    if not out.exists() and not out.is_symlink():
        return
    if not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a folder; writing the dataset would "
                          "replace it: choose another path")
    if (out / "meta.json").exists():
        if not force:
            raise ConfigError(f"--out {out} already holds a dataset; add --force to replace it")
        return
    if any(out.iterdir()):
        raise ConfigError(f"--out {out} is a folder that holds something other than a fedhh "
                          "dataset; writing the dataset would delete it: choose an empty or "
                          "new folder")


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def add_listen_options(parser: argparse.ArgumentParser, default: str,
                       tls_also: str = "") -> None:
    """Where a service listens and how: ``--listen`` (``default``), then TLS from ``--tls-dir``
    (``tls_also``: what else its ca.pem verifies) or ``--insecure`` plaintext on loopback, one
    or the other (before, the coordinator and a selector took both and served TLS, the
    aggregator and the combiner refused both)."""
    parser.add_argument("--listen", type=listen_address, default=default,
                        help=f"HOST:PORT (port 0: OS-chosen; default {default})")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--tls-dir", help="server.pem, server.key and ca.pem for every "
                                             "connection" + (f" ({tls_also})" if tls_also
                                                             else ""))
    transport.add_argument("--insecure", action="store_true",
                           help="plaintext gRPC; only allowed on loopback addresses")


def add_command(subparsers: Any, name: str, summary: str, description: str,
                add_arguments: Callable[[argparse.ArgumentParser], None],
                handler: Callable[[argparse.Namespace], int]) -> None:
    """A process's subcommand (a service, the device process, `fedhh up`): ``summary`` in
    `fedhh --help`'s list, its module docstring ``description`` as written (line breaks and
    all) atop its own --help, its options from ``add_arguments``, run by ``handler``."""
    p = subparsers.add_parser(name, help=summary, description=description,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(handler=handler)


def add_service_options(parser: argparse.ArgumentParser,
                        metrics: str = "serve Prometheus metrics on this port (0: any; "
                                       "default: off)") -> None:
    """The options every service process shares: its metrics port (``metrics``: its help),
    where its metrics listen and its log level."""
    parser.add_argument("--metrics-port", type=port_number, default=None, help=metrics)
    parser.add_argument("--metrics-host", default="127.0.0.1",
                        help="address of the Prometheus metrics listener (with --metrics-port; "
                             "default 127.0.0.1)")
    parser.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS,
                        help="least severe level logged, as JSON lines on stderr (default INFO)")


def add_enrollment_options(parser: argparse.ArgumentParser) -> None:
    """How the device service admits enrollments, wherever it is served (the coordinator, each
    selector): the attestation verifier and the rate limit."""
    parser.add_argument("--attestation", metavar="MODULE:FACTORY",
                        help="attestation verifier factory(store) (default: one-time tokens)")
    parser.add_argument("--enroll-rate", type=positive_float, default=200.0,
                        help="enrollments per second, overall and per peer address (default "
                             "200)")
    parser.add_argument("--enroll-burst", type=positive_int, default=2000,
                        help="enrollments allowed in a burst (default 2000)")


# Concurrent calls (HTTP/2 streams) one client connection may hold on a service's gRPC port
# (--max-streams-per-connection). The cap bounds what a flood of streams opened and reset at once
# holds (docs/threat-model.md, "HTTP/2 rapid reset"; a coordinator's RSS after four floods of
# 85,000 on one connection: 136 -> 728 MB with no cap, 238 MB with 4,096, 183 MB with 2,048),
# and must sit above the calls a device process puts on one connection (--devices-per-connection,
# 1,024). At an aggregator a device's session stream stays open for its round and may be
# reopened; at the coordinator or a selector a device has at most one call (its GetTask
# long-poll, or its Enroll), so half the aggregator's cap leaves it twice its fleet's share.
AGGREGATOR_STREAMS_PER_CONNECTION = 4096
DEVICE_SERVICE_STREAMS_PER_CONNECTION = 2048


def add_stream_cap_option(parser: argparse.ArgumentParser, default: int) -> None:
    """--max-streams-per-connection of a service whose gRPC port devices reach (the
    coordinator, a selector, an aggregator), ``default`` by default."""
    parser.add_argument("--max-streams-per-connection", type=positive_int, default=default,
                        metavar="N",
                        help="concurrent calls one client connection may have open on the gRPC "
                             f"port (default: {default}; further calls wait for a stream; a "
                             "device process spreads its devices over a connection per "
                             "--devices-per-connection of them; the cap bounds the memory a "
                             "flood of reset streams takes, docs/threat-model.md)")


def add_outcome_options(parser: argparse.ArgumentParser) -> None:
    """How far ahead an aggregation service (an aggregator, the combiner) takes a round's last
    deadline, and how long it remembers its finished rounds for GetOutcome; both check the
    two together (fedhh_aggregator.rounds.check_tombstone_ttl)."""
    # (fedhh.secagg.config.MAX_ROUND_S, which the coordinator reads; not imported here: it
    # would load the secure-aggregation package and its cryptography on every command)
    parser.add_argument("--max-round-seconds", type=positive_float, default=3600.0,
                        help="refuse configs whose last deadline is further ahead (default: "
                             "3600)")
    parser.add_argument("--max-tombstones", type=positive_int, default=4096,
                        help="finished rounds remembered for GetOutcome (default: 4096)")
    parser.add_argument("--tombstone-ttl", type=positive_float, default=7 * 24 * 3600.0,
                        help="seconds a finished round is remembered (default: 7 days; at "
                             "least --max-round-seconds)")


def _origins(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_framed_options(parser: argparse.ArgumentParser, what: str) -> None:
    """The framed port of a service's device calls (``fedhh.rpc.framed``); ``what`` names the
    methods it serves and what they save."""
    parser.add_argument("--session-listen", metavar="HOST:PORT", type=listen_address,
                        help=f"also serve {what} outside gRPC, as frames on this address "
                             "(docs/secagg.md, 'The framed port'): the same messages and "
                             "checks; TLS from --tls-dir, plaintext only with --insecure on "
                             "loopback (port 0: OS-chosen; default: off)")
    parser.add_argument("--session-max-connections", type=positive_int,
                        help="connections the framed port holds at once, TLS handshakes "
                             "included (default: 16384, or a quarter of the open-file limit "
                             "where that is fewer; each is an open file, and a port holds at "
                             "most that quarter, warning when asked for more: the service "
                             "raises its limit to the hard one as it starts, ulimit -n raises "
                             "that)")


def check_web_options(args: argparse.Namespace) -> None:
    """Refuse --web-origin without --web-listen: no page could call a port that is not served
    (it was accepted and did nothing); and an origin not shaped as a browser sends one, named
    by its option (the Connect server's check said only "a web origin is ...")."""
    if args.web_origin and not args.web_listen:
        raise ConfigError("--web-origin needs --web-listen: the origins may call the Connect "
                          "port, which is off without it")
    if args.web_origin:
        from fedhh.rpc.connect import check_origins  # (aiohttp: a service that serves web)

        try:
            check_origins(args.web_origin)
        except ConfigError as error:
            raise ConfigError(f"--web-origin: {error}") from None


def add_web_options(parser: argparse.ArgumentParser, what: str) -> None:
    """The Connect port of a service's device calls (``fedhh.rpc.connect``), for browsers;
    ``what`` names the methods it serves."""
    parser.add_argument("--web-listen", metavar="HOST:PORT", type=listen_address,
                        help=f"also serve {what} over the Connect protocol (unary, binary "
                             "protobuf) on this address, for web devices: TLS from --tls-dir, "
                             "plaintext only with --insecure on loopback (port 0: OS-chosen; "
                             "default: off)")
    parser.add_argument("--web-origin", action="extend", type=_origins, default=[],
                        metavar="ORIGIN[,ORIGIN...]",
                        help="origins (https://host[:port]) whose pages may call the Connect "
                             "port (CORS), comma-separated or repeated; empty: none (default: "
                             "none, so only callers that are not browser pages)")
    parser.add_argument("--web-max-connections", type=positive_int,
                        help="connections the Connect port holds at once (one per device in a "
                             "long-poll; default 512, or a quarter of the open-file limit "
                             "where that is fewer; at most that quarter, warning when asked "
                             "for more)")
