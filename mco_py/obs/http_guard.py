"""Deadlines and the connection cap of one HTTP server (:mod:`mco_py.obs.http`), and their counters."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

from mco_py.obs.http_app import Limits


class GuardedConnection(Protocol):
    """What the guard needs of a connection."""

    deadline: float
    """When (the guard's clock) the connection is overdue."""

    @property
    def idle(self) -> bool:
        """Just accepted or between keep-alive requests: may be closed to make room."""
        ...

    def overdue_reason(self) -> str: ...

    def abort(self) -> None: ...


class ConnectionGuard:
    """Deadlines and the connection cap of one server (its loop's thread), and their counters.

    A connection is counted from its accept (on a TLS port its handshake included). It is *idle*
    (just accepted, in its TLS handshake, or between keep-alive requests: may be closed to make
    room), *busy* (a request is arriving) or *paused* (its peer does not read the replies).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, limits: Limits, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self.clock = clock
        self.open: dict[GuardedConnection, None] = {}
        """Open connections, oldest first."""
        self.refused = 0
        self.closed: dict[str, int] = {}
        """Connections closed by the server, by reason (``header-timeout``, ``body-timeout``,
        ``request-timeout``, ``idle-timeout``, ``evicted``, ``unread-replies``, ``handshake-timeout``; and by the
        connection itself ``unauthorized``, ``auth-throttled``, ``handshake-failed``)."""
        self._loop = loop
        self._sweeper: asyncio.TimerHandle | None = None

    def admit(self, conn: GuardedConnection) -> bool:
        """Register a new connection; False (counted) when the cap is reached and nobody is idle."""
        if len(self.open) >= self.limits.max_connections:
            idle = next((c for c in self.open if c.idle), None)
            if idle is None:
                self.refused += 1
                return False
            self.drop(idle, "evicted")
        self.open[conn] = None
        if self._sweeper is None:
            self._sweeper = self._loop.call_later(self.limits.sweep_interval, self._sweep)
        return True

    def forget(self, conn: GuardedConnection) -> None:
        self.open.pop(conn, None)
        if not self.open:  # nothing left to watch: no wake-up until the next connection
            self.close()

    def drop(self, conn: GuardedConnection, reason: str) -> None:
        self.closed[reason] = self.closed.get(reason, 0) + 1
        self.forget(conn)
        conn.abort()

    def _sweep(self) -> None:
        now = self.clock()
        for conn in [c for c in self.open if c.deadline < now]:
            self.drop(conn, conn.overdue_reason())
        self._sweeper = self._loop.call_later(self.limits.sweep_interval, self._sweep) if self.open else None

    def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    def drop_all(self) -> None:
        """Stop sweeping and abort every open connection (the server is closing)."""
        self.close()
        for conn in list(self.open):
            conn.abort()


_REFUSED_TEXT = b"too many connections; try again later\n"
#: The reply to a connection over the cap with nobody idle to make room.
REFUSED_REPLY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_REFUSED_TEXT), _REFUSED_TEXT)
)
