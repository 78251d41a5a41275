"""``/metrics`` of a registry, served by the shared HTTP server (:mod:`mco_py.obs.http`).

The semantics of prometheus_client's own exposition app: any path but
``/favicon.ico`` answers GET and HEAD with the registry, in OpenMetrics when the
scraper asks for it, gzipped when it accepts gzip, restricted to ``name[]=``
when given. The text is prometheus_client's (``generate_latest``).

The collector and the analyzer run it in a daemon thread with tighter limits
than the extender's: scrapes are small, bodiless and few. The thread's loop is
uvloop's (when installed), as the extender's: accepting, reading and answering a
scrape costs less there than on the asyncio loop, and it is paid on every scrape.
"""

from __future__ import annotations

import gzip
import logging
import socket
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted

from mco_py.obs.http import RunningServer, ServerOptions, start_in_thread
from mco_py.obs.http_app import Limits, Request, Response
from mco_py.obs.http_security import WebSecurity

log = logging.getLogger(__name__)

#: A scraper's connections: a few, bodiless requests with heads of a few hundred bytes.
METRICS_LIMITS = Limits(
    max_connections=64,
    header_timeout=10.0,
    body_timeout=10.0,
    request_timeout=30.0,
    idle_timeout=30.0,
    max_head=16 * 1024,
)
_ALLOW = ("Allow", "OPTIONS,GET,HEAD")


class MetricsApp:
    """Answers scrapes of ``registry`` (:class:`mco_py.obs.http_app.App`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def handle(self, request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(200, "", b"", (_ALLOW,))
        if request.method not in ("GET", "HEAD"):
            body = f"# HTTP 405: {request.method[:20]}; use OPTIONS, GET or HEAD\n".encode()
            return Response(405, "text/plain", body, (_ALLOW,))
        if request.path == "/favicon.ico":
            return Response(200, "", b"")
        encoder, content_type = choose_encoder(request.accept)
        names = parse_qs(request.query).get("name[]") if request.query else None
        try:
            output = encoder(self.registry.restricted_registry(names) if names else self.registry)
        except Exception as exc:
            log.exception("metrics: building the exposition failed")
            return Response(500, "text/plain", f"exposition failed: {type(exc).__name__}\n".encode())
        if gzip_accepted(request.accept_encoding):
            return Response(200, content_type, gzip.compress(output, compresslevel=1), (("Content-Encoding", "gzip"),))
        return Response(200, content_type, output)


def serve_metrics(
    registry: CollectorRegistry,
    *,
    host: str = "0.0.0.0",  # noqa: S104 - Prometheus scrapes from other hosts
    port: int = 0,
    limits: Limits = METRICS_LIMITS,
    security: WebSecurity | None = None,
) -> RunningServer:
    """Serve ``registry`` on ``/metrics`` from a daemon thread; ``.port`` is the bound port, ``.stop()`` ends it.

    The socket is bound as one (``host`` "" or "0.0.0.0": IPv4 any; "::": IPv6 and, where the
    system allows, IPv4), not one per address family as asyncio would. ``security``: TLS and
    basic auth (none by default).
    """
    family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    sock = socket.create_server((host, port), family=family, backlog=128)
    try:
        options = ServerOptions(max_body=0, limits=limits, security=security or WebSecurity())
        return start_in_thread(MetricsApp(registry), options=options, sock=sock, name="metrics-http")
    except BaseException:
        sock.close()
        raise
