"""The durable record of what became of each round (``fedhh aggregator --state-dir DIR``).

Without it, a restarted aggregator knows nothing of the rounds it held, and the coordinator
cannot tell "it reached unmasking, then the aggregator died" from "nothing was revealed". The
journal is one append-only file, ``DIR/outcomes.jsonl``, one JSON object per line, each line
written and fsync'd before the event it records takes effect:

- ``open``: a round was opened (round id, session id; the combiner adds the round's shards as
  ``detail``, what it needs to take the round over again after a restart);
- ``shards_opened`` (the combiner's): every shard's worker accepted its OpenRound, written
  before the coordinator is told the round opened, so after a restart a worker's durable
  "unknown" for such a shard is a lost record, not a shard that never reached it;
- ``unmask``: unmask requests are about to be sent: written, and fsync'd, *before* the first
  unmask request is visible to any device, so after a crash it is on disk whenever a device
  may have revealed a share;
- ``finish``: the round released a sum or aborted (reason, whether unmasking had begun, the
  contributor count; a combiner's released round adds ``held``: its workers hold their shard
  sums until the total is delivered or dropped, so a restarted combiner can fetch them again,
  and ``shards``, the indices of the shards whose sums made the total, the only ones it
  fetches again, with ``lost``, those of the others that reached unmasking);
- ``delivered``: the whole sum was streamed to the coordinator (or, held for it, the coordinator
  said it read it);
- ``dropped`` (the combiner's): a released total nobody will fetch (cancelled, expired) was
  dropped, and its workers may drop their shard sums.

A journal written before ``held`` and ``dropped`` existed reads as before: its released rounds
hold nothing at their workers.

Each line carries ``v``, the oldest version of this format that reads it rightly: 1, or 2 for
the combiner's ``shards_opened``, ``dropped`` and a ``finish`` with ``held``, which a version 1
reader would refuse as damage or, ``held``, misread as a total lost with the process. So an
aggregator's journal stays readable by the services before version 2, and an older combiner
refuses a newer journal rather than misread it (those before version 2 call it damaged). A line
of a version past :data:`_VERSION` is refused as written by a newer fedhh, naming both versions.
Version 1 lines of every kind (the combiner's among them, before their version was 2) read as
before.

Loading replays the file into one :class:`RoundRecord` per round. A final line without its
newline is a write that a crash interrupted (nothing acted on it yet) and is dropped; any other
line that does not parse means the file was damaged, and loading refuses with the line number
rather than guess. The file is bounded: when it holds more than ``compact_after`` lines it is
rewritten (temporary file, fsync, atomic rename, fsync of the directory) with only the records
the caller keeps (running rounds and the bounded tombstones).

Writes go through one worker thread, so they never block the event loop and land in the order
they were submitted.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import logging
import math
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fedhh.errors import ConfigError
from fedhh.output_paths import LAST_FOLDER_MADE, check_parent_folder, hold_lock, open_new
from fedhh.rpc.errors import MAX_DETAILS
from fedhh.secagg.shards import MAX_SHARDS
from fedhh_aggregator.rounds import MAX_ROUND_ID_BYTES

__all__ = ["Journal", "RenameNotDurable", "RoundRecord"]

log = logging.getLogger(__name__)


class RenameNotDurable(OSError):
    """A rewrite's new file replaced the journal (it is the one in use), but the folder could
    not be synced: a crash before it is may bring back the previous file. Before, this failure
    was reported as any other, "(it is left as it was)", which it no longer was."""

    def __str__(self) -> str:
        return (f"{self.strerror} syncing the journal's folder once its new file had replaced "
                "it (the new file is in use; a crash before the folder is synced may bring "
                "back the previous one)")


FILE_NAME = "outcomes.jsonl"
LOCK_NAME = "outcomes.lock"  # held by the one service of the directory (Journal.load)
_VERSION = 2  # the newest this reads; each line's own: _version_of
_V2_OPS = ("shards_opened", "dropped")
_OPS = ("open", "shards_opened", "unmask", "finish", "delivered", "dropped")
OUTCOME_STATES = ("released", "aborted")
SESSION_ID_BYTES = 32  # SHA-256: fedhh.secagg.session_id_of, combined.plan_id
MAX_CONTRIBUTORS = 2**32 - 1  # GetOutcome's num_contributors is a uint32
MAX_REASON = MAX_DETAILS  # what a status's details carry


@dataclass(frozen=True)
class RoundRecord:
    """Everything the journal knows about one round."""

    round_id: bytes
    session_id: bytes
    opened_at: float
    unmask_started: bool = False
    state: str = ""  # "" (no outcome recorded), "released" or "aborted"
    reason: str = ""
    contributors: int = 0
    delivered: bool = False
    finished_at: float = 0.0
    detail: dict[str, Any] | None = None  # the opener's own JSON data (the combiner's shards)
    shards_opened: bool = False  # (the combiner's) every shard's worker accepted its open
    held: bool = False  # (the combiner's) released: its workers hold the shard sums
    dropped: bool = False  # (the combiner's) released, its total dropped unfetched
    # (the combiner's) released: the shards whose sums made the total (None: not recorded,
    # a journal from before the field)
    released_shards: tuple[int, ...] | None = None
    # and the other shards that reached unmasking (None: not recorded)
    lost_shards: tuple[int, ...] | None = None


def _version_of(op: str, fields: dict[str, Any]) -> int:
    """The oldest version that reads a line rightly (module docstring)."""
    return 2 if op in _V2_OPS or fields.get("held") or "shards" in fields \
        or "lost" in fields else 1


def _line(op: str, round_id: bytes, **fields: Any) -> bytes:
    entry = {"v": _version_of(op, fields), "op": op, "round": round_id.hex(), **fields}
    return (json.dumps(entry, separators=(",", ":")) + "\n").encode()


def _apply(records: dict[bytes, RoundRecord], entry: dict[str, Any]) -> None:
    """Apply one record; ValueError for one whose values could not have been written (a line
    that parses but was changed): each would otherwise come back from GetOutcome, an
    impossible count as INTERNAL, an unknown state as ABORTED."""
    op = entry["op"]
    round_id = bytes.fromhex(entry["round"])
    if not 1 <= len(round_id) <= MAX_ROUND_ID_BYTES:
        raise ValueError(f"a round id is 1 to {MAX_ROUND_ID_BYTES} bytes, not {len(round_id)}")
    at = entry.get("at", 0.0)
    if not isinstance(at, int | float) or isinstance(at, bool) or not 0 <= at < math.inf:
        raise ValueError(f"a time is a finite number of seconds, not {at!r:.40}")
    if op == "open":
        detail = entry.get("detail")
        if detail is not None and not isinstance(detail, dict):
            raise ValueError("an open record's detail is a JSON object")
        session_id = bytes.fromhex(entry["session"])
        if len(session_id) != SESSION_ID_BYTES:
            raise ValueError(f"a session id is {SESSION_ID_BYTES} bytes, not {len(session_id)}")
        records[round_id] = RoundRecord(round_id, session_id, float(at), detail=detail)
        return
    record = records.get(round_id)
    if record is None:  # its open record was compacted away with it: nothing to update
        return
    if op == "shards_opened":
        records[round_id] = replace(record, shards_opened=True)
    elif op == "unmask":
        records[round_id] = replace(record, unmask_started=True)
    elif op == "finish":
        state, reason = entry["state"], entry.get("reason", "")
        contributors = entry.get("contributors", 0)
        reached_unmask = entry.get("reached_unmask", False)
        held = entry.get("held", False)
        shards, lost = entry.get("shards"), entry.get("lost")
        if state not in OUTCOME_STATES:
            raise ValueError(f"an outcome is one of {', '.join(OUTCOME_STATES)}, not "
                             f"{state!r:.40}")
        if type(contributors) is not int or not 0 <= contributors <= MAX_CONTRIBUTORS:
            raise ValueError(f"a contributor count is 0 to {MAX_CONTRIBUTORS}, not "
                             f"{contributors!r:.40}")
        if not (isinstance(reason, str) and isinstance(reached_unmask, bool)
                and isinstance(held, bool)):
            raise ValueError("a reason is text, reached_unmask and held true or false")
        for what, indices in (("released", shards), ("lost", lost)):
            if indices is not None and not _shard_indices(indices):
                raise ValueError(f"{what} shards are a list of shard indices, not "
                                 f"{indices!r:.40}")
        records[round_id] = replace(
            record, state=state, reason=reason[:MAX_REASON],
            unmask_started=record.unmask_started or reached_unmask,
            contributors=contributors, finished_at=float(at), held=held,
            released_shards=None if shards is None else tuple(shards),
            lost_shards=None if lost is None else tuple(lost))
    elif op == "delivered":
        records[round_id] = replace(record, delivered=True)
    elif op == "dropped":
        records[round_id] = replace(record, dropped=True)


def _shard_indices(value: Any) -> bool:
    return isinstance(value, list) and len(value) <= MAX_SHARDS and all(
        type(i) is int and 0 <= i < MAX_SHARDS for i in value)


def _record_lines(record: RoundRecord) -> Iterable[bytes]:
    """The minimal lines that replay to ``record``."""
    extra = {} if record.detail is None else {"detail": record.detail}
    yield _line("open", record.round_id, session=record.session_id.hex(), at=record.opened_at,
                **extra)
    if record.shards_opened:
        yield _line("shards_opened", record.round_id, at=record.opened_at)
    if record.unmask_started:
        yield _line("unmask", record.round_id, at=record.opened_at)
    if record.state:
        held: dict[str, Any] = {"held": True} if record.held else {}
        if record.released_shards is not None:
            held["shards"] = list(record.released_shards)
        if record.lost_shards is not None:
            held["lost"] = list(record.lost_shards)
        yield _line("finish", record.round_id, state=record.state, reason=record.reason,
                    reached_unmask=record.unmask_started, contributors=record.contributors,
                    at=record.finished_at, **held)
    if record.delivered:
        yield _line("delivered", record.round_id, at=record.finished_at)
    if record.dropped:
        yield _line("dropped", record.round_id, at=record.finished_at)


class Journal:
    """The append-only outcome journal in ``directory`` (module docstring).

    :attr:`records` mirrors the file: every record is applied in memory when it is submitted,
    by the same function that replays the file, and written (in submission order) by the worker
    thread. Use from one event loop.
    """

    @classmethod
    def sized(cls, directory: Path, max_tombstones: int, max_rounds: int) -> Journal:
        """A journal rewritten once it holds a few times the lines of what it must keep (the
        outcomes of up to ``max_tombstones`` finished and ``max_rounds`` open rounds)."""
        return cls(directory, compact_after=max(64, 4 * (max_tombstones + max_rounds)))

    def __init__(self, directory: Path, compact_after: int = 20_000,
                 lock_timeout_s: float = 60.0) -> None:
        self.directory = Path(directory)
        self.path = self.directory / FILE_NAME
        self.lock_timeout_s = lock_timeout_s
        self._lock_fd: int | None = None
        self.compact_after = compact_after
        self.records: dict[bytes, RoundRecord] = {}
        self._lines = 0
        self._fd: int | None = None
        self._torn_at: int | None = None  # where a failed write's part begins, until cut
        self._closed = False
        self._worker = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="outcome-journal")

    # -- loading -------------------------------------------------------------------------------

    def load(self) -> dict[bytes, RoundRecord]:
        """Replay the file (the directory is created if needed, as the path's last folder
        only) into :attr:`records`, once this journal holds the directory (:meth:`_lock`).
        Before, every missing folder was made: a mistyped parent started an empty journal,
        and the service forgot every round it had finished (what it answers GetOutcome from)."""
        check_parent_folder(f"the state directory {self.directory}", self.directory,
                            LAST_FOLDER_MADE, "start an empty journal")
        try:
            self.directory.mkdir(exist_ok=True)
        except FileExistsError:  # (strerror "File exists" read as if the folder were fine)
            raise ConfigError(f"the state directory {self.directory} is a file, not a "
                              "folder") from None
        except OSError as error:
            raise ConfigError(f"cannot read the state directory {self.directory}: "
                              f"{error.strerror}") from None
        self._lock()
        try:
            return self._replay()
        except BaseException:
            self._unlock()
            raise

    def _lock(self) -> None:
        """An exclusive lock (flock) on ``DIR/outcomes.lock`` for as long as the journal is
        open: one service per state directory. A previous holder is waited for up to
        ``lock_timeout_s`` (a restart overlapping the old process's exit), then ConfigError.
        Before, a second aggregator given the directory of a running one started beside it:
        each appended to the file and each rewrite dropped the other's lines (the other went
        on appending to the replaced file), so a round's ``unmask`` could be lost."""
        if self._lock_fd is not None:
            return
        path = self.directory / LOCK_NAME
        self._lock_fd = hold_lock(
            path, self.lock_timeout_s, cannot_open=f"cannot open {path}",
            busy=f"another service holds the state directory {self.directory} (its lock "
                 f"{path}) after {self.lock_timeout_s:g} s: each aggregator, worker and "
                 "combiner needs a --state-dir of its own",
            waiting="waiting for another service to release the state directory",
            context={"path": str(self.directory)}, logger=log)

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None

    def _replay(self) -> dict[bytes, RoundRecord]:
        try:
            data = self.path.read_bytes() if self.path.exists() else b""
        except OSError as error:  # (the file's name: "Is a directory" is about it)
            raise ConfigError(f"cannot read the journal {self.path}: {error.strerror}") from None
        records: dict[bytes, RoundRecord] = {}
        lines = data.split(b"\n")
        torn = lines.pop()
        if torn:  # not b"": the last write was interrupted before its newline
            kept = self._keep_torn(torn)
            log.warning("dropping an interrupted last journal line; its bytes are kept in %s",
                        kept, extra={"path": str(self.path), "bytes": len(torn),
                                     "kept": str(kept)})
        for number, raw in enumerate(lines, start=1):
            newer = 0
            try:
                entry = json.loads(raw)
                version = entry.get("v") if isinstance(entry, dict) else None
                if type(version) is int and version > _VERSION:
                    newer = version
                elif type(version) is not int or version < 1 or entry.get("op") not in _OPS:
                    raise ValueError("not a journal record")
                else:
                    _apply(records, entry)
            # (RecursionError: a line nested thousands deep; before, a traceback at the start)
            except (ValueError, KeyError, TypeError, RecursionError) as error:
                raise ConfigError(f"{self.path}:{number} is damaged ({error}); move the file "
                                  "away to start without the record of earlier rounds") from None
            if newer:  # (not damage: before, "damaged", and the advice lost every record)
                raise ConfigError(
                    f"{self.path}:{number} was written by a newer fedhh (journal version "
                    f"{newer}; this one reads versions 1 to {_VERSION}): start the newer "
                    "version on it, or move the file away to start without the record of "
                    "earlier rounds")
        self.records = records
        return records

    def _keep_torn(self, torn: bytes) -> Path:
        """A copy of an interrupted last line, made (fsync'd) before the start's rewrite drops
        it from the journal: ``outcomes.jsonl.torn.N``, the first N free or holding the same
        bytes (a start that failed after keeping them). A write cut short is a record's
        prefix, but a damaged file can end the same way: before, the bytes were dropped and
        only a warning said so, and whatever they were went with them."""
        for n in itertools.count(1):
            kept = self.path.with_name(f"{FILE_NAME}.torn.{n}")
            try:
                fd = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                with contextlib.suppress(OSError):
                    if kept.read_bytes() == torn:
                        return kept
                continue
            except OSError as error:
                raise ConfigError(self._torn_unkept(torn, kept, error)) from None
            try:
                _write_all(fd, torn)
                os.fsync(fd)
            except OSError as error:
                with contextlib.suppress(OSError):
                    os.unlink(kept)
                raise ConfigError(self._torn_unkept(torn, kept, error)) from None
            finally:
                os.close(fd)
            return kept
        raise AssertionError("unreachable")  # (itertools.count never ends)

    def _torn_unkept(self, torn: bytes, kept: Path, error: OSError) -> str:
        return (f"{self.path} ends in an interrupted line ({len(torn)} bytes) that cannot be "
                f"kept in {kept} before it is dropped: {error.strerror or error}; the journal "
                "is left as it is")

    def settle(self, round_id: bytes, reason: str) -> RoundRecord:
        """Record, in memory only (the next :meth:`rewrite` writes it), that a round without
        an outcome was lost: aborted for ``reason``."""
        record = self.records[round_id]
        _apply(self.records, {"op": "finish", "round": round_id.hex(), "state": "aborted",
                              "reason": reason, "reached_unmask": record.unmask_started,
                              "contributors": 0, "at": time.time()})
        return self.records[round_id]

    def rewrite(self) -> None:
        """Replace the file by the minimal lines of :attr:`records` (temporary file, fsync,
        atomic rename, fsync of the directory) and open it for appends; ConfigError naming the
        file if it cannot be (the disk full at a start: before, the aggregator stopped with
        "error: No space left on device" alone), saying whether it was left as it was or
        replaced without its folder synced (``RenameNotDurable``)."""
        try:
            self._rewrite(list(self.records.values()))
        except RenameNotDurable as error:
            raise ConfigError(f"the outcome journal {self.path} was rewritten, but not "
                              f"durably: {error}") from None
        except OSError as error:
            raise ConfigError(f"cannot rewrite the outcome journal {self.path}: "
                              f"{error.strerror or error} (it is left as it was)") from None

    def _rewrite(self, records: list[RoundRecord]) -> None:
        tmp = self.path.with_name(FILE_NAME + ".tmp")
        data = b"".join(line for record in records for line in _record_lines(record))
        # The descriptor that writes the new file is the one that appends to it once renamed
        # (it follows the file): nothing can fail between the rename and the switch. Before,
        # the directory and the renamed file were opened after the rename, and a failed open
        # (EMFILE) left the appends going to the replaced file, unlinked: every later line
        # lost, each of those rounds "never opened" to the coordinator after a restart.
        fd = open_new(tmp, append=True)  # (a link left at the name is not followed)
        try:
            _write_all(fd, data)
            os.fsync(fd)
            os.replace(tmp, self.path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # (its part takes room the journal's own lines need)
            raise
        replaced, self._fd = self._fd, fd
        self._torn_at = None  # (a new file: nothing of a failed write is in it)
        self._lines = data.count(b"\n")
        if replaced is not None:
            with contextlib.suppress(OSError):
                os.close(replaced)
        try:
            directory = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(directory)  # the rename itself is durable
            finally:
                os.close(directory)
        except OSError as error:  # (past the rename: the journal is not as it was)
            raise RenameNotDurable(error.errno, error.strerror or str(error)) from None

    # -- writing -------------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        """Append one line durably, or leave the file as it was and raise OSError: a write
        that failed part way (the disk full: the part that fit was written) is cut off again.
        Before, its part stayed, and the next line, once there was room, was appended to it:
        one damaged line in the middle of the file, which the next start refused to load
        (the operator told to move the journal away, with the record of every round)."""
        if self._fd is None:
            raise OSError("the journal is not open")
        if self._torn_at is not None:  # a failed write's part could not be cut off then
            os.ftruncate(self._fd, self._torn_at)
            self._torn_at = None
        end = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            _write_all(self._fd, data)
            os.fsync(self._fd)
        except OSError:
            try:
                os.ftruncate(self._fd, end)
            except OSError:
                self._torn_at = end
            raise
        self._lines += 1

    def _submit(self, line: bytes) -> concurrent.futures.Future[None]:
        if self._closed:
            failed: concurrent.futures.Future[None] = concurrent.futures.Future()
            failed.set_exception(OSError("the journal is closed"))
            return failed
        _apply(self.records, json.loads(line))
        return self._worker.submit(self._write, line)

    def _submit_logged(self, line: bytes) -> concurrent.futures.Future[None]:
        written = self._submit(line)
        written.add_done_callback(_log_failure)
        return written

    async def opened(self, round_id: bytes, session_id: bytes,
                     detail: dict[str, Any] | None = None) -> None:
        """Record (durably, before returning) that a round was opened; raises OSError."""
        extra = {} if detail is None else {"detail": detail}
        await asyncio.wrap_future(self._submit(
            _line("open", round_id, session=session_id.hex(), at=time.time(), **extra)))

    async def shards_opened(self, round_id: bytes) -> None:
        """Record (durably, before returning) that every shard of a combiner's round was
        accepted by its worker; raises OSError."""
        await asyncio.wrap_future(self._submit(_line("shards_opened", round_id,
                                                     at=time.time())))

    async def unmask_started(self, round_id: bytes) -> None:
        """Record (durably, before returning) that unmask requests are about to go out;
        raises OSError, and then none may be sent."""
        await asyncio.wrap_future(self._submit(_line("unmask", round_id, at=time.time())))

    def unmask_observed(self, round_id: bytes) -> None:
        """Record, without waiting, that unmasking began elsewhere: the combiner learns it from
        its workers, each of which journaled it before any of its unmask requests went out."""
        self._submit_logged(_line("unmask", round_id, at=time.time()))

    def finished(self, round_id: bytes, state: str, reason: str, reached_unmask: bool,
                 contributors: int, *, held: bool = False,
                 shards: Sequence[int] | None = None, lost: Sequence[int] | None = None
                 ) -> concurrent.futures.Future[None]:
        """Record a round's outcome (written in order, without waiting; the write's future,
        as :meth:`delivered`'s); ``held``: a combiner's released round whose workers hold
        their shard sums, ``shards``: the indices of the shards whose sums made its total,
        ``lost``: of the others, those that reached unmasking."""
        extra: dict[str, Any] = {"held": True} if held else {}
        if shards is not None:
            extra["shards"] = list(shards)
        if lost is not None:
            extra["lost"] = list(lost)
        return self._submit_logged(_line(
            "finish", round_id, state=state, reason=reason[:MAX_REASON],
            reached_unmask=reached_unmask, contributors=contributors, at=time.time(), **extra))

    def delivered(self, round_id: bytes) -> concurrent.futures.Future[None]:
        """Record that the whole sum reached the coordinator (written in order, without
        waiting); the write's future, for a caller that must know it is on disk (a failure is
        logged either way)."""
        return self._submit_logged(_line("delivered", round_id, at=time.time()))

    def dropped(self, round_id: bytes) -> concurrent.futures.Future[None]:
        """Record that a released total was dropped unfetched, as :meth:`delivered` does."""
        return self._submit_logged(_line("dropped", round_id, at=time.time()))

    def keep_only(self, round_ids: Iterable[bytes]) -> None:
        """Drop every other record from memory and, once the file is long, from the file."""
        keep = set(round_ids)
        for round_id in [r for r in self.records if r not in keep]:
            del self.records[round_id]
        if self._lines > self.compact_after and not self._closed:
            self._lines = 0  # (asked once; the rewrite resets the count)
            snapshot = list(self.records.values())
            self._worker.submit(self._rewrite, snapshot).add_done_callback(_log_failure)

    def close(self) -> None:
        """Finish the submitted writes and close the file."""
        self._closed = True
        self._worker.shutdown(wait=True)
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        self._unlock()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _log_failure(future: concurrent.futures.Future[None]) -> None:
    error = future.exception()
    if error is not None:
        log.error("could not write the outcome journal: %s", error)
