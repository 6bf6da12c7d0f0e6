"""Output paths checked before the work that fills them, and written whole or not at all.

Used by the command line (``fedhh.cli.options``) and by the services' own start-up checks
(the coordinator's --ready-file, a device process's --state-dir and --stats-file), which must
refuse a path they cannot write before they act, not after: a device that enrolled first would
have used up its one-time token. Also the exclusive lock (``hold_lock``) by which a service
keeps the state it writes (a SQLite store, a state directory) to itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from fedhh.backoff import Backoff
from fedhh.errors import ConfigError

STDOUT = "-"  # an output path that means standard output
LAST_FOLDER_MADE = "only the last folder of the path is made"  # (check_parent_folder's made)


def check_output(option: str, path: str | None, suffixes: tuple[str, ...] = (),
                 inputs: Mapping[str, str | None] | None = None) -> None:
    """Refuse an output file that cannot be written where it is asked for, before the work
    that produces it rather than after: a folder, a missing or unwritable parent folder, or
    (with ``suffixes``) a name without one of them; or one of the command's ``inputs`` (by
    option), or a file inside an input folder, which writing would replace (before, `simulate
    --dataset users.txt --json users.txt` overwrote the dataset with its results)."""
    if path is None or path == STDOUT:
        return
    target = Path(path)
    for name, given in (inputs or {}).items():
        if not given or not _names_a_file(given):
            continue  # (a built-in dataset's name, an option not given)
        source, written = Path(given).resolve(), target.resolve()
        if written == source or (source in written.parents and target.exists()):
            held = "is" if written == source else "is a file of"
            raise ConfigError(f"{option} {path} {held} the input {name} {given}: writing it "
                              "would replace what the run reads; give another file")
    if target.is_dir():
        example = target / ("results" + (suffixes[0] if suffixes else ".json"))
        raise ConfigError(f"{option} {path} is a folder; give a file name, e.g. {example}")
    if target.exists() and not target.is_file():
        raise ConfigError(f"{option} {path} exists and is not a regular file")
    folder = target.resolve().parent
    if not folder.is_dir():
        raise ConfigError(f"{option} {path}: the folder {folder} does not exist")
    if suffixes and target.suffix.lower() not in suffixes:
        raise ConfigError(f"{option} {path}: the file name must end in one of "
                          f"{', '.join(suffixes)} (the format it is written in)")
    _check_writable(option, path, folder)


def _names_a_file(given: str) -> bool:
    try:
        return Path(given).exists()
    except OSError:
        # (no file has such a name: --codec FILE reaches here as the codebook's JSON, read
        # already, which the OS refused as 'File name too long' before the run)
        return False


def _check_writable(option: str, path: str | Path, folder: Path) -> None:
    """Refuse ``path`` unless a file can be made in ``folder``: what the write will do
    (os.access says yes to /proc, and to a read-only mount)."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".fedhh-check.", suffix=".tmp"):
            pass
    except OSError as error:
        raise ConfigError(f"{option} {path}: cannot write in {folder}: "
                          f"{error.strerror or error}") from None


def check_output_dir(option: str, path: str | Path | None) -> None:
    """Refuse an output folder that cannot be made or written, before the work: a file in its
    place, or a nearest existing folder on its path that cannot be written."""
    if path is None:
        return
    target = Path(path)
    if str(path) == "":
        raise ConfigError(f"{option} must not be empty")
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{option} {path} exists and is not a folder")
    existing = target.resolve()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{option} {path}: {existing} is not a folder")
    _check_writable(option, path, existing)


def check_parent_folder(subject: str, path: str | Path, made: str, lost: str) -> None:
    """Refuse ``path`` when the folder it would be made in does not exist, naming that folder:
    state a service keeps (a store, a state directory) is made in an existing folder only,
    never with a tree of folders above it, since a typo in a parent would start the state
    afresh (``lost``) beside the real one. ``subject`` opens the message (the option and the
    path), ``made`` says what is made."""
    parent = Path(path).resolve().parent
    if not parent.is_dir():
        raise ConfigError(f"{subject}: the folder {parent} does not exist; {made} (a mistyped "
                          f"path would {lost}): check the path, or make its parent first")


def check_store_file(option: str, path: str | Path) -> None:
    """Refuse a file the process must read and keep writing (a store, a key) unless it is a
    regular file it can open for both, or can be made: its nearest existing folder on the path
    takes a new file."""
    target = Path(path)
    if target.exists():
        if not target.is_file():
            raise ConfigError(f"{option} {path} exists and is not a regular file")
        try:
            with open(target, "r+b"):
                pass
        except OSError as error:
            raise ConfigError(f"{option} {path}: cannot read and write it: "
                              f"{error.strerror or error}") from None
        return
    check_output_dir(option, target.absolute().parent)


def write_output(option: str, path: str, text: str) -> None:
    """Write an output file whole or not at all (a failed write keeps what was there): its
    text goes to a temporary sibling that then replaces it. A failure is one line. ``-``
    (``STDOUT``) is standard output, as for most tools."""
    from fedhh.data.dataset import atomic_file

    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        with atomic_file(Path(path), "w") as out:
            out.write(text)
    except OSError as error:
        raise ConfigError(f"{option} {path}: cannot write it: {error.strerror or error}"
                          ) from None


def open_new(tmp: str | Path, mode: int = 0o600, *, append: bool = False) -> int:
    """A descriptor, for writing, of ``tmp`` made new (the temporary file a state or secret
    file is written to before it is renamed into place): whatever is at the name goes first
    (a write cut short left it), and a symbolic link put there in the meantime is refused,
    not followed. Before, such a link was followed and the file it named written over, and
    a stale temporary kept its own mode (a secret written into one of 0644 was readable by
    all). ``append``: every write goes to the end (a journal that keeps appending to the
    file once renamed)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    return os.open(tmp, flags | (os.O_APPEND if append else 0), mode)


def hold_lock(path: Path, timeout_s: float, *, cannot_open: str, busy: str, waiting: str,
              context: dict[str, str], logger: logging.Logger) -> int:
    """The descriptor of an exclusive lock (flock) on ``path``, held until it is closed or the
    process ends: one process at a time over a piece of state (a coordinator's SQLite store, an
    aggregation service's state directory). A previous holder is waited for up to
    ``timeout_s`` (a restart overlapping the old process's exit), ``logger`` saying ``waiting``
    with ``context``; then ConfigError ``busy``. ``cannot_open`` prefixes the reason a lock file
    cannot be made."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as error:
        raise ConfigError(f"{cannot_open}: {error.strerror}") from None
    until, backoff, said = time.monotonic() + timeout_s, Backoff(0.1, 2.0), False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= until:
                os.close(fd)
                raise ConfigError(busy) from None
            if not said:  # (once: each poll said it, some 30 lines over a minute's wait)
                logger.warning(waiting, extra=context)
                said = True
            time.sleep(backoff.pause())  # polling the lock: flock has no timeout of its own
