"""Prometheus exposition helpers shared by the services.

:class:`MetricsServer` serves a registry from one thread that sleeps in
``select()`` until a scrape arrives: no polling while idle and no thread per
request. A collector scraped every second at a 1 s sample interval spent about
a third of its CPU in ``wsgiref``'s thread-per-request server and its 0.5 s
shutdown poll; this server costs one wake-up per scrape. Scrapes are short and
rare, so they are answered one after another; slow or idle clients cannot hold
the server: every connection has an idle deadline and a bounded header size.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, generate_latest, gzip_accepted
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_generate_latest

log = logging.getLogger(__name__)

#: Largest request head (request line + headers) accepted, bytes.
MAX_HEAD_BYTES = 16 * 1024
#: Seconds a connection may sit idle (or send a request slowly) before it is closed.
IDLE_TIMEOUT_S = 30.0
#: Open connections kept at most; the oldest idle one is closed to admit a new one.
MAX_CONNECTIONS = 64

_REASONS = {200: "OK", 400: "Bad Request", 405: "Method Not Allowed", 431: "Request Header Fields Too Large"}
_REASONS[500] = "Internal Server Error"
_REQUEST_LINE_PARTS = 3  # METHOD SP request-target SP HTTP-version


@dataclass(slots=True)
class _Connection:
    sock: socket.socket
    deadline: float
    inbox: bytearray = field(default_factory=bytearray)
    outbox: memoryview | None = None
    close_after_write: bool = False
    writing: bool = False
    """Registered for writability (an answer did not fit the socket buffer)."""


@dataclass(frozen=True, slots=True)
class Request:
    """The parts of an HTTP request head the metrics endpoint looks at."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    """Lower-cased names; a repeated header keeps its last value."""
    keep_alive: bool


class BadRequest(ValueError):
    """A request head that is not HTTP/1.x; carries the status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def parse_head(head: bytes) -> Request:
    """Parse a request head (without the blank line); raises :class:`BadRequest`."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes any byte
        raise BadRequest(f"undecodable request head ({exc})") from exc
    request_line, *header_lines = text.split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != _REQUEST_LINE_PARTS or not parts[0] or not parts[1].startswith(("/", "*")):
        raise BadRequest(f"bad request line {request_line[:80]!r}")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise BadRequest(f"unsupported HTTP version {version[:20]!r}")
    headers: dict[str, str] = {}
    for line in header_lines:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise BadRequest(f"bad header line {line[:80]!r}")
        headers[name.lower()] = value.strip()
    if headers.get("content-length", "0") != "0" or "transfer-encoding" in headers:
        raise BadRequest("request bodies are not accepted here")
    path, _, query = target.partition("?")
    connection = headers.get("connection", "").lower()
    keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    return Request(method=method, path=path, query=query, headers=headers, keep_alive=keep_alive)


#: Renders a whole registry as Prometheus text 0.0.4 (False) or OpenMetrics 1.0.0 (True), byte for byte
#: what prometheus_client writes, only faster (the collector's hook; see ``TextRenderer`` there).
FastText = Callable[[bool], bytes]


def respond(
    registry: CollectorRegistry, request: Request, *, fast_text: FastText | None = None
) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body for ``request`` (the semantics of prometheus_client's WSGI app)."""
    if request.method == "OPTIONS":
        return 200, [("Allow", "OPTIONS,GET,HEAD")], b""
    if request.method not in ("GET", "HEAD"):
        body = f"# HTTP 405: {request.method[:20]}; use OPTIONS, GET or HEAD\n".encode()
        return 405, [("Allow", "OPTIONS,GET,HEAD"), ("Content-Type", "text/plain")], body
    if request.path == "/favicon.ico":
        return 200, [], b""
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    names = parse_qs(request.query).get("name[]") if request.query else None
    if fast_text is not None and not names and encoder is generate_latest:
        output = fast_text(False)
    elif fast_text is not None and not names and _is_openmetrics_1(encoder):
        output = fast_text(True)
    else:
        output = encoder(registry.restricted_registry(names) if names else registry)
    headers = [("Content-Type", content_type)]
    if gzip_accepted(request.headers.get("accept-encoding", "")):
        output = gzip.compress(output, compresslevel=1)
        headers.append(("Content-Encoding", "gzip"))
    return 200, headers, output


def _is_openmetrics_1(encoder: object) -> bool:
    return (
        isinstance(encoder, functools.partial)
        and encoder.func is openmetrics_generate_latest
        and encoder.keywords.get("version") == "1.0.0"
    )


def _response(status: int, headers: list[tuple[str, str]], body: bytes, *, head_only: bool, close: bool) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}"]
    lines += [f"{name}: {value}" for name, value in headers]
    lines.append(f"Content-Length: {len(body)}")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else body)


class MetricsServer:
    """``/metrics`` of a registry over HTTP/1.1 (keep-alive), from one thread that sleeps between scrapes."""

    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        *,
        fast_text: FastText | None = None,
        idle_timeout: float = IDLE_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        self._listener = socket.create_server((host, port), family=family, backlog=128)
        self._listener.setblocking(False)
        self.server_port: int = self._listener.getsockname()[1]
        self._registry = registry
        self._fast_text = fast_text
        self._idle = idle_timeout
        self._max = max_connections
        self._clock = clock
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._connections: dict[socket.socket, _Connection] = {}
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown`."""
        self._stopped.clear()
        try:
            while not self._stop.is_set():
                for key, events in self._selector.select(self._timeout()):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    if sock is self._listener:
                        self._accept()
                    elif sock is self._wake_r:
                        self._drain_wake()
                    elif sock in self._connections:
                        self._service(self._connections[sock], events)
                self._expire()
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` and wait for it to return."""
        self._stop.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            return
        self._stopped.wait(10.0)

    def server_close(self) -> None:
        """Close the listening socket and every connection."""
        for conn in list(self._connections.values()):
            self._close(conn)
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()
        self._selector.close()

    def _timeout(self) -> float | None:
        if not self._connections:
            return None  # sleep until a client connects
        soonest = min(conn.deadline for conn in self._connections.values())
        return max(0.0, soonest - self._clock())

    def _drain_wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            self._wake_r.recv(64)

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        except OSError as exc:  # EMFILE and friends: keep serving the clients we have
            log.warning("metrics server: accept failed: %s", exc)
            return
        if len(self._connections) >= self._max:
            self._close(min(self._connections.values(), key=lambda c: c.deadline))
        sock.setblocking(False)
        conn = _Connection(sock, self._clock() + self._idle)
        self._connections[sock] = conn
        self._selector.register(sock, selectors.EVENT_READ)

    def _service(self, conn: _Connection, events: int) -> None:
        try:
            if events & selectors.EVENT_WRITE:
                self._flush(conn)
                self._pump(conn)
            elif events & selectors.EVENT_READ:
                self._read(conn)
        except OSError:
            self._close(conn)
        except Exception:
            log.exception("metrics server: request failed")
            self._close(conn)

    def _read(self, conn: _Connection) -> None:
        data = conn.sock.recv(65536)
        if not data:
            self._close(conn)
            return
        conn.inbox += data
        conn.deadline = self._clock() + self._idle
        self._pump(conn)

    def _pump(self, conn: _Connection) -> None:
        """Answer the complete requests in the inbox while each answer goes out whole."""
        while conn.outbox is None and conn.sock in self._connections and self._answer(conn):
            self._flush(conn)

    def _answer(self, conn: _Connection) -> bool:
        """Queue the answer to the next complete request; False when none is complete yet."""
        end = conn.inbox.find(b"\r\n\r\n")
        if end < 0:
            if len(conn.inbox) > MAX_HEAD_BYTES:
                self._queue(conn, _error(431, "request head too large"), close=True)
                return True
            return False
        head = bytes(conn.inbox[:end])
        del conn.inbox[: end + 4]
        try:
            request = parse_head(head)
        except BadRequest as exc:
            self._queue(conn, _error(exc.status, str(exc)), close=True)
            return True
        try:
            status, headers, body = respond(self._registry, request, fast_text=self._fast_text)
        except Exception as exc:
            log.exception("metrics server: building the exposition failed")
            self._queue(conn, _error(500, f"exposition failed: {type(exc).__name__}"), close=True)
            return True
        close = not request.keep_alive
        self._queue(
            conn, _response(status, headers, body, head_only=request.method == "HEAD", close=close), close=close
        )
        return True

    @staticmethod
    def _queue(conn: _Connection, payload: bytes, *, close: bool) -> None:
        conn.outbox = memoryview(payload)
        conn.close_after_write = close

    def _flush(self, conn: _Connection) -> None:
        """Send what the socket takes; wait for writability for the rest."""
        assert conn.outbox is not None
        try:
            sent = conn.sock.send(conn.outbox)
        except BlockingIOError:
            sent = 0
        conn.outbox = conn.outbox[sent:]
        conn.deadline = self._clock() + self._idle
        if len(conn.outbox):
            if not conn.writing:
                self._selector.modify(conn.sock, selectors.EVENT_WRITE)
                conn.writing = True
            return
        conn.outbox = None
        if conn.close_after_write:
            self._close(conn)
        elif conn.writing:
            self._selector.modify(conn.sock, selectors.EVENT_READ)
            conn.writing = False

    def _expire(self) -> None:
        now = self._clock()
        for conn in [c for c in self._connections.values() if c.deadline <= now]:
            self._close(conn)

    def _close(self, conn: _Connection) -> None:
        if self._connections.pop(conn.sock, None) is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn.sock)
        conn.sock.close()


def _error(status: int, message: str) -> bytes:
    body = f"{status} {_REASONS.get(status, 'Error')}: {message}\n".encode()
    return _response(status, [("Content-Type", "text/plain")], body, head_only=False, close=True)


def start_metrics_server(
    registry: CollectorRegistry,
    *,
    host: str = "0.0.0.0",  # noqa: S104 - Prometheus scrapes from other hosts
    port: int = 0,
    fast_text: FastText | None = None,
) -> tuple[MetricsServer, int]:
    """Serve ``registry`` on ``/metrics`` in a daemon thread; returns the server and the bound port."""
    server = MetricsServer(registry, host, port, fast_text=fast_text)
    thread = threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True)
    thread.start()
    return server, server.server_port
