"""The HTTP/1.1 server of every MCO port: ``asyncio.BufferedProtocol`` + the ``httptools`` parser.

It serves an :class:`App` (``handle(request) -> Response``): the extender's routes, or
``/metrics`` (:mod:`mco_py.obs.metrics`) for the collector and the analyzer.

Small and fast on purpose (see reference/extender-performance.md): one parser
per connection, keep-alive and pipelining, ``TCP_NODELAY``, headers and small
bodies in one write, ``Expect: 100-continue`` answered, request bodies buffered
up to ``max_body`` (grown with the bytes received, never from the announced
``Content-Length``), larger ones dropped and handed to the app as ``too_large``
(the extender answers them fail-open).
Handling is synchronous in the event loop: decoding is CPU-bound, so threads
would not help (scale with processes).

No peer can hold what it does not use (:class:`Limits`, :class:`ConnectionGuard`): the
request head, the body and idle keep-alive time each have a deadline, checked
once a second; open connections are capped (at the cap the longest-idle one
makes room, else the newcomer gets a 503 and is closed, counted); a peer that
does not read its replies stops being read.

Reads land in one buffer shared by every connection of a server (a buffered
protocol): the parser copies what it keeps before the next read, so the loop
allocates and copies no ``bytes`` object per read, and idle keep-alive
connections hold no read buffer.

TLS and basic auth are optional (:class:`ServerOptions.security`, :mod:`mco_py.obs.http_security`):
a TLS port listens in plain TCP and each connection starts TLS (``loop.start_tls``) once the guard
has counted it, so a connection counts against the cap from its accept, its handshake included,
and a handshake has the head's deadline (closed as ``handshake-timeout``, failures counted as
``handshake-failed``); a request without valid credentials is answered 401 (429 past the bcrypt
budget) and its connection closed, its body dropped as it arrives and the app never called.

Memory does not creep under load (docs/benchmarks.md, "Extender", "Memory soak"): a closed
connection frees its parser at once (no reference cycle left for the cyclic
GC), and :class:`HeapTrimmer` hands the C heap's free pages back to the OS
some seconds after large requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import httptools

from mco_py.obs.http_app import App, Limits, Request, Response
from mco_py.obs.http_guard import REFUSED_REPLY, ConnectionGuard
from mco_py.obs.http_security import BasicAuth, TLSServer, Verdict, WebSecurity
from mco_py.obs.process import HeapTrimmer

log = logging.getLogger(__name__)


_REASONS = {200: b"OK", 400: b"Bad Request", 401: b"Unauthorized", 404: b"Not Found",
            405: b"Method Not Allowed", 413: b"Payload Too Large", 429: b"Too Many Requests",
            431: b"Request Header Fields Too Large", 500: b"Internal Server Error",
            503: b"Service Unavailable"}  # fmt: skip
_SMALL_REPLY = 64 * 1024


def _head(status: int, content_type: str, length: int, keep_alive: bool) -> bytes:
    key = (status, content_type, length, keep_alive)
    head = _HEADS.get(key)
    if head is None:
        head = b"HTTP/1.1 %d %s\r\n%sContent-Length: %d\r\n%s\r\n" % (
            status,
            _REASONS.get(status, b"Status"),
            b"Content-Type: %s\r\n" % content_type.encode("latin-1") if content_type else b"",
            length,
            b"" if keep_alive else b"Connection: close\r\n",
        )
        if len(_HEADS) < 1024:  # predicate replies repeat a handful of lengths
            _HEADS[key] = head
    return head


def _head_of(response: Response, keep_alive: bool) -> bytes:
    head = _head(response.status, response.content_type, len(response.body), keep_alive)
    if not response.headers:
        return head
    extra = "".join(f"{name}: {value}\r\n" for name, value in response.headers).encode("latin-1")
    return head[:-2] + extra + b"\r\n"


_HEADS: dict[tuple[int, str, int, bool], bytes] = {}
_METHODS = {m.encode(): m for m in ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH")}
_TARGETS: dict[bytes, tuple[str, str]] = {}
"""Raw request target -> (path, query); schedulers call a handful of URLs (bounded like ``_HEADS``)."""


def _target_of(url: bytes) -> tuple[str, str]:
    target = _TARGETS.get(url)
    if target is None:
        try:
            parsed = httptools.parse_url(url)
            target = (parsed.path.decode("utf-8", "replace"), (parsed.query or b"").decode("utf-8", "replace"))
        except httptools.HttpParserInvalidURLError:
            target = (url.decode("latin-1"), "")
        if len(_TARGETS) < 1024:
            _TARGETS[url] = target
    return target


def _auth_reply(verdict: Verdict) -> bytes:
    if verdict is Verdict.THROTTLED:
        text, extra = b"too many new credentials to check; try again in a second\n", b"Retry-After: 1\r\n"
    else:
        text, extra = (
            b"unauthorized: send the user and password of basic auth\n",
            b'WWW-Authenticate: Basic realm="mco"\r\n',
        )
    return _head(verdict.value, "text/plain; charset=utf-8", len(text), False)[:-2] + extra + b"\r\n" + text


_AUTH_REPLIES = {verdict: _auth_reply(verdict) for verdict in (Verdict.DENIED, Verdict.THROTTLED)}
_AUTH_CLOSE_REASONS = {Verdict.DENIED: "unauthorized", Verdict.THROTTLED: "auth-throttled"}


_MAX_UNREAD_REPLIES = 4 * 1024 * 1024
"""Reply bytes a connection may leave unread before it is closed (a 5,000-node prioritize reply is ~0.2 MB;
a scheduler reads each reply before it sends the next request)."""

_READ_BUFFER = 1024 * 1024
"""Bytes one read may return; a 730 KiB predicate body usually arrives in one or two reads."""


class ReadBuffer:
    """The receive buffer shared by the connections of one server (one event-loop thread)."""

    def __init__(self, size: int = _READ_BUFFER) -> None:
        self.view = memoryview(bytearray(size))


class Outbox:
    """Replies of one event-loop pass, written when the pass is over (one server, its loop's thread).

    With several requests ready at once, the peer is woken once for all their
    replies instead of once per reply; on a VM a cross-CPU wake-up costs more
    than parsing the request line. Replies to one connection keep their order.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: list[tuple[asyncio.Transport, bytes, bytes, bool]] = []
        self._bytes: dict[asyncio.Transport, int] = {}

    def put(self, transport: asyncio.Transport, head: bytes, payload: bytes, close: bool) -> None:
        if not self._queue:
            self._loop.call_soon(self.flush)
        self._queue.append((transport, head, payload, close))
        self._bytes[transport] = self._bytes.get(transport, 0) + len(head) + len(payload)

    def queued(self, transport: asyncio.Transport) -> int:
        """Bytes of replies to ``transport`` waiting for this pass to end."""
        return self._bytes.get(transport, 0)

    def flush(self) -> None:
        queue, self._queue = self._queue, []
        self._bytes.clear()
        for transport, head, payload, close in queue:
            if transport.is_closing():
                continue
            try:
                _write(transport, head, payload)
            except Exception:  # one broken connection must not cost the others their replies
                log.exception("cannot write a reply; dropping the connection")
                transport.abort()
                continue
            if close:
                transport.close()


def _write(transport: asyncio.Transport, head: bytes, payload: bytes) -> None:
    if len(payload) <= _SMALL_REPLY:
        transport.write(head + payload)
    else:
        transport.writelines([head, payload])


class _Connection(asyncio.BufferedProtocol):
    """One client connection; httptools calls the ``on_*`` methods while we feed it bytes."""

    def __init__(
        self,
        app: App,
        max_body: int,
        guard: ConnectionGuard,
        read_buffer: ReadBuffer | None = None,
        outbox: Outbox | None = None,
        *,
        trimmer: HeapTrimmer | None = None,
        auth: BasicAuth | None = None,
        tls: TLSServer | None = None,
    ) -> None:
        self._app = app
        self._auth = auth
        self._tls = tls
        self._handshake: Coroutine[Any, Any, asyncio.Transport | None] | None = None
        """``loop.start_tls`` in progress (None before, after, and on a plain port)."""
        self._raw: asyncio.Transport | None = None
        """The plain transport under the handshake (to abort it)."""
        self._early = b""
        """Requests decrypted before ``start_tls`` returned the transport to answer them on."""
        self._read_view = (read_buffer or ReadBuffer(64 * 1024)).view
        self._outbox = outbox
        self._trimmer = trimmer
        self._max_body = max_body
        self._guard = guard
        self._limits = guard.limits
        # The parser holds bound methods of self: a reference cycle, dropped in connection_lost.
        self._parser: httptools.HttpRequestParser | None = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self.idle = True
        """No request in progress: the connection may be closed to make room for a new one."""
        self.deadline = guard.clock() + self._limits.header_timeout
        """When the server closes the connection unless it makes progress (:meth:`ConnectionGuard._sweep`)."""
        self._request_deadline = 0.0
        self._paused = False
        self._completed_in_read = False
        """A request ended during the current read (its bytes are not all the next head's)."""
        self._reset()

    def _reset(self) -> None:
        self._url = b""
        self._head_bytes = 0
        self._head_read = 0
        self._head_too_large = False
        self._accept = ""
        self._accept_encoding = ""
        self._content_length = -1
        self._expect_continue = False
        self._buffer: bytearray | None = None
        self._chunks: list[bytes] = []
        self._filled = 0
        self._too_large = False
        self._headers_done = False
        self._authorization = b""
        self._verdict = Verdict.ALLOWED

    def overdue_reason(self) -> str:
        """Why the deadline passed (the counter label of :attr:`ConnectionGuard.closed`)."""
        if self._handshake is not None:
            return "handshake-timeout"
        if self._paused:
            return "body-timeout"
        if self.idle:
            return "idle-timeout"
        if self.deadline >= self._request_deadline:
            return "request-timeout"
        return "body-timeout" if self._headers_done else "header-timeout"

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    # -- asyncio.Protocol -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio subclasses
        if not self._guard.admit(self):
            self._transport = None
            if self._tls is None:  # a TLS client would not read a plain-text reply
                with contextlib.suppress(Exception):
                    transport.write(REFUSED_REPLY)  # type: ignore[attr-defined]
            transport.close()
            self._parser = None
            return
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tls is not None:
            # Counted from here on. The TLS layer must take the socket over before the loop reads the
            # ClientHello (uvloop starts reading when connection_made returns): start_tls runs its first
            # step here, not in a task that would run after a read.
            self._handshake = asyncio.get_running_loop().start_tls(
                transport,  # type: ignore[arg-type]  # uvloop's transports are not asyncio subclasses
                self,
                self._tls.context,
                server_side=True,
                # the guard closes it first (at the head's deadline, counted as handshake-timeout)
                ssl_handshake_timeout=self._limits.header_timeout + 2 * self._limits.sweep_interval,
            )
            self._raw = transport  # type: ignore[assignment]
            self._step_handshake()

    def _step_handshake(self, _waited: object = None) -> None:
        """Drive ``start_tls`` (a task that starts now): on to its next wait, or to its end."""
        handshake = self._handshake
        if handshake is None:
            return
        try:
            waiter = handshake.send(None)
        except StopIteration as done:
            self._handshake = None
            self._secured(done.value)
        except Exception:  # whatever ended it (reset, alert, timeout): counted, not logged
            self._handshake = None
            self._handshake_failed()
        else:
            waiter.add_done_callback(self._step_handshake)

    def _handshake_failed(self) -> None:
        if self in self._guard.open:  # not dropped by the guard already (it counted it then)
            self._guard.closed["handshake-failed"] = self._guard.closed.get("handshake-failed", 0) + 1
            self._guard.forget(self)
        if self._raw is not None:
            self._raw.abort()
        self._raw = self._transport = None
        self._parser = None
        self._early = b""

    def _secured(self, secured: asyncio.Transport | None) -> None:
        if secured is None or secured.is_closing() or self._transport is None or self not in self._guard.open:
            self._handshake_failed()  # lost as the handshake ended (counted once, by whoever saw it first)
            if secured is not None:
                secured.abort()
            return
        self._raw = None
        self._transport = secured
        self.deadline = self._guard.clock() + self._limits.header_timeout
        if self._early:
            early, self._early = self._early, b""
            self.data_received(early)

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard.forget(self)
        self._transport = None
        # Break the cycle (parser -> bound on_* methods -> self -> parser) so the connection is freed now.
        # Left to the cyclic GC, which the service runs rarely (mco_py.obs.process), closed connections piled up
        # at ~1 KB each: the soaks' steady +0.2 MB/min.
        self._parser = None
        if self._trimmer is not None and self._filled:
            self._trimmer.note(self._filled)  # a body dropped half-way also left the heap high
        self._reset()

    def pause_writing(self) -> None:
        """The peer does not read its replies: stop reading its requests until it does."""
        self._paused = True
        self.deadline = self._guard.clock() + self._limits.body_timeout
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._paused = False
        now = self._guard.clock()
        self.deadline = now + (self._limits.idle_timeout if self.idle else self._limits.body_timeout)
        if self._transport is not None:
            self._transport.resume_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read_view

    def buffer_updated(self, nbytes: int) -> None:
        if self._handshake is not None:
            # The TLS layer hands over what follows the handshake before start_tls returns (same callback).
            self._early += self._read_view[:nbytes]
            return
        # The parser hands the on_* callbacks copies (bytes), so the shared buffer is free again on return.
        self.data_received(self._read_view[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
        if self._parser is None:  # closed
            return
        self._completed_in_read = False
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._reply_and_close(400, b"upgrades are not supported\n")
            return
        except httptools.HttpParserError as exc:
            if self._head_too_large:
                self._reply_and_close(431, b"request line and headers too large\n")
            else:
                self._reply_and_close(400, f"malformed HTTP request: {exc}\n".encode())
            return
        if not self.idle and not self._headers_done:
            self._count_unfinished_head(len(data))

    def _count_unfinished_head(self, size: int) -> None:
        """Bound a head that has not ended yet (httptools holds an unfinished header line until it ends).

        Reads are counted whole; one that also ended the previous request is not counted, so a head is
        refused after ``max_head`` bytes, or at most one read later."""
        if not self._completed_in_read:
            self._head_read += size
        if self._head_read > self._limits.max_head:
            self._reply_and_close(431, b"request line and headers too large\n")

    def _unread_replies(self, transport: asyncio.Transport) -> int:
        queued = self._outbox.queued(transport) if self._outbox is not None else 0
        return queued + transport.get_write_buffer_size()

    def _reply_and_close(self, status: int, text: bytes) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        self._parser = None  # nothing more is read from this connection
        self._send(transport, _head(status, "text/plain; charset=utf-8", len(text), False), text, close=True)

    def _refuse(self, transport: asyncio.Transport, verdict: Verdict) -> None:
        """Answer a request without valid credentials and close the connection (counted, not logged)."""
        self._parser = None
        self._guard.closed[_AUTH_CLOSE_REASONS[verdict]] = self._guard.closed.get(_AUTH_CLOSE_REASONS[verdict], 0) + 1
        self._send(transport, _AUTH_REPLIES[verdict], b"", close=True)

    def _send(self, transport: asyncio.Transport, head: bytes, payload: bytes, *, close: bool) -> None:
        if self._outbox is not None:
            self._outbox.put(transport, head, payload, close)
            return
        _write(transport, head, payload)
        if close:
            transport.close()

    # -- httptools callbacks ---------------------------------------------

    def on_message_begin(self) -> None:
        self._reset()
        now = self._guard.clock()
        self.idle = False
        self._request_deadline = now + self._limits.request_timeout
        self.deadline = min(now + self._limits.header_timeout, self._request_deadline)

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self._limits.max_head:
            self._head_too_large = True
            raise ValueError("request line and headers too large")  # httptools turns it into a parser error

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        size = len(name)
        self._count_head(size + len(value))
        if size == 14 and name.lower() == b"content-length":
            with contextlib.suppress(ValueError):
                self._content_length = int(value)
        elif size == 6 and name.lower() == b"expect" and value.lower() == b"100-continue":
            self._expect_continue = True
        elif size == 6 and name.lower() == b"accept":
            self._accept = value.decode("latin-1")
        elif size == 15 and name.lower() == b"accept-encoding":
            self._accept_encoding = value.decode("latin-1")
        elif size == 13 and self._auth is not None and name.lower() == b"authorization":
            self._authorization = value

    def on_headers_complete(self) -> None:
        self._headers_done = True
        self.deadline = min(self._guard.clock() + self._limits.body_timeout, self._request_deadline)
        if self._content_length > self._max_body:
            self._too_large = True
        if self._auth is not None:
            self._verdict = self._auth.check(self._authorization)
            if self._verdict is not Verdict.ALLOWED:
                self._too_large = True  # a stranger's body is dropped as it arrives, never buffered
                return  # and not invited with 100 Continue
        if self._expect_continue and self._transport is not None:
            # Go does not send it; curl does for bodies over 1 MiB and waits ~1 s otherwise.
            self._send(self._transport, b"HTTP/1.1 100 Continue\r\n\r\n", b"", close=False)

    def on_body(self, chunk: bytes) -> None:
        size = len(chunk)
        self.deadline = min(self._guard.clock() + self._limits.body_timeout, self._request_deadline)
        if self._too_large:
            return
        if not self._filled and size == self._content_length:  # the whole body in one piece: no copy
            self._chunks.append(chunk)
            self._filled = size
            return
        self._filled += size
        if self._filled > self._max_body:
            self._too_large = True
            self._chunks = []
            self._buffer = None
            return
        # Grown with what arrives (amortised by bytearray), never sized from the announced length:
        # a peer that announces 128 MiB and sends 100 bytes holds 100 bytes.
        if self._buffer is None:
            self._buffer = bytearray(b"".join(self._chunks))
            self._chunks = []
        self._buffer += chunk

    def on_message_complete(self) -> None:
        transport = self._transport
        parser = self._parser
        if transport is None or parser is None or transport.is_closing():
            return
        if self._verdict is not Verdict.ALLOWED:
            self._refuse(transport, self._verdict)
            return
        unread = self._unread_replies(transport)
        if unread > _MAX_UNREAD_REPLIES:
            # Pipelined requests whose replies are not read (no scheduler pipelines): stop now,
            # before one read of small requests turns into many MiB of replies, and give the
            # heap those replies took back to the system.
            if self._trimmer is not None:
                self._trimmer.note(unread)
            self._guard.drop(self, "unread-replies")
            return
        body: bytes | bytearray
        if self._too_large:
            body = b""
        elif self._buffer is not None:
            body = self._buffer  # no copy: a 74 MB prioritize body stays one buffer
        elif len(self._chunks) == 1:
            body = self._chunks[0]
        else:
            body = b"".join(self._chunks)
        self._buffer = None
        self._chunks = []
        raw_method = parser.get_method()
        method = _METHODS.get(raw_method) or raw_method.decode("latin-1")
        path, query = _target_of(self._url)
        request = Request(method, path, body, query, self._accept, self._accept_encoding, self._too_large)
        keep_alive = parser.should_keep_alive()
        try:
            response = self._app.handle(request)
        except Exception as exc:  # the app's bug costs this request, not the server
            log.exception("request handler failed", extra={"path": path})
            response = Response(500, "text/plain; charset=utf-8", f"internal error: {type(exc).__name__}\n".encode())
            keep_alive = False
        payload = b"" if method == "HEAD" else response.body
        self._send(transport, _head_of(response, keep_alive), payload, close=not keep_alive)
        if self._trimmer is not None:
            self._trimmer.note(self._filled)
        self._filled = 0
        self._head_bytes = 0
        self._completed_in_read = True
        self.idle = True
        if not self._paused:
            self.deadline = self._guard.clock() + self._limits.idle_timeout


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """How a server treats its connections, the same however it runs (:func:`create_server`,
    :func:`start_in_thread`, :func:`serve_forever`)."""

    max_body: int = 128 * 1024 * 1024
    """Larger request bodies are not read: the app's fail-open answer goes back at once."""
    limits: Limits = field(default_factory=Limits)
    """Connection cap and deadlines."""
    trim_heap: Callable[[int], object] | None = None
    """Run ``trim_delay`` seconds after a large request (see :class:`HeapTrimmer`); None: never."""
    trim_delay: float = 10.0
    on_guard: Callable[[ConnectionGuard], object] | None = None
    """Handed the :class:`ConnectionGuard` before the first connection (to export its counts)."""
    security: WebSecurity = field(default_factory=WebSecurity)
    """TLS and basic auth (:mod:`mco_py.obs.http_security`); none by default."""


@dataclass
class RunningServer:
    """A server started by :func:`start_in_thread`."""

    port: int
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    server: asyncio.AbstractServer
    guard: ConnectionGuard

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening, drop open connections (keep-alive clients included) and end the loop thread."""

        def _close() -> None:
            self.server.close()
            # Server.close() leaves accepted connections open; closing the loop with them
            # open leaks their sockets (uvloop raises ResourceWarning in this thread).
            self.guard.drop_all()
            self.loop.stop()

        self.loop.call_soon_threadsafe(_close)
        self.thread.join(timeout)


async def create_server(
    app: App,
    host: str = "127.0.0.1",
    port: int = 0,
    options: ServerOptions | None = None,
    *,
    reuse_port: bool = False,
    sock: socket.socket | None = None,
) -> tuple[asyncio.AbstractServer, int, ConnectionGuard]:
    """Listen on ``host:port`` (0 = a free port), or on ``sock`` when given (bound, listening);
    returns the server, the bound port and its :class:`ConnectionGuard`."""
    opts = options or ServerOptions()
    loop = asyncio.get_running_loop()
    read_buffer = ReadBuffer()
    outbox = Outbox(loop)
    guard = ConnectionGuard(loop, opts.limits)
    if opts.on_guard is not None:
        opts.on_guard(guard)
    trimmer = HeapTrimmer(loop, opts.trim_heap, delay=opts.trim_delay) if opts.trim_heap is not None else None

    tls = opts.security.tls
    auth = opts.security.auth

    def protocol() -> _Connection:
        if tls is not None:
            tls.refresh()  # a renewed certificate is served from the next connection on
        return _Connection(app, opts.max_body, guard, read_buffer, outbox, trimmer=trimmer, auth=auth, tls=tls)

    # TLS is started by each connection once the guard counted it (_Connection._start_tls), not by the
    # listener: a handshake in progress then counts against maxConnections and has the head's deadline.
    if sock is not None:
        server = await loop.create_server(protocol, sock=sock, backlog=1024)
    else:
        server = await loop.create_server(protocol, host, port, backlog=1024, reuse_port=reuse_port or None)
    bound = server.sockets[0].getsockname()[1]
    return server, int(bound), guard


def new_event_loop(use_uvloop: bool = True) -> asyncio.AbstractEventLoop:
    """A uvloop loop when available (and wanted), else the default asyncio loop."""
    if use_uvloop:
        try:
            import uvloop  # noqa: PLC0415 - optional speed-up

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            return loop
        except ImportError:
            log.info("uvloop not installed; using the asyncio event loop")
    return asyncio.new_event_loop()


def start_in_thread(
    app: App,
    host: str = "127.0.0.1",
    port: int = 0,
    options: ServerOptions | None = None,
    *,
    use_uvloop: bool = True,
    sock: socket.socket | None = None,
    name: str = "http",
) -> RunningServer:
    """Run the server in a daemon thread (``name``) with its own loop; returns once it listens."""
    loop = new_event_loop(use_uvloop)
    started = threading.Event()
    holder: dict[str, Any] = {}

    def _run() -> None:
        asyncio.set_event_loop(loop)
        try:
            holder["server"], holder["port"], holder["guard"] = loop.run_until_complete(
                create_server(app, host, port, options, sock=sock)
            )
        except BaseException as exc:
            holder["error"] = exc
            started.set()
            return
        started.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(holder["server"].wait_closed())
            loop.close()

    thread = threading.Thread(target=_run, name=name, daemon=True)
    thread.start()
    started.wait()
    if "error" in holder:
        raise holder["error"]
    return RunningServer(port=holder["port"], loop=loop, thread=thread, server=holder["server"], guard=holder["guard"])


def serve_forever(
    app: App,
    host: str,
    port: int,
    options: ServerOptions,
    *,
    on_listening: Callable[[int], None] | None = None,
    stop: asyncio.Event | None = None,
    use_uvloop: bool = True,
) -> None:
    """Run the server in this thread until SIGTERM/SIGINT."""
    import signal  # noqa: PLC0415

    loop = new_event_loop(use_uvloop)
    asyncio.set_event_loop(loop)

    async def _main() -> None:
        server, bound, guard = await create_server(app, host, port, options)
        if on_listening is not None:
            on_listening(bound)
        done = stop or asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, done.set)
        async with server:
            await done.wait()
            server.close()  # no new connections, then drop the open (keep-alive) ones before the loop goes
            guard.drop_all()

    try:
        loop.run_until_complete(_main())
    finally:
        loop.close()
