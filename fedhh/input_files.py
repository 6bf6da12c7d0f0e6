"""Files that are read whole (secrets, keys, certificates, token files, item lists,
codebooks), read to a bound: a path that never ends (``/dev/zero``, a pipe left open) or a
file that is not the one meant (a disk image given as a deny list) is one line naming it, not
a process that reads until memory runs out."""

from __future__ import annotations

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
