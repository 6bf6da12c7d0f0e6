#!/usr/bin/env python3
"""Write fedhh/codec/scripts.txt, each character's Script_Extensions (Unicode's Scripts.txt and
ScriptExtensions.txt, UAX #24) that ``fedhh.codec.shown`` tells a word's scripts by (UTS #39,
section 5.1, mixed-script detection); or, with ``--status``, fedhh/codec/identifiers.txt, the
characters whose Identifier_Status is Allowed (UTS #39, section 3.1: of Identifier_Type
Recommended or Inclusion), which ``shown`` reads letters as lookalikes of (not the technical,
obsolete, uncommon and excluded ones, ``ɸ``, ``ĸ``, that no word is spelt in).

    python fedhh/codec/gen_scripts.py Scripts.txt ScriptExtensions.txt PropertyValueAliases.txt
    python fedhh/codec/gen_scripts.py --fonttools
    python fedhh/codec/gen_scripts.py --status IdentifierStatus.txt

The sources are Unicode's files (https://www.unicode.org/Public/UCD/latest/ucd/; the aliases
file pairs Scripts.txt's long names with the short ones ScriptExtensions.txt writes), or, where only
a package registry can be reached, the tables that the PyPI package ``fonttools`` generates from
them (``fontTools.unicodedata.Scripts`` and ``.ScriptExtensions``, each a list of range starts
and their values). Characters of Common (Zyyy) and Inherited (Zinh) with no extensions, and
unassigned ones (Zzzz), are left out: they go with every script. IdentifierStatus.txt is
Unicode's security data (https://www.unicode.org/Public/security/latest/; the GitHub repository
unicode-org/unicodetools holds it under unicodetools/data/security/<version>/).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

OUT = Path(__file__).with_name("scripts.txt")
IDENTIFIERS = Path(__file__).with_name("identifiers.txt")
_LINE = re.compile(r"^([0-9A-F]+)(?:\.\.([0-9A-F]+))?\s*;\s*([A-Za-z_ ]+?)\s*(?:#|$)")
_VERSION = re.compile(r"^#\s*Scripts-(\S+)\.txt", re.MULTILINE)
_STATUS_VERSION = re.compile(r"^#\s*Version:\s*(\S+)", re.MULTILINE)
_ANY = frozenset(("Zyyy", "Zinh", "Zzzz"))  # (Common, Inherited, Unknown)
_LAST = 0x10FFFF


def _unicode_ranges(text: str, names: dict[str, str]) -> list[tuple[int, int, str]]:
    """A Unicode property file's ranges, each value as short script names (Scripts.txt writes
    long ones, ``Latin``; ScriptExtensions.txt short ones, ``Latn Grek``)."""
    ranges = []
    for line in text.splitlines():
        if match := _LINE.match(line):
            value = " ".join(sorted(names.get(name, name) for name in match[3].split()))
            ranges.append((int(match[1], 16), int(match[2] or match[1], 16), value))
    return ranges


def from_unicode_files(scripts: str, extensions: str,
                       aliases: str) -> tuple[dict[int, str], str]:
    long_to_short = {long: short for short, long in re.findall(
        r"^sc\s*;\s*([A-Z][a-z]{3})\s*;\s*([A-Za-z_]+)", aliases, re.MULTILINE)}
    values: dict[int, str] = {}
    for lo, hi, value in _unicode_ranges(scripts, long_to_short):
        values.update(dict.fromkeys(range(lo, hi + 1), value))
    for lo, hi, value in _unicode_ranges(extensions, {}):
        values.update(dict.fromkeys(range(lo, hi + 1), value))
    found = _VERSION.search(scripts)
    if found is None:
        raise SystemExit("Scripts.txt does not name its version")
    if unknown := {v for value in values.values() for v in value.split() if len(v) != 4}:
        raise SystemExit(f"script names the aliases file does not shorten: "
                         f"{sorted(unknown)[:5]}")
    return values, found[1]


def from_fonttools() -> tuple[dict[int, str], str]:
    from fontTools.unicodedata import ScriptExtensions, Scripts

    values: dict[int, str] = {}
    for table in (Scripts, ScriptExtensions):
        starts = [*table.RANGES, _LAST + 1]
        for lo, hi, value in zip(starts[:-1], starts[1:], table.VALUES, strict=True):
            if value is not None:
                text = value if isinstance(value, str) else " ".join(sorted(value))
                values.update(dict.fromkeys(range(lo, hi), text))
    found = re.search(r"ScriptExtensions-(\S+)\.txt", Path(ScriptExtensions.__file__)
                      .read_text(encoding="utf-8"))
    if found is None:
        raise SystemExit("fontTools' table does not name its Unicode version")
    return values, found[1]


def allowed_from_status_file(text: str) -> tuple[dict[int, str], str]:
    values = {code: value for lo, hi, value in _unicode_ranges(text, {}) if value == "Allowed"
              for code in range(lo, hi + 1)}
    found = _STATUS_VERSION.search(text)
    if found is None or not values:
        raise SystemExit("not an IdentifierStatus.txt: no version line or no Allowed ranges")
    return values, found[1]


def scripts_header(version: str) -> list[str]:
    return [
        f"# Unicode's Script_Extensions (Scripts.txt and ScriptExtensions.txt, version {version}; "
        "UAX #24):",
        "# a range of code points, then the scripts its characters are used with (short names);",
        "# characters not listed are Common, Inherited or unassigned and go with every script.",
    ]


def status_header(version: str) -> list[str]:
    return [
        f"# Unicode's IdentifierStatus.txt (UTS #39, version {version}): the ranges of code points "
        "whose",
        "# Identifier_Status is Allowed; every other code point is Restricted.",
    ]


def table(values: dict[int, str], header: list[str]) -> str:
    lines = [
        *header,
        "# Written by fedhh/codec/gen_scripts.py; read by fedhh.codec.shown. Do not edit.",
        "# Unicode data: Copyright (c) 1991-2025 Unicode, Inc. Redistributed under the Unicode "
        "License v3,",
        "# https://www.unicode.org/license.txt, which permits it with this notice.",
    ]
    start, current = 0, None
    for code in range(_LAST + 2):
        value = values.get(code) if code <= _LAST else None
        value = None if value in _ANY else value
        if value != current:
            if current is not None:
                end = f"..{code - 1:04X}" if code - 1 > start else ""
                lines.append(f"{start:04X}{end};{current}")
            start, current = code, value
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("scripts", type=Path, nargs="?", help="Unicode's Scripts.txt")
    parser.add_argument("extensions", type=Path, nargs="?", help="its ScriptExtensions.txt")
    parser.add_argument("aliases", type=Path, nargs="?", help="its PropertyValueAliases.txt")
    parser.add_argument("--fonttools", action="store_true",
                        help="read the tables of the installed fontTools instead")
    parser.add_argument("--status", type=Path, metavar="IdentifierStatus.txt",
                        help="write identifiers.txt from UTS #39's IdentifierStatus.txt instead")
    args = parser.parse_args()
    if args.status:
        values, version = allowed_from_status_file(args.status.read_text(encoding="utf-8"))
        IDENTIFIERS.write_text(table(values, status_header(version)), encoding="utf-8")
        print(f"{IDENTIFIERS}: {len(values)} characters")
        return
    if args.fonttools:
        values, version = from_fonttools()
    elif args.scripts and args.extensions and args.aliases:
        values, version = from_unicode_files(*(path.read_text(encoding="utf-8") for path in (
            args.scripts, args.extensions, args.aliases)))
    else:
        parser.error("give Scripts.txt, ScriptExtensions.txt and PropertyValueAliases.txt, "
                     "or --fonttools")
    OUT.write_text(table(values, scripts_header(version)), encoding="utf-8")
    print(f"{OUT}: {sum(1 for v in values.values() if v not in _ANY)} characters")


if __name__ == "__main__":
    main()
