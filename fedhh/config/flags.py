"""Command-line flags generated from ``fedhh.config.RunConfig``: one flag per knob, its help
text and shown default from the field's metadata, so every command that configures a run
(`simulate`, `admin start`, `up`) offers the same knobs under the same names.

Flags are the field names with dashes. A boolean knob whose default is False is a switch
(``--warm-start``); one whose default is True is turned off with ``--no-NAME``. The deny list
is read from a file of items, one per line, or a ``.json`` array of them (``--deny-list PATH``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

from fedhh.config import Mode, RunConfig, field_type, knobs
from fedhh.errors import ConfigError
from fedhh.integers import read_integer, read_number, shown_text


def number(text: str) -> float:
    value = read_number(text)  # (its ConfigError is the flag's refusal: _argparse_type)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


# (an integer knob is read as every command's integer option is: fedhh/integers.py; before,
# a copy here read '9007199254740993.0' and '-1e25' through a double)
_PARSERS: dict[type, Callable[[str], Any]] = {int: read_integer, float: number, str: str}


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_run_arguments(parser: argparse.ArgumentParser, mode: Mode, *,
                      defaults: Mapping[str, Any] | None = None,
                      exclude: Collection[str] = ()) -> None:
    """Add one flag per knob of ``mode``; ``defaults`` overrides the shown and used defaults
    of this command (e.g. `fedhh up`'s demo settings)."""
    overrides = dict(defaults or {})
    group = parser.add_argument_group("run configuration (fedhh.config.RunConfig)")
    for f in knobs(mode):
        if f.name in exclude:
            continue
        default = overrides.get(f.name, f.default)
        kind = field_type(f)
        text = f.metadata["help"]
        dest = f.name
        if kind is bool:
            if default:
                group.add_argument(flag(f"no_{f.name}"), dest=dest, action="store_false",
                                   default=True, help=f"turn off: {text}")
            else:
                group.add_argument(flag(f.name), dest=dest, action="store_true", default=False,
                                   help=text)
            continue
        if kind is tuple:
            group.add_argument(flag(f.name), dest=dest, metavar=f.metadata["metavar"] or "PATH",
                               default=None,
                               help=f"{text}: a file of items, one per line, or a .json file "
                               "of one JSON array of strings (for items that begin or end "
                               "with a space)")
            continue
        shown = "" if default is None else f" (default: {_show(default)})"
        if f.metadata["parse"] is not None:
            group.add_argument(flag(f.name), dest=dest, action=_ParsedKeepingText,
                               parse=_argparse_type(f.metadata["parse"]), default=default,
                               metavar=f.metadata["metavar"], help=text + shown)
            continue
        group.add_argument(flag(f.name), dest=dest, type=_argparse_type(_PARSERS[kind]),
                           default=default, choices=f.metadata["choices"],
                           metavar=f.metadata["metavar"], help=text + shown)


# The namespace attribute under which _ParsedKeepingText keeps each flag's text as given.
_GIVEN = "given_text"


class _ParsedKeepingText(argparse.Action):
    """A knob whose own parse may not keep what the user typed (``--codec FILE`` becomes the
    codebook's JSON): the parsed value, and the text as given, for ``given_text``. Before,
    the output checks compared an output path with the codebook's JSON, so ``--json book.json
    --codec book.json`` wrote the results over the user's codebook."""

    def __init__(self, *args: Any, parse: Callable[[str], Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parse = parse

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        try:
            setattr(namespace, self.dest, self.parse(values))
        except argparse.ArgumentTypeError as error:
            raise argparse.ArgumentError(self, str(error)) from None
        given = dict(getattr(namespace, _GIVEN, None) or {})
        given[self.dest] = values
        setattr(namespace, _GIVEN, given)


def given_text(args: argparse.Namespace, name: str) -> str | None:
    """The text given on the command line for the knob ``name`` that has its own parse
    (None if the flag was not given)."""
    return (getattr(args, _GIVEN, None) or {}).get(name)


def _argparse_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` with its ConfigError, or the OSError of a file it reads (``--codec FILE``),
    turned into argparse's one-line error for the flag. (Before, a --codec of 300 characters
    ended the command in a traceback: the OS's "File name too long" as it looked for a file
    of that name, before any command's own error handling began.)"""
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ConfigError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        except OSError as error:
            raise argparse.ArgumentTypeError(
                f"cannot read {shown_text(text)}: {error.strerror or error}") from None

    return convert


def config_from_args(args: argparse.Namespace, mode: Mode,
                     exclude: Collection[str] = ()) -> RunConfig:
    """The RunConfig the parsed flags describe (validated for ``mode``)."""
    values: dict[str, Any] = {}
    for f in knobs(mode):
        if f.name in exclude or not hasattr(args, f.name):
            continue
        value = getattr(args, f.name)
        if f.name == "deny_list":
            if value == "":  # (it was taken as no deny list at all)
                raise ConfigError("argument --deny-list: give a file of items, one per line "
                                  "(or a .json array of strings), not an empty path")
            if value:
                from fedhh.data.wordlists import load_item_list

                values["deny_list"] = tuple(load_item_list(value))
            continue
        values[f.name] = value
    try:
        return RunConfig.from_dict(values).validate(mode)
    except ConfigError as error:
        raise ConfigError(_name_the_flag(str(error))) from None


def _name_the_flag(message: str) -> str:
    """A validation message about a knob, as argparse words it for a flag."""
    for f in knobs():
        if message.startswith(f"{f.name} "):
            return f"argument {flag(f.name)}: {message}"
    return message


def to_argv(config: RunConfig, mode: Mode, always: Collection[str] = ()) -> list[str]:
    """The flags that reproduce ``config``: fields equal to their defaults are left out, but
    for those named in ``always``; the deny list, which travels as a file, has no flag form
    and must be empty."""
    argv: list[str] = []
    overrides = config.overrides()
    for f in knobs(mode):
        name = f.name
        if name not in overrides and name not in always:
            continue
        value = getattr(config, name)
        if name == "deny_list":
            raise ValueError("a deny list given as items has no flag form")
        if isinstance(value, bool):
            argv.append(flag(name) if value else flag(f"no_{name}"))
        else:
            argv += [flag(name), _show(value)]
    return argv


def _show(value: Any) -> str:
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    return str(value)
