"""Option value parsers shared by subcommands: each rejects a bad value with a message that
argparse prefixes with the option's name."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from fedhh.errors import ConfigError
from fedhh.output_paths import (  # noqa: F401 - the CLI's options, kept importable here
    STDOUT,
    check_output,
    check_output_dir,
    write_output,
)

# What matplotlib can write, by file suffix (--plot); without one it would append ".png".
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff",
                 ".webp")


def positive_int(text: str) -> int:
    """An integer >= 1; scientific notation such as 1e7 is accepted when it is integral."""
    try:
        value = float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not math.isfinite(value) or value != int(value) or value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(value)


def non_negative_int(text: str) -> int:
    """An integer >= 0, as :func:`positive_int` takes it."""
    if text.strip() == "0":
        return 0
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a non-negative integer, got {text!r}") from None


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
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
    return text


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


def add_service_options(parser: argparse.ArgumentParser) -> None:
    """The options every service process shares: where its metrics listen and its log level."""
    parser.add_argument("--metrics-host", default="127.0.0.1",
                        help="address of the Prometheus metrics listener (with --metrics-port; "
                             "default 127.0.0.1)")
    parser.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS,
                        help="least severe level logged, as JSON lines on stderr (default INFO)")


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
    parser.add_argument("--session-max-connections", type=positive_int, default=16384,
                        help="connections the framed port holds at once, TLS handshakes "
                             "included (default: 16384; each is an open file, and a port "
                             "holds at most a quarter of the open-file limit, which the "
                             "service raises to its hard limit as it starts)")


def check_web_options(args: argparse.Namespace) -> None:
    """Refuse --web-origin without --web-listen: no page could call a port that is not served
    (it was accepted and did nothing)."""
    if args.web_origin and not args.web_listen:
        raise ConfigError("--web-origin needs --web-listen: the origins may call the Connect "
                          "port, which is off without it")


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
    parser.add_argument("--web-max-connections", type=positive_int, default=512,
                        help="connections the Connect port holds at once (one per device in a "
                             "long-poll; default 512; at most a quarter of the open-file "
                             "limit)")
