"""Who may see the dashboard: operators who know the coordinator's admin token.

Signing in posts the token once; the dashboard compares it in constant time (HMAC-SHA256
digests of both, so not even its length shows in the timing) and answers with a random session
id in a cookie that scripts cannot read (HttpOnly), that travels only over HTTPS (Secure), only
with the dashboard's own requests (SameSite=Strict) and only to this host (the ``__Host-``
prefix). The token itself is never stored in the browser. Sessions live in memory: they expire
after ``ttl_s``, end on signing out, and all end when the coordinator restarts.

Sign-in attempts are rate-limited per client address and overall (token buckets), so the token
cannot be guessed online; a client over the limit is answered 429 without its guess being
compared. A client address may make a tenth of everyone's attempts, so that one guesser
limits itself, not the operator signing in from elsewhere (it took the whole overall
allowance when both were the same).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from typing import TypeGuard

from fedhh.errors import RateLimited
from fedhh_coordinator.enrollment import RateLimiter

COOKIE = "__Host-fedhh-session"
SESSION_TTL_S = 12 * 3600.0
MAX_SESSIONS = 256
LOGIN_RATE = 2.0  # attempts per second after a burst, overall
LOGIN_BURST = 100
CLIENT_SHARE = 0.1  # of them, a client address's: 0.2 a second after 10


class Sessions:
    def __init__(self, admin_token: bytes, ttl_s: float = SESSION_TTL_S,
                 max_sessions: int = MAX_SESSIONS, login_rate: float = LOGIN_RATE,
                 login_burst: int = LOGIN_BURST) -> None:
        self._key = secrets.token_bytes(32)
        self._token = self._digest(admin_token)
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[bytes, float] = OrderedDict()  # id digest -> expiry
        self._limit = RateLimiter(login_rate, login_burst, key_share=CLIENT_SHARE)

    def _digest(self, value: bytes) -> bytes:
        return hmac.new(self._key, value, hashlib.sha256).digest()

    def login(self, client: str, presented: str) -> str | None:
        """A new session id if ``presented`` is the admin token, else None. Raises
        RateLimited (before comparing) when the client or everyone tried too often."""
        try:
            self._limit.check(client)
        except RateLimited:
            raise RateLimited("too many sign-in attempts; wait a minute") from None
        if not hmac.compare_digest(self._digest(presented.encode()), self._token):
            return None
        session = secrets.token_urlsafe(32)
        self._sessions[self._digest(session.encode())] = time.monotonic() + self.ttl_s
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return session

    def valid(self, session: str | None) -> bool:
        if not _well_formed(session):
            return False
        key = self._digest(session.encode())
        expiry = self._sessions.get(key)
        if expiry is None:
            return False
        if expiry < time.monotonic():
            del self._sessions[key]
            return False
        return True

    def logout(self, session: str | None) -> None:
        if _well_formed(session):
            self._sessions.pop(self._digest(session.encode()), None)


def _well_formed(session: str | None) -> TypeGuard[str]:
    """Whether a cookie's value could be a session id (``token_urlsafe``: ASCII, 43
    characters); a cookie of other bytes, which aiohttp hands on as lone surrogates, failed
    to encode and was answered 500 with a traceback in the log."""
    return session is not None and 0 < len(session) <= 128 and session.isascii()
