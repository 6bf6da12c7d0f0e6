"""Pauses between the tries of something that did not answer (a peer service, the database, a
lock, a scheduler): exponential backoff with full jitter, each pause drawn uniformly from
[0, min(cap, base * 2^tries)]. Of the usual schemes it spreads a crowd's retries the most
(Brooker, "Exponential Backoff and Jitter", AWS Architecture Blog, 2015): without jitter, the
peers that lost a service at one moment all try again at the same moments, and keep doing so.

One piece for every retry loop: the services' (a selector's tries of its leader, the
coordinator's polls of its aggregator and store, its charge's tries, a combiner's of its
workers, the PostgreSQL and state-folder locks' polls), the Dask scheduler's connect and the
devices' retried calls (``fedhh.rpc.participation.RetryPolicy``). Before, each service loop
doubled its own pause to its own cap, and only the selector's drew a jitter. The random source
is not a secret (a pause tells nothing of the data); a seeded one may be given, for tests.

``Holdoff`` is the other shape: no loop that sleeps, but calls that fail at once for a while
after a try failed (the stores' reconnections and lock waits), the while doubling as base * 2^n
does here. It draws no jitter: one process's calls, not a crowd of peers, meet its end."""

from __future__ import annotations

import asyncio
import os
import random

__all__ = ["Backoff", "Holdoff", "ceiling", "full_jitter"]

# A process's draws when a caller gives no source of its own (thread-safe: one C call a draw).
JITTER = random.Random()
# A forked child would otherwise inherit the parent's state and draw its very pauses: workers
# forked from one parent would retry in step, what the jitter is there to prevent. (``random``
# reseeds only its own module-level source so.)
if hasattr(os, "register_at_fork"):  # (not on Windows, where there is no fork)
    os.register_at_fork(after_in_child=JITTER.seed)
# (past this many doublings any cap has been reached; 2.0 ** 30 keeps the product finite)
_MAX_DOUBLINGS = 30


def ceiling(base_s: float, cap_s: float, tries: int) -> float:
    """``min(cap_s, base_s * 2^tries)``: the bound of a pause after ``tries`` failed tries."""
    if not (base_s >= 0 and cap_s >= 0 and tries >= 0):  # (NaN refused too)
        raise ValueError(f"a backoff needs base, cap and tries >= 0, got {base_s}, {cap_s}, "
                         f"{tries}")
    return min(cap_s, base_s * 2.0 ** min(tries, _MAX_DOUBLINGS))


def full_jitter(base_s: float, cap_s: float, tries: int, rng: random.Random) -> float:
    """A pause after ``tries`` failed tries before the last: uniform in [0, min(cap_s,
    base_s * 2^tries)]."""
    return rng.uniform(0, ceiling(base_s, cap_s, tries))


class Backoff:
    """The pauses of one retry loop: ``pause()`` draws the next and counts a try, ``reset()``
    starts again from ``base_s`` (the thing answered). ``rng``: the draws' source (``JITTER``
    if None)."""

    def __init__(self, base_s: float, cap_s: float, rng: random.Random | None = None) -> None:
        ceiling(base_s, cap_s, 0)  # (a negative bound refused now, not at the first pause)
        self.base_s, self.cap_s = base_s, cap_s
        self.rng = JITTER if rng is None else rng
        self.tries = 0

    @property
    def ceiling_s(self) -> float:
        """The most the next pause can be."""
        return ceiling(self.base_s, self.cap_s, self.tries)

    def pause(self) -> float:
        pause = full_jitter(self.base_s, self.cap_s, self.tries, self.rng)
        self.tries += 1
        return pause

    def reset(self) -> None:
        self.tries = 0

    async def sleep(self) -> None:
        """Wait the next pause (``asyncio.sleep``: a cancel ends it)."""
        await asyncio.sleep(self.pause())


class Holdoff:
    """How long something that failed is not tried again (its callers fail at once meanwhile):
    ``base_s`` after a failure, doubling with each failure that follows, to ``cap_s``
    (``ceiling``, as a ``Backoff``'s bound); a success starts again from ``base_s``. The
    caller gives the time (``now``, of one monotonic clock), so a store keeps its own clock as
    its tests' seam."""

    def __init__(self, base_s: float, cap_s: float) -> None:
        ceiling(base_s, cap_s, 0)
        self.base_s, self.cap_s = base_s, cap_s
        self.failures = 0
        self.until = 0.0  # nothing is held off while the clock is at or past it
        self.length_s = 0.0  # the last hold's (0: none since the last success)

    def held(self, now: float) -> bool:
        return now < self.until

    def failed(self, now: float) -> float:
        """Hold off from ``now`` for the next length, and return it."""
        self.length_s = ceiling(self.base_s, self.cap_s, self.failures)
        self.failures += 1
        self.until = now + self.length_s
        return self.length_s

    def succeeded(self) -> None:
        self.failures, self.until, self.length_s = 0, 0.0, 0.0
