"""Where a process's asyncio tasks are waiting, counted: ``kill -USR1 PID`` logs it.

A device process hosts thousands of simulated devices, each an asyncio task; when some of
them fall silent (no call, no log line, an idle CPU), neither a thread dump (py-spy shows one
thread parked in epoll) nor the metrics say where. The census walks each task's chain of
awaits (``cr_await`` / ``gi_yieldfrom``) and counts the tasks per chain, so "4,000 sessions
wait in ``_retrying``'s backoff" and "600 sit in ``_wait_for_request``" can be told apart.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections import Counter
from collections.abc import Iterator
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)
_MAX_DEPTH = 40


def _awaits(task: asyncio.Task[Any]) -> Iterator[tuple[Any, FrameType | None]]:
    """The objects ``task`` awaits through, from its coroutine inward (at most
    ``_MAX_DEPTH``), each with its frame (None for one without: a Future, a gRPC call, a
    coroutine that has finished); the walk ends at the first without a frame."""
    awaited: Any = task.get_coro()
    for _ in range(_MAX_DEPTH):
        if awaited is None:
            return
        frame = (getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
                 or getattr(awaited, "ag_frame", None))
        yield awaited, frame
        if frame is None:
            return
        awaited = (getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
                   or getattr(awaited, "ag_await", None))


def awaited_frames(task: asyncio.Task[Any]) -> list[FrameType]:
    """The frames of the coroutines (and generators) ``task`` awaits through, outermost
    first: what each holds while the task waits is in their ``f_locals``."""
    return [frame for _, frame in _awaits(task) if frame is not None]


def await_chain(task: asyncio.Task[Any]) -> tuple[str, ...]:
    """The task's awaits from its coroutine inward: ``qualname:line`` per frame, then the type
    of the innermost awaited object (a Future, a gRPC call) when it has no frame."""
    return tuple(type(awaited).__name__ if frame is None
                 else f"{frame.f_code.co_qualname}:{frame.f_lineno}"
                 for awaited, frame in _awaits(task))


def census(tasks: set[asyncio.Task[Any]] | None = None, top: int = 15
           ) -> tuple[int, list[tuple[int, str]]]:
    """(number of tasks, the ``top`` most common await chains with their counts)."""
    pending = asyncio.all_tasks() if tasks is None else tasks
    counts = Counter(" > ".join(await_chain(task)) for task in pending)
    return len(pending), [(n, chain) for chain, n in counts.most_common(top)]


def log_census(top: int = 15) -> None:
    total, chains = census(top=top)
    log.info("task census", extra={"tasks": total,
                                   "chains": [{"tasks": n, "chain": c} for n, c in chains]})


def install(loop: asyncio.AbstractEventLoop, signum: int = signal.SIGUSR1) -> None:
    """Log a census on the event loop whenever the process receives ``signum``."""
    loop.add_signal_handler(signum, log_census)
