"""Files that are read whole (secrets, keys, certificates, token files, item lists,
codebooks), read to a bound: a path that never ends (``/dev/zero``, a pipe left open) or a
file that is not the one meant (a disk image given as a deny list) is one line naming it, not
a process that reads until memory runs out; and a file saved as UTF-16 or UTF-32 where UTF-8 is
meant, told apart by its first bytes."""

from __future__ import annotations

import codecs
import errno
import io
import os
import re
import select
import shlex
import stat
import sys
import unicodedata
from typing import Any

from fedhh.errors import ConfigError

KIB, MIB = 1 << 10, 1 << 20
SECRET_FILE_BYTES = 64 * KIB  # a token, a PEM key: a few hundred bytes
CERTIFICATE_FILE_BYTES = 16 * MIB  # a CA bundle: the system's is ~200 KiB
LIST_FILE_BYTES = 256 * MIB  # tokens files, item lists, codebooks: millions of lines


# How long a named pipe is waited on for a process that writes to it. Opening one for reading
# waits for a writer, and before, a pipe that nobody wrote to (a FIFO left in place of a token
# file or a dataset) held the command or service silently for ever.
PIPE_WRITER_WAIT_S = 10.0


def open_input(path: str | os.PathLike[str], what: str) -> io.BufferedReader:
    """The file at ``path`` open for reading (buffered, binary); for a named pipe, once a
    process writes to it or holds it open to write, else ConfigError after
    ``PIPE_WRITER_WAIT_S`` naming it (``what``: "deny list", "text dataset"). A pipe whose
    writer is there works as before: process substitution, ``<(zcat items.gz)``. Errors of
    opening are the caller's to word: OSError passes through."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # (a pipe's open waits no more)
    try:
        head = b""
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(mode):  # (a folder opens; its read would fail, past the caller's words)
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if stat.S_ISFIFO(mode):
            head = _await_writer(descriptor, path, what)
        os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return io.BufferedReader(_Headed(descriptor, head)) if head else open(descriptor, "rb")


def _await_writer(descriptor: int, path: str | os.PathLike[str], what: str) -> bytes:
    """What was read to learn that the pipe open at ``descriptor`` has a writer (its first
    byte, or nothing); ConfigError when none came within ``PIPE_WRITER_WAIT_S``. Linux's poll
    tells a reader that opened before any writer nothing until one writes or leaves; then a
    read tells the rest apart: EOF while nobody writes, EAGAIN while a writer is silent."""
    if _readable_within(descriptor, PIPE_WRITER_WAIT_S):
        return b""
    try:
        head = os.read(descriptor, 1)
    except BlockingIOError:
        return b""  # (a writer holds it open: its bytes are waited for as a file's are read)
    if not head:
        raise ConfigError(
            f"{what} {os.fspath(path)} is a named pipe (FIFO) that no process wrote to within "
            f"{PIPE_WRITER_WAIT_S:g} s; give a file, or write to the pipe as the command starts")
    return head  # (a byte that came after the wait ran out)


def _readable_within(descriptor: int, wait_s: float) -> bool:
    """Whether ``descriptor`` has something to read (or its writer left) within ``wait_s``.
    (poll, not select: select refuses a descriptor past 1023, "filedescriptor out of range",
    which a process holding many connections opens a file at.)"""
    poller = select.poll()
    poller.register(descriptor, select.POLLIN)
    return bool(poller.poll(wait_s * 1000))


class _Headed(io.RawIOBase):
    """A descriptor's bytes read after ``head``, the bytes already taken from it."""

    def __init__(self, descriptor: int, head: bytes) -> None:
        self._file = io.FileIO(descriptor, "rb")
        self._head = head

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        if self._head:
            count = min(len(buffer), len(self._head))
            buffer[:count] = self._head[:count]
            self._head = self._head[count:]
            return count
        return self._file.readinto(buffer)

    def close(self) -> None:
        self._file.close()
        super().close()


def missing_reason(path: str | os.PathLike[str]) -> str:
    """Why ``path`` names no file or folder to read, in words that follow it: "does not exist",
    a symbolic link to nothing or in a loop, a path that cannot be searched, or something else
    there (a device, a pipe, a socket). Before, ``Path.exists`` answered False for each, and a
    symbolic link loop or a link to a moved file was said not to exist."""
    try:
        os.stat(path)
    except OSError as error:
        if error.errno != errno.ENOENT:  # (ELOOP: a loop; EACCES, ENOTDIR: its folders)
            return f"cannot be read: {error.strerror}"
        if os.path.islink(path):
            return f"is a symbolic link to {os.readlink(path)}, which does not exist"
        return "does not exist"
    return "is neither a file nor a folder"


def read_whole(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of the file at ``path``, or ConfigError when it holds more than ``limit``
    (``what`` names it: "deny list", "TLS file"); a named pipe as ``open_input`` opens it.
    Errors of opening and reading are the caller's to word: OSError passes through."""
    with open_input(path, what) as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise ConfigError(f"{what} {os.fspath(path)} holds more than {_size(limit)}; is it the "
                          "right file?")
    return data


def _size(count: int) -> str:
    return f"{count // MIB} MiB" if count >= MIB else f"{count // KIB} KiB"


# The compressed formats a file of users may come in: the first bytes of each (bzip2's whole
# header, its block or end magic too: "BZh" alone may begin a line of text) and the command
# that writes its contents to standard output.
COMPRESSED = {".gz": (rb"\x1f\x8b", "gzip", "zcat"),
              ".bz2": (rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)", "bzip2", "bzcat"),
              ".xz": (rb"\xfd7zXZ\x00", "xz", "xzcat"),
              ".zst": (rb"\x28\xb5\x2f\xfd", "zstd", "zstdcat"),
              ".zip": (rb"PK\x03\x04", "zip", "unzip -p")}


# The names of a JSON-lines file (fedhh.data.jsonl): .ndjson is the same format's other name
# (newline-delimited JSON, as exports and log tools write it; before, "unknown dataset file type").
JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")


def compressed_problem(path: str | os.PathLike[str], head: bytes | None = None) -> str | None:
    """Why ``path`` is not read, with the command line that reads it, when it is compressed:
    by its first bytes ``head``, or else by its name's last suffix; None when it is not.
    Before, ``users.txt.gz`` was refused as "unknown dataset file type '.gz'" by name, and
    read as text "not UTF-8 (byte 2 of the line: b'\\x8b') ...; save it as UTF-8", neither
    saying that it is compressed nor how to read it."""
    name = os.fspath(path)
    base, suffix = os.path.splitext(name)
    if head is not None:
        found = next(((kind, tool) for magic, kind, tool in COMPRESSED.values()
                      if re.match(magic, head)), None)
    else:
        found = COMPRESSED[suffix.lower()][1:] if suffix.lower() in COMPRESSED else None
    if found is None:
        return None
    kind, tool = found
    # (the format inside: users.txt.gz holds text; a .txt that is gzip inside, too)
    inner = os.path.splitext(base)[1] if suffix.lower() in COMPRESSED else suffix
    form = ("text" if inner.lower() == ".txt" else "jsonl" if inner.lower() in
            JSON_LINES_SUFFIXES else "text|jsonl")
    return (f"it is {kind}-compressed{' (by its first bytes)' if head is not None else ''}, "
            "which fedhh does not read: give it through a pipe, as in `fedhh data import "
            f"--format {form} <({tool} {shlex.quote(name)}) --out DIR`, or decompressed to a "
            "file first")


HEAD_BYTES = 256  # (what `wide_encoding_problem` reads: a UTF-8 file with so many NULs is none)


def wide_encoding_problem(head: bytes) -> str | None:
    """Why a file that begins with ``head`` (its first bytes, a few hundred) is UTF-16 or
    UTF-32, not UTF-8, in words for an error; None when it is not.

    UTF-32 starts with its byte order mark (FF FE 00 00, 00 00 FE FF) or, without one, is
    four-byte units each an assigned character's code point (so UTF-16 with a control
    character after each CJK one, units of plane 10's unassigned points, is not taken for it;
    nor is UTF-16 whose every other character is a control character, which pairs into
    supplementary points only, ``_plausible_text``).
    Before, it was not told apart: a text file's characters were read as items holding NULs
    (``a\\x00\\x00\\x00``), and a file with the little-endian mark was called UTF-16,
    whose mark begins it. UTF-16 starts with its mark (FF FE, FE FF) or, without one, has a
    NUL every other byte, as it writes ASCII characters (a text file saved as Windows'
    "Unicode", or by PowerShell 5's ``>``)."""
    if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return f"it is UTF-32 (it starts with the byte order mark {head[:4].hex(' ').upper()})"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return f"it is UTF-16 (it starts with the byte order mark {head[:2].hex(' ').upper()})"
    head = head[:min(len(head), HEAD_BYTES)]
    units = head[:len(head) // 4 * 4]  # (whole UTF-32 code units)
    beyond_bmp = None  # a UTF-16 order whose text reads as UTF-32 of supplementary points only
    for order in ("little", "big"):
        points = [int.from_bytes(units[i:i + 4], order) for i in range(0, len(units), 4)]
        if len(points) >= 2 and all(0 < p <= sys.maxunicode
                                    and unicodedata.category(chr(p)) not in ("Cn", "Cs")
                                    for p in points):
            utf16 = f"UTF-16{order[0].upper()}E"
            if min(points) <= 0xFFFF or not _plausible_text(units, utf16):
                return (f"it looks UTF-32{order[0].upper()}E without a byte order mark (its "
                        "beginning is characters of four bytes each, as UTF-32 writes them)")
            beyond_bmp = beyond_bmp or utf16
    head = head[:len(head) // 2 * 2]  # (whole UTF-16 code units)
    for order, chars, zeros in (("UTF-16LE", head[0::2], head[1::2]),
                                ("UTF-16BE", head[1::2], head[0::2])):
        if len(chars) >= 2 and not zeros.strip(b"\x00") and b"\x00" not in chars:
            return (f"it looks {order} without a byte order mark (every other byte of its "
                    "beginning is 0, as UTF-16 writes ASCII characters)")
    if beyond_bmp is not None:
        return (f"it looks {beyond_bmp} without a byte order mark (its beginning is assigned "
                "characters of two bytes each, a control character every other one)")
    return None


def _plausible_text(data: bytes, encoding: str) -> bool:
    """Whether ``data`` (a file's beginning) decodes as ``encoding`` to assigned characters,
    none of them NUL, a private-use character or a lone surrogate.

    UTF-16 text whose every other character is a control character U+0001 to U+0010 (text
    made of control characters, or a character and a control in turn) pairs into four-byte
    units that are all assigned supplementary code points, the shape of UTF-32 without a mark:
    "\\x02\\x02" in UTF-16BE is U+20002 in UTF-32BE, and was called UTF-32. Text written in
    UTF-32 that holds no character of the Basic Multilingual Plane (a space, a line end) in its
    first 64 is rare, and when its UTF-16 reading is not text (emoji read as UTF-16 are private
    use characters: U+1F600 is F600 0001) it is still UTF-32."""
    try:
        text = codecs.getincrementaldecoder(encoding.lower())().decode(data, final=False)
    except UnicodeDecodeError:
        return False
    return all(c != "\x00" and unicodedata.category(c) not in ("Cn", "Co", "Cs") for c in text)


def _encoded_surrogates(data: bytes, at: int) -> str | None:
    """Words for a surrogate encoded as UTF-8 shapes it at ``data[at:]`` (ED A0-BF 80-BF), or
    None: a pair of them is a character beyond U+FFFF written as its two UTF-16 halves, as
    CESU-8, Java's modified UTF-8 and a database's three-byte "utf8" export write an emoji
    (``😀`` as ED A0 BD ED B8 80, where UTF-8 writes F0 9F 98 80); one alone is no character.
    (Before, such a file was "not UTF-8 (byte 3 of the line: b'\\xed')", read as UTF-8 by
    every editor that shows it, naming neither the emoji nor what differs.)"""
    def unit(i: int) -> int | None:
        part = data[i:i + 3]
        if len(part) == 3 and part[0] == 0xED and 0xA0 <= part[1] <= 0xBF \
                and 0x80 <= part[2] <= 0xBF:
            return 0xD000 | (part[1] & 0x3F) << 6 | part[2] & 0x3F
        return None

    high, low = unit(at), unit(at + 3)
    if high is None:
        return None
    if high < 0xDC00 and low is not None and low >= 0xDC00:
        char = chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
        return (f", the first of {data[at:at + 6].hex(' ').upper()}: {char!r} "
                f"(U+{ord(char):04X}) written as two UTF-16 surrogates, as CESU-8 and Java's "
                "modified UTF-8 write it, where UTF-8 writes "
                f"{char.encode().hex(' ').upper()}")
    return (f", the first of {data[at:at + 3].hex(' ').upper()}: the surrogate U+{high:04X} "
            "alone, which is no character")


def not_utf8(error: UnicodeDecodeError, line: int | None = None) -> str:
    """Where the bytes ``error`` was raised for stop being UTF-8, in words for an error that
    names the file: the line (``line``, when the bytes are that line; else the bytes are the
    whole file, past any byte-order mark, and the line is counted here), the byte counted from
    1 in its line and shown, and the fix.

    The bytes are taken from ``error`` itself: a ``utf-8-sig`` decode reports its positions in
    the bytes after the mark, and before, the codebook and LEAF readers looked them up in the
    file's bytes, so a file with a mark was said to fail 3 bytes early, at a byte that is not
    the one. A byte that Latin-1 or Windows-1252 reads as a character is named as that
    character (what a file saved by an older Windows or Mac editor, or Excel's "CSV", holds),
    unless it begins what reads as a UTF-8 sequence cut short or damaged (a lead byte and a
    continuation byte): before, such a file was "not UTF-8 (byte 4 of the line: b'\\xe9')",
    naming neither the é nor the fix."""
    data, start = error.object, error.start
    if line is None:
        line = data.count(b"\n", 0, start) + 1
        start -= data.rfind(b"\n", 0, start) + 1
    byte = data[error.start:error.start + 1]
    continued = b"\x80" <= data[error.start + 1:error.start + 2] <= b"\xbf"
    reading = ""
    if (surrogate := _encoded_surrogates(data, error.start)) is not None:
        reading = surrogate
    elif byte >= b"\xc0" and continued:
        pass  # (UTF-8's shape: a damaged character, not Latin-1 text)
    elif byte >= b"\xa0":  # (Latin-1 and Windows-1252 agree from A0 on)
        reading = f", which Latin-1 and Windows-1252 read as {byte.decode('latin-1')!r}"
    elif (char := byte.decode("cp1252", "replace")) != "\ufffd":
        reading = f", which Windows-1252 reads as {char!r}"
    return (f"line {line}: not UTF-8 (byte {start + 1} of the line: {byte!r}{reading}); "
            "save it as UTF-8")
