"""What an app behind MCO's HTTP server (:mod:`mco_py.obs.http`) sees and answers, and the limits the
server holds every connection to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Request:
    """One complete request, as an :class:`App` sees it."""

    method: str
    path: str
    """The target's path (no query)."""
    body: bytes | bytearray = b""
    query: str = ""
    accept: str = ""
    """The ``Accept`` header (the only request headers kept are the two an app negotiates on)."""
    accept_encoding: str = ""
    """The ``Accept-Encoding`` header."""
    too_large: bool = False
    """The body exceeded ``max_body`` and was dropped (``body`` is empty)."""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    content_type: str
    """Empty: no ``Content-Type`` header."""
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    """More header lines (``Content-Encoding``, ``Allow``)."""


class App(Protocol):
    """What the server serves: one reply per request, synchronously, in the event loop's thread."""

    def handle(self, request: Request) -> Response: ...


@dataclass(frozen=True, slots=True)
class Limits:
    """Connection discipline of a server (the extender's ``maxConnections``, ``*TimeoutSeconds``)."""

    max_connections: int = 512
    """Open connections at most. Volcano opens up to 16, kube-scheduler a few per extender."""
    header_timeout: float = 10.0
    """Seconds from a request's first byte (or the connection's opening) to the end of its headers."""
    body_timeout: float = 30.0
    """Seconds a request body (or a paused reply) may go without progress."""
    request_timeout: float = 60.0
    """Seconds from a request's first byte to its last, whatever the progress."""
    idle_timeout: float = 120.0
    """Seconds a keep-alive connection may wait for its next request. Longer than Go's 90 s
    ``IdleConnTimeout``, so the schedulers close first and never send a POST into a closing socket."""
    sweep_interval: float = 1.0
    """Seconds between deadline checks."""
    max_head: int = 64 * 1024
    """Bytes of request line and headers at most (431 beyond); schedulers send a few hundred."""
