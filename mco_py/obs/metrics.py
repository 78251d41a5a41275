"""Prometheus exposition helpers shared by the services."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import make_wsgi_app


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Scrapes are not logged."""


class _ThreadingWSGIServer(ThreadingHTTPServer, WSGIServer):
    daemon_threads = True


def start_metrics_server(
    registry: CollectorRegistry,
    *,
    host: str = "0.0.0.0",  # noqa: S104 - Prometheus scrapes from other hosts
    port: int = 0,
) -> tuple[WSGIServer, int]:
    """Serve ``registry`` on ``/metrics`` in a daemon thread; returns the server and the bound port."""
    app = make_wsgi_app(registry)
    server = make_server(host, port, app, _ThreadingWSGIServer, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True)
    thread.start()
    return server, server.server_port
