"""The panel's browser sessions: what its cookie names, how long that lasts, and the form value bound to it.

A session opens when the token or a one-time code is traded for a cookie; trading again from a browser
that holds a cookie ends the old session (a copy of it taken before is dead). A session ends when it
was not used for `idle_seconds` or is `max_seconds` old, whichever comes first.

Forms carry the session's form value, an HMAC of the session id under a key that never leaves the
daemon: it names no session and is worth nothing with another session's cookie or without one, and
the long-lived token is in no page.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MAX_SESSIONS", "Sessions"]

# Sessions alive at once: the oldest end first (each `hebbs palace` or printed-address visit opens one).
MAX_SESSIONS = 64


@dataclass
class _Session:
    opened: float
    used: float


class Sessions:
    def __init__(self, idle_seconds: float, max_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_seconds = idle_seconds
        self.max_seconds = max_seconds
        self._clock = clock
        self._key = secrets.token_bytes(32)
        # Keyed by a digest of the id, so looking one up takes no time that depends on how much of it matched.
        self._live: dict[bytes, _Session] = {}

    def open(self, replacing: str | None = None) -> str:
        """A new session id; the session `replacing` names (the browser's previous cookie) ends."""
        if replacing:
            self._live.pop(self._digest(replacing), None)
        self._expire()
        while len(self._live) >= MAX_SESSIONS:
            del self._live[next(iter(self._live))]
        session = secrets.token_urlsafe(32)
        now = self._clock()
        self._live[self._digest(session)] = _Session(opened=now, used=now)
        return session

    def use(self, session: str | None) -> bool:
        """Whether `session` is alive; using it keeps it from idling out (never past its maximum age)."""
        if not session:
            return False
        found = self._live.get(self._digest(session))
        if found is None:
            return False
        now = self._clock()
        if self._ended(found, now):
            del self._live[self._digest(session)]
            return False
        found.used = now
        return True

    def form_value(self, session: str) -> str:
        return hmac.new(self._key, session.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()

    def form_value_matches(self, session: str | None, given: str | None) -> bool:
        if not session or not given:
            return False
        return hmac.compare_digest(self.form_value(session).encode(), given.encode("utf-8", "surrogatepass"))

    def _ended(self, session: _Session, now: float) -> bool:
        return now - session.used > self.idle_seconds or now - session.opened > self.max_seconds

    def _expire(self) -> None:
        now = self._clock()
        for digest in [d for d, s in self._live.items() if self._ended(s, now)]:
            del self._live[digest]

    @staticmethod
    def _digest(session: str) -> bytes:
        return hashlib.sha256(session.encode("utf-8", "surrogatepass")).digest()
