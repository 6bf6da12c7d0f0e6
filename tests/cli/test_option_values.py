"""Every typed option of every `fedhh` command, given odd text (non-finite, huge, negative,
other scripts' digits, NUL, a file name the OS refuses as too long), reads it or refuses it
with argparse's one-line error: its type raises ArgumentTypeError, ValueError or TypeError,
nothing else.

Before, `--codec` of 300 characters (simulate, up, admin start) raised the OS's "File name too
long" out of the parse, a traceback: the codebook reader looked for a file of that name before
any command's error handling began."""

from __future__ import annotations

import argparse

import pytest

from fedhh.cli.main import build_parser, main

ODD = ["nan", "inf", "-inf", "1e999", "-1", "0", "1e308", "-1e25", "\u0663", "\uff11\uff12",
       "9" * 5000, "", " ", "\x00", ":", "1:2", "0:inf", "1e3:1e999", "\u0663:\u0665", "-0",
       "0x10", "1_0", "\u202e5", "x" * 300, "/tmp/" + "x" * 300 + "/y", "127.0.0.1:99999"]


def _typed_options() -> list[tuple[str, argparse.Action]]:
    found: list[tuple[str, argparse.Action]] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:  # (argparse keeps its actions private)
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}".strip())
            elif callable(action.type):
                found.append((f"{path} {'/'.join(action.option_strings) or action.dest}",
                              action))

    walk(build_parser(), "")
    return found


def test_every_typed_option_reads_or_refuses_odd_text() -> None:
    typed = _typed_options()
    assert len(typed) > 300  # (every command's; 389 when written)
    escaped = []
    for where, action in typed:
        for text in ODD:
            try:
                action.type(text)  # type: ignore[misc]
            except (argparse.ArgumentTypeError, ValueError, TypeError):
                pass
            except Exception as error:  # (what the test looks for)
                escaped.append(f"{where} {text[:24]!r}: {type(error).__name__}: {error}")
    assert escaped == []


def test_a_codec_name_too_long_for_the_os_is_refused_naming_the_option(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", "--codec", "x" * 300])
    assert exit_.value.code == 2
    said = capsys.readouterr().err
    assert said == ("fedhh simulate: error: argument --codec: cannot read 'xxxxxxxxxxxxxxxxxxxx'"
                    "... (300 characters): File name too long\n")
