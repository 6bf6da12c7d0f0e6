"""Unary calls opened whose request has not arrived: a port holds at most so many of them, each
for at most so long.

Until its request arrives, a unary call's caller is nobody at the coordinator's ``Enroll``
(its enrollment token is in the request) and at every device call of the aggregator (their
signed credentials are in the request): no check on the metadata can refuse it. gRPC puts no
deadline on a unary request (its handler runs once core has read the request, however long
that takes) and no cap on such calls, and each costs ~21 KB in gRPC core and the asyncio
server: 80,000 opened with their headers only held a coordinator at 1.8 GB, and it kept that
memory after they left. On the framed port, whose unary requests were already due within
10 s, each costs ~3.5 KB, but 65,536 per connection over 16,384 connections were allowed.

Honest calls carry their request with their headers (the framed client writes OPEN and
MESSAGE together; gRPC sends HEADERS and DATA in one write), so a call waits here about one
turn of the event loop: the cap is not reached by a fleet's bursts, only by callers that hold
calls open without their requests. A call refused at the cap is answered UNAVAILABLE, which
devices retry after a backoff, as they retry a call gRPC core sheds. A caller that keeps the
cap filled delays other callers' unary calls (docs/threat-model.md, "The coordinator's
limits"); it cannot grow the service's memory.

A worker counts its session streams waiting for their devices' opens the same way
(``fedhh_aggregator.session_stream``, ``--max-unopened-sessions``): the device is nobody until
its open, and it answers the worker's challenge, so a place is held for a round trip.
"""

from __future__ import annotations

from prometheus_client import Counter

from fedhh.errors import ConfigError

__all__ = ["MAX_WAITING_REQUESTS", "REQUEST_TIMEOUT_S", "RequestWaits"]

# ~86 MB of gRPC's calls, ~14 MB of the framed port's.
MAX_WAITING_REQUESTS = 4096
# A unary request's deadline, from its call's start, on every port a device reaches: gRPC's
# and the framed port's (each port's RequestWaits) and the Connect port's body
# (``connect.ConnectServer``'s ``body_timeout_s``), each taking this one figure.
REQUEST_TIMEOUT_S = 10.0

REFUSED = Counter("fedhh_request_waits_refused_total",
                  "Calls refused because too many calls of the port waited for their "
                  "requests (unary calls; session streams for their opens)", ["port"])


class RequestWaits:
    """The calls of one port waiting for their requests (``port`` names it in the refusals'
    metric): :meth:`take` a place when a call opens (False: the port holds ``limit`` already;
    answer UNAVAILABLE with :attr:`busy`), :meth:`release` it once the request arrived or the
    call ended, and end a call still waiting after ``timeout_s`` DEADLINE_EXCEEDED with
    :attr:`late`."""

    __slots__ = ("_refused", "limit", "timeout_s", "waiting")

    def __init__(self, port: str, limit: int = MAX_WAITING_REQUESTS,
                 timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(f"the cap on calls waiting for their requests must be a positive "
                              f"integer, got {limit!r}")
        if not 0 < timeout_s < float("inf"):
            raise ConfigError(f"a request's timeout must be a positive number of seconds, got "
                              f"{timeout_s!r}")
        self.limit = limit
        self.timeout_s = float(timeout_s)
        self.waiting = 0
        self._refused = REFUSED.labels(port)

    def take(self) -> bool:
        if self.waiting >= self.limit:
            self._refused.inc()
            return False
        self.waiting += 1
        return True

    def release(self) -> None:
        self.waiting -= 1

    @property
    def busy(self) -> str:
        return (f"busy: {self.limit} calls wait for their requests here; retry after a "
                f"backoff")

    @property
    def late(self) -> str:
        return f"the request did not arrive within {self.timeout_s:g} s"
