"""/metrics on the shared HTTP server: HTTP/1.1 semantics, keep-alive, limits, failures."""

from __future__ import annotations

import dataclasses
import gzip
import http.client
import socket
import time
from collections.abc import Iterable, Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mco_py.obs.http import RunningServer
from mco_py.obs.metrics import METRICS_LIMITS, serve_metrics


@pytest.fixture
def registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("mco_test_events_total", "events", registry=registry).inc(3)
    Gauge("mco_test_level", "level", registry=registry).set(2)
    return registry


@pytest.fixture
def served(registry: CollectorRegistry) -> Iterator[RunningServer]:
    server = serve_metrics(registry, host="127.0.0.1", port=0)
    yield server
    server.stop()


def _raw(port: int, payload: bytes, *, until_close: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(payload)
        chunks = []
        while until_close:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_keep_alive_serves_several_scrapes_on_one_connection(served: RunningServer) -> None:
    port = served.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        bodies = []
        for _ in range(3):
            conn.request("GET", "/metrics")
            response = conn.getresponse()
            assert response.status == 200
            assert response.getheader("Content-Type", "").startswith("text/plain")
            bodies.append(response.read().decode())
        assert conn.sock is not None  # still the same open connection
    finally:
        conn.close()
    assert all("mco_test_events_total 3.0" in body for body in bodies)


def test_head_options_and_other_methods(served: RunningServer) -> None:
    port = served.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("HEAD", "/metrics")
        head = conn.getresponse()
        assert head.status == 200
        assert int(head.getheader("Content-Length", "0")) > 0
        assert head.read() == b""
        conn.request("OPTIONS", "/metrics")
        options = conn.getresponse()
        assert options.status == 200
        assert "GET" in options.getheader("Allow", "")
        options.read()
        conn.request("DELETE", "/metrics")
        refused = conn.getresponse()
        assert refused.status == 405
        assert b"DELETE" in refused.read()
    finally:
        conn.close()


def test_openmetrics_gzip_and_name_filter_follow_prometheus_client(served: RunningServer) -> None:
    port = served.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "GET",
            "/metrics?name[]=mco_test_level",
            headers={"Accept": "application/openmetrics-text; version=1.0.0", "Accept-Encoding": "gzip"},
        )
        response = conn.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Encoding") == "gzip"
        assert response.getheader("Content-Type", "").startswith("application/openmetrics-text")
        text = gzip.decompress(response.read()).decode()
    finally:
        conn.close()
    assert "mco_test_level 2.0" in text
    assert "mco_test_events" not in text
    assert text.endswith("# EOF\n")


def test_pipelined_requests_are_answered_in_order(served: RunningServer) -> None:
    port = served.port
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    reply = _raw(port, request * 5 + b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert reply.count(b"HTTP/1.1 200 OK") == 6
    assert reply.count(b"mco_test_events_total 3.0") == 6


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        (b"GARBAGE\r\n\r\n", b"400"),
        (b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n", b"400"),
        (b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 20000, b"431"),
    ],
)
def test_bad_requests_get_a_clear_error_and_the_server_goes_on(
    served: RunningServer, payload: bytes, status: bytes
) -> None:
    port = served.port
    reply = _raw(port, payload)
    assert reply.startswith(b"HTTP/1.1 " + status)
    assert b"Connection: close" in reply
    assert b"mco_test_events_total 3.0" in _raw(port, b"GET /metrics HTTP/1.0\r\n\r\n")


def test_a_request_body_is_dropped_and_the_method_refused(served: RunningServer) -> None:
    reply = _raw(served.port, b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
    assert reply.startswith(b"HTTP/1.1 405")
    assert b"Allow: OPTIONS,GET,HEAD" in reply


def test_http_1_0_closes_after_the_answer(served: RunningServer) -> None:
    port = served.port
    reply = _raw(port, b"GET /metrics HTTP/1.0\r\n\r\n")  # returns only once the server closes
    assert reply.startswith(b"HTTP/1.1 200 OK")


def test_a_silent_client_does_not_hold_up_scrapes_and_is_dropped_when_idle(registry: CollectorRegistry) -> None:
    limits = dataclasses.replace(METRICS_LIMITS, header_timeout=0.3, idle_timeout=0.3, sweep_interval=0.1)
    server = serve_metrics(registry, host="127.0.0.1", port=0, limits=limits)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as silent:
            silent.sendall(b"GET /metr")  # half a request, then nothing
            assert b"mco_test_events_total" in _raw(server.port, b"GET / HTTP/1.0\r\n\r\n")
            assert silent.recv(100) == b""  # closed by the server once overdue
    finally:
        server.stop()
    assert not server.thread.is_alive()


def test_idle_connections_make_room_at_the_cap(registry: CollectorRegistry) -> None:
    server = serve_metrics(
        registry, host="127.0.0.1", port=0, limits=dataclasses.replace(METRICS_LIMITS, max_connections=2)
    )
    try:
        idle = [socket.create_connection(("127.0.0.1", server.port), timeout=30) for _ in range(2)]
        try:
            assert b"mco_test_events_total 3.0" in _raw(server.port, b"GET /metrics HTTP/1.0\r\n\r\n")
            assert idle[0].recv(100) == b""  # the longest-idle one was closed to admit the scrape
        finally:
            for sock in idle:
                sock.close()
    finally:
        server.stop()


def test_large_exposition_reaches_a_slow_reader() -> None:
    registry = CollectorRegistry()
    gauge = Gauge("mco_test_node_level", "per node", ["node"], registry=registry)
    for i in range(20000):
        gauge.labels(f"worker-{i:05d}.cluster.local").set(i)
    server = serve_metrics(registry, host="127.0.0.1", port=0)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the server must wait for the reader
            sock.settimeout(30)
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
            time.sleep(0.2)
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
        reply = b"".join(chunks)
    finally:
        server.stop()
    head, _, body = reply.partition(b"\r\n\r\n")
    length = int(next(line for line in head.split(b"\r\n") if line.startswith(b"Content-Length")).split(b":")[1])
    assert len(body) == length > 1_000_000
    assert body.count(b"\nmco_test_node_level{") == 20000


class _Failing(Collector):
    def __init__(self) -> None:
        self.fail = True

    def collect(self) -> Iterable[Metric]:
        if self.fail:
            raise RuntimeError("source broke")
        yield GaugeMetricFamily("mco_test_recovered", "ok", value=1.0)


def test_a_failing_collector_gives_500_and_the_next_scrape_works(caplog: pytest.LogCaptureFixture) -> None:
    registry = CollectorRegistry()
    failing = _Failing()
    registry.register(failing)
    server = serve_metrics(registry, host="127.0.0.1", port=0)
    try:
        assert _raw(server.port, b"GET /metrics HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.1 500")
        failing.fail = False
        assert b"mco_test_recovered 1.0" in _raw(server.port, b"GET /metrics HTTP/1.0\r\n\r\n")
    finally:
        server.stop()
    assert "building the exposition failed" in caplog.text


def test_stop_with_a_keep_alive_connection_open_ends_the_thread(registry: CollectorRegistry) -> None:
    server = serve_metrics(registry, host="127.0.0.1", port=0)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        conn.getresponse().read()
        server.stop(timeout=30)
        assert not server.thread.is_alive()
    finally:
        conn.close()


def test_the_port_is_refused_after_stop(registry: CollectorRegistry) -> None:
    server = serve_metrics(registry, host="127.0.0.1", port=0)
    server.stop(timeout=30)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=30).close()
