"""Which of a dataset's users a device process hosts (`fedhh device --users`).

``START:END`` hosts a range, ``i/N`` shard i of N (N near-equal, disjoint ranges), and ``auto/N``
the first shard of N that no other process holds: a process takes shard i by holding an
exclusive lock on ``<state-dir>/shard-i-of-N.lock`` for its lifetime, and keeps that shard's
device identities in ``<state-dir>/shard-i-of-N/``. Replicas that share the state directory (a
compose service scaled to N, all mounting one volume) thus host disjoint shards without knowing
their own replica number, and a restarted replica takes a free shard over together with the
identities enrolled for it. The kernel drops the lock when the process dies, however it dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
from pathlib import Path
from typing import IO

from fedhh.errors import ConfigError

log = logging.getLogger(__name__)
AUTO = "auto/"
WAIT_S = 5.0


def shard_range(index: int, count: int, num_users: int) -> range:
    """Users of shard ``index`` of ``count``: the shards are disjoint, cover every user, and
    differ in size by at most one (so none is empty)."""
    if count > num_users:
        raise ConfigError(f"{count} shards of {num_users} users: more shards than users")
    return range(index * num_users // count, (index + 1) * num_users // count)


def auto_count(text: str) -> int | None:
    """N for ``auto/N``, None for any other form."""
    if not text.startswith(AUTO):
        return None
    try:
        count = int(text.removeprefix(AUTO))
    except ValueError:
        raise ConfigError(f"--users auto/N needs an integer N, got {text!r}") from None
    if count < 1:
        raise ConfigError(f"--users auto/N needs N >= 1, got {text!r}")
    return count


def user_range(text: str, num_users: int) -> range:
    """``START:END`` (END exclusive, either may be empty) or ``i/N``."""
    try:
        if "/" in text:
            index, count = (int(x) for x in text.split("/"))
            if not 0 <= index < count:
                raise ValueError
            return shard_range(index, count, num_users)
        start_text, _, end_text = text.partition(":")
        start = int(start_text) if start_text else 0
        end = int(end_text) if end_text else num_users
    except ValueError:
        raise ConfigError(f"--users must be START:END, i/N or auto/N, got {text!r}") from None
    if not 0 <= start <= end <= num_users:
        raise ConfigError(f"--users {text!r} is outside the dataset's 0..{num_users}")
    return range(start, end)


class ShardClaim:
    """One shard of ``count``, claimed under ``root`` by holding its lock file open."""

    def __init__(self, root: Path, count: int) -> None:
        self.root = root
        self.count = count
        self.index: int | None = None
        self._lock: IO[bytes] | None = None

    def lock_path(self, index: int) -> Path:
        return self.root / f"shard-{index}-of-{self.count}.lock"

    @property
    def state_dir(self) -> Path:
        if self.index is None:
            raise ConfigError("no shard claimed yet")
        return self.root / f"shard-{self.index}-of-{self.count}"

    def try_claim(self) -> int | None:
        """The lowest shard no other process holds, now locked by this one; None if all are."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigError(f"cannot create the state directory {self.root}: "
                              f"{error.strerror}") from None
        for index in range(self.count):
            try:
                handle = open(self.lock_path(index), "ab")  # noqa: SIM115 - held while we run
            except OSError as error:
                raise ConfigError(f"cannot open {self.lock_path(index)}: "
                                  f"{error.strerror}") from None
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            self._lock, self.index = handle, index
            return index
        return None

    async def claim(self, stop: asyncio.Event, poll_s: float = WAIT_S) -> int | None:
        """A shard, waiting while every one is held (a spare replica stands by until one is
        released, looking again every ``poll_s``); None if ``stop`` is set first."""
        waiting = False
        while not stop.is_set():
            index = self.try_claim()
            if index is not None:
                log.info("claimed a shard", extra={"shard": index, "shards": self.count})
                return index
            if not waiting:
                log.warning("every shard is held by another device process; standing by",
                            extra={"shards": self.count, "state_dir": str(self.root)})
                waiting = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), poll_s)
        return None

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock, self.index = None, None
