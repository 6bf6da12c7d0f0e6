"""Scratch folders beside a dataset being built, and the signals held while one changes hands.

A build (`fedhh.data.synthetic.generate_synthetic`, `fedhh.data.builder.ShardedBuilder`,
`fedhh.data.dataset.atomic_directory`) works in a scratch folder in its target's folder (the
same file system: the result is renamed into place) and removes it however the build ends. The
CLI takes Ctrl-C and SIGTERM as KeyboardInterrupt, raised at whatever line Python is running
when the signal comes, so:

* a scratch folder's name is chosen before the folder exists (`scratch_path`), and the folder is
  made inside the ``try`` whose ``finally`` removes it: an interruption before, during or after
  the ``mkdir`` leaves nothing. (`tempfile.mkdtemp` makes the folder and runs more Python before
  it returns the name, and the builds called it before their ``try``: an interruption in
  between left a folder that nothing removed.)
* `hold_signals` blocks SIGINT and SIGTERM for a step that must not be cut, such as forking a
  pool's workers (a signal handled inside ``os.fork``'s at-fork callbacks raises there, where
  Python prints the KeyboardInterrupt as "Exception ignored" and drops it: the build went on
  and the command ended 0) or swapping a dataset for its replacement; `release_signals` lets a
  signal that came meanwhile be handled at a point the caller chose.
"""

from __future__ import annotations

import secrets
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# What the CLI takes as Ctrl-C (fedhh.cli.main: SIGTERM for the commands that build datasets).
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


def scratch_path(parent: Path, prefix: str) -> Path:
    """A name for a new scratch folder in ``parent``: ``prefix`` then 16 random hex digits. Not
    created here: make it (``path.mkdir(mode=0o700)``, failing should the name be taken) inside
    the ``try`` that removes it."""
    return parent / f"{prefix}{secrets.token_hex(8)}"


def hold_signals() -> frozenset[int] | None:
    """Block SIGINT and SIGTERM in this thread (a process-wide signal then waits for a thread
    that does not block it: the main thread once it releases them); the mask to give
    `release_signals`. None where there is no ``pthread_sigmask`` (Windows: nothing held).
    Threads and forked processes started meanwhile inherit the mask: a pool's workers restore
    it themselves (`fedhh.data.synthetic`)."""
    if not hasattr(signal, "pthread_sigmask"):
        return None
    # Each call handles the signals that came before it (its handler may raise): the mask is
    # read first, so that one raised by the blocking call is raised with the mask restored.
    previous = frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, ()))
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        raise
    return previous


def release_signals(previous: frozenset[int] | None) -> None:
    """Restore the mask `hold_signals` returned: a signal held meanwhile is handled now (the
    CLI's handler raises KeyboardInterrupt from this call)."""
    if previous is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def signals_held() -> Iterator[None]:
    """`hold_signals` for the block; a signal held meanwhile is handled as the block ends."""
    previous = hold_signals()
    try:
        yield
    finally:
        release_signals(previous)
