"""The threads of the reads callers ask of the coordinator: the admin API's (a run's row read
whole and converted, GetResults' display of its deny list) and the dashboard's (its pages and
each render of a live page).

They had the event loop's default executor, a handful of threads (min(32, CPUs + 4): 6 on 2
cores), which the runner shares to load each run it drives (``Runner.drive``) and StartRun to
store a new run: a few GetResults over a run with a 300,000-item deny list (~60 s each)
held every one of its threads, and the runner waited for them to start the next run. Here they
wait for one another, at most ``THREADS`` at once, and the default executor stays the
runner's and StartRun's.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
K = TypeVar("K")

# The reads in progress at once; more wait their turn. They are mostly Python (decoding rows
# and deny lists, composing ledgers), which the GIL runs one at a time: more threads would not
# finish them sooner, and a slow one leaves the other threads to go on with.
THREADS = 4

_pool = ThreadPoolExecutor(THREADS, thread_name_prefix="fedhh-slow-read")


async def off_loop(read: Callable[..., T], /, *args: object) -> T:
    """``read(*args)`` in one of the slow reads' threads, as ``asyncio.to_thread`` would in
    the default executor (the caller's context variables too)."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(
        _pool, functools.partial(context.run, read, *args))


async def shared(running: dict[K, asyncio.Future[T]], key: K, read: Callable[..., T], /,
                 *args: object) -> T:
    """``read(*args)`` in a slow reads' thread (``off_loop``), once for every caller that
    comes while it runs (``running``: key -> the read under way): they wait here, on the
    event loop, holding no thread. A caller that goes away leaves the read to the others
    (shielded); a read that fails after every caller left has its error retrieved, not
    logged as "exception was never retrieved" (each caller raises its own)."""
    under_way = running.get(key)
    if under_way is None:
        under_way = asyncio.ensure_future(off_loop(read, *args))
        running[key] = under_way
        under_way.add_done_callback(lambda done: _read_done(running, key, done))
    return await asyncio.shield(under_way)


async def shared_after(running: dict[K, asyncio.Future[T]], queued: dict[K, asyncio.Future[T]],
                       key: K, read: Callable[..., T], /, *args: object) -> T:
    """``shared``, for a read of what changes (a count): a caller joins only a read begun
    after it came, so that it is told of every write answered before it asked. One that comes
    while a read runs waits for the next, which begins as that one ends, once for every caller
    that came meanwhile (``queued``: key -> that next read): at most one read running and one
    waiting, by key. ``shared`` alone told a caller that had just minted tokens a count read
    before they were stored."""
    before = running.get(key)
    if before is None:
        return await shared(running, key, read, *args)
    after = queued.get(key)
    if after is None:
        async def next_read() -> T:
            await asyncio.wait([before])
            del queued[key]  # (a caller from now on waits for the read begun here)
            return await shared(running, key, read, *args)

        after = queued[key] = asyncio.ensure_future(next_read())
        after.add_done_callback(_retrieved)
    return await asyncio.shield(after)


def _retrieved(done: asyncio.Future[T]) -> None:
    if not done.cancelled():
        done.exception()


def _read_done(running: dict[K, asyncio.Future[T]], key: K, done: asyncio.Future[T]) -> None:
    if running.get(key) is done:
        del running[key]
    if not done.cancelled():
        done.exception()
