"""Files that are read whole (secrets, keys, certificates, token files, item lists,
codebooks), read to a bound: a path that never ends (``/dev/zero``, a pipe left open) or a
file that is not the one meant (a disk image given as a deny list) is one line naming it, not
a process that reads until memory runs out; and a file saved as UTF-16 where UTF-8 is
meant, told apart by its first bytes."""

from __future__ import annotations

import codecs
import os

from fedhh.errors import ConfigError

KIB, MIB = 1 << 10, 1 << 20
SECRET_FILE_BYTES = 64 * KIB  # a token, a PEM key: a few hundred bytes
CERTIFICATE_FILE_BYTES = 16 * MIB  # a CA bundle: the system's is ~200 KiB
LIST_FILE_BYTES = 256 * MIB  # tokens files, item lists, codebooks: millions of lines


def read_whole(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of the file at ``path``, or ConfigError when it holds more than ``limit``
    (``what`` names it: "deny list", "TLS file"). Errors of opening and reading are the
    caller's to word: OSError passes through."""
    with open(path, "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise ConfigError(f"{what} {os.fspath(path)} holds more than {_size(limit)}; is it the "
                          "right file?")
    return data


def _size(count: int) -> str:
    return f"{count // MIB} MiB" if count >= MIB else f"{count // KIB} KiB"


UTF16_HEAD_BYTES = 256  # (what `utf16_problem` reads: a UTF-8 file with so many NULs is none)


def utf16_problem(head: bytes) -> str | None:
    """Why a file that begins with ``head`` (its first bytes, a few hundred) is UTF-16, not
    UTF-8, in words for an error; None when it is not: it starts with UTF-16's byte order mark
    (FF FE, FE FF), or, without one, a NUL is every other byte, as UTF-16 writes ASCII
    characters (a text file saved as Windows' "Unicode", or by PowerShell 5's ``>``: before,
    its characters were read as items holding NUL, ``a\\x00``, and its JSON was "not JSON")."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return f"it is UTF-16 (it starts with the byte order mark {head[:2].hex(' ').upper()})"
    head = head[:min(len(head), UTF16_HEAD_BYTES) // 2 * 2]  # (whole code units)
    for order, chars, zeros in (("UTF-16LE", head[0::2], head[1::2]),
                                ("UTF-16BE", head[1::2], head[0::2])):
        if len(chars) >= 2 and not zeros.strip(b"\x00") and b"\x00" not in chars:
            return (f"it looks {order} without a byte order mark (every other byte of its "
                    "beginning is 0, as UTF-16 writes ASCII characters)")
    return None
