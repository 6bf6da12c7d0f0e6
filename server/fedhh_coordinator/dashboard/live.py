"""The live stream of a dashboard page: server-sent events carrying the page's regions.

Every ``interval_s`` the page's regions are rendered again and those whose HTML changed are
sent (``event: region``, data ``{"id", "html"}``), with the clock; ``synced`` follows the first
full set; ``signed-out`` ends the stream when the session does. The page's script puts each
region in place. A stream holds one of the few connections a browser keeps per site, so a
session keeps at most ``MAX_SESSION_STREAMS`` (a new one closes the session's oldest: a page
the browser left without closing its stream) and all sessions at most ``MAX_STREAMS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from fedhh.errors import NotFoundError, StoreDamaged
from fedhh_coordinator.dashboard import pages
from fedhh_coordinator.dashboard.auth import COOKIE, Sessions
from fedhh_coordinator.dashboard.markup import Html, esc

MAX_STREAMS = 32
MAX_SESSION_STREAMS = 4
STREAM_HEADERS = {"Cache-Control": "no-store", "Content-Type": "text/event-stream"}


class LiveStreams:
    def __init__(self, sessions: Sessions, interval_s: float) -> None:
        self.sessions = sessions
        self.interval_s = interval_s
        self._stops: dict[str, list[asyncio.Event]] = {}  # session -> its streams' stop flags

    @property
    def open(self) -> int:
        return sum(len(stops) for stops in self._stops.values())

    async def serve(self, request: web.Request,
                    regions: Callable[[], Awaitable[dict[str, Html]]],
                    headers: dict[str, str]) -> web.StreamResponse:
        """Stream ``await regions()`` (which may read the store in a thread) until the
        session ends, the client leaves, or a newer stream of the session takes this one's
        place; ``headers`` go on the response."""
        session = request.cookies.get(COOKIE) or ""
        mine = self._stops.setdefault(session, [])
        if len(mine) >= MAX_SESSION_STREAMS:
            mine[0].set()  # a page left open elsewhere, or one the browser has not closed
        elif self.open >= MAX_STREAMS:
            raise web.HTTPServiceUnavailable(text="too many live views open")
        stop = asyncio.Event()
        mine.append(stop)
        response = web.StreamResponse(headers={**headers, **STREAM_HEADERS})
        try:
            await response.prepare(request)
            sent: dict[str, str] = {}
            while self.sessions.valid(session) and not stop.is_set():
                try:
                    current = {**await regions(), "clock": esc(pages.when(time.time()))}
                except (NotFoundError, StoreDamaged):  # gone, or no longer reads back
                    break
                for name, content in current.items():
                    if sent.get(name) != content:
                        await response.write(_event("region", {"id": name, "html": content}))
                        sent[name] = content
                if len(sent) == len(current) and "synced" not in sent:
                    await response.write(_event("synced", {}))  # every region is current
                    sent["synced"] = ""
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval_s)
            if not stop.is_set():
                await response.write(_event("signed-out", {}))
        except (ConnectionResetError, ConnectionError):
            pass  # the browser went away
        finally:
            mine.remove(stop)
            if not mine:
                self._stops.pop(session, None)
        return response


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
