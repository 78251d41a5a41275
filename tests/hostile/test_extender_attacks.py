"""Attacks on the extender from a stranger on the network: none may grow memory, fds or the log without bound.

Each test runs a real ``mco extender`` process (short deadlines, see conftest.LIMITS) and watches
it from outside: resident memory, open file descriptors, log lines and its own counters.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
import urllib.request

import pytest

from tests.analyzer.certs import TestCA
from tests.waiting import wait_until

from .conftest import LIMITS, ExtenderProcess

pytestmark = pytest.mark.hostile

PREDICATE = "/volcano/v1.10/predicate"


def head(path: str, length: int, extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n{extra}\r\n").encode()


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """True when the server closes ``sock`` within ``timeout`` seconds (whatever it sent first)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def test_announced_lengths_allocate_nothing(extender):
    """Announcing the largest body and sending 100 bytes of it holds 100 bytes, not 128 MiB."""
    ext: ExtenderProcess = extender(requestTimeoutSeconds=30, bodyTimeoutSeconds=30)
    before = ext.rss_mib()
    socks = [ext.connect() for _ in range(8)]
    for sock in socks:
        sock.sendall(head(PREDICATE, 128 * 1024 * 1024 - 1) + b"x" * 100)
    time.sleep(1.0)
    grown = ext.rss_mib() - before
    for sock in socks:
        sock.close()
    assert grown < 8, f"8 connections announcing 128 MiB each grew the extender by {grown:.0f} MiB"


def test_slow_headers_and_stalled_bodies_are_closed_at_their_deadlines(extender):
    ext = extender()
    silent = ext.connect()  # never sends a byte
    slow_head = ext.connect()
    slow_head.sendall(b"POST /volcano/v1.10/predicate HTTP/1.1\r\nHost: x\r\n")  # headers never end
    slow_body = ext.connect()
    slow_body.sendall(head(PREDICATE, 1000) + b"{")  # the body stops
    for sock in (silent, slow_head, slow_body):
        assert closed_by_server(sock, 5), "a stalled connection was kept open"
    closed = ext.metrics()
    assert closed['mco_extender_connections_closed_total{reason="header-timeout"}'] == 1
    assert closed['mco_extender_connections_closed_total{reason="body-timeout"}'] == 1
    assert closed['mco_extender_connections_closed_total{reason="idle-timeout"}'] == 1  # the silent one


def test_a_body_dripped_a_byte_at_a_time_is_closed_at_the_request_deadline(extender):
    ext = extender()
    drip = ext.connect()
    drip.sendall(head(PREDICATE, 1000))
    started = time.monotonic()
    closed = False
    while time.monotonic() - started < 10 and not closed:  # progress every 0.3 s, but far too slow
        try:
            drip.sendall(b" ")
            drip.settimeout(0.3)
            closed = drip.recv(1) == b""
        except TimeoutError:
            pass
        except OSError:
            closed = True
    elapsed = time.monotonic() - started
    assert closed, "a connection dripping its body was kept open"
    assert LIMITS["requestTimeoutSeconds"] - 0.5 <= elapsed < LIMITS["requestTimeoutSeconds"] + 3
    assert ext.metrics()['mco_extender_connections_closed_total{reason="request-timeout"}'] == 1


def test_idle_keep_alive_connections_are_closed_after_the_idle_timeout(extender):
    ext = extender()
    sock = ext.connect()
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    started = time.monotonic()
    assert closed_by_server(sock, LIMITS["idleTimeoutSeconds"] + 3)
    assert time.monotonic() - started >= LIMITS["idleTimeoutSeconds"] - 0.5


def test_connection_flood_is_capped_idle_ones_make_room_busy_ones_refuse(extender):
    ext = extender()
    cap = int(LIMITS["maxConnections"])
    fds_before = ext.fds()
    idle = [ext.connect() for _ in range(cap * 3)]  # three times the cap, all idle: the oldest make room
    time.sleep(0.5)
    assert ext.fds() <= fds_before + cap + 2
    status, _ = ext.post("/volcano/v1.10/predicate", b"{}")  # a scheduler still gets in
    assert status == 200
    for sock in idle:
        sock.close()
    busy = [ext.connect() for _ in range(cap)]
    for sock in busy:  # every slot in the middle of a request: nobody to evict
        sock.sendall(b"POST /volcano/v1.10/predicate HTTP/1.1\r\n")
    time.sleep(0.3)
    newcomer = ext.connect()
    reply = newcomer.recv(65536)
    assert reply.startswith(b"HTTP/1.1 503"), reply[:80]
    assert b"too many connections" in reply
    for sock in busy:
        sock.close()
    newcomer.close()
    wait_until(lambda: ext.connections() <= 1, "the busy connections to go", 10)
    counters = ext.metrics()
    assert counters["mco_extender_connections_refused_total"] >= 1
    assert counters['mco_extender_connections_closed_total{reason="evicted"}'] >= 2 * cap - 1


def test_unfinished_tls_handshakes_are_capped_and_closed(extender, tmp_path):
    """On an HTTPS port a connection counts from its accept: a stranger's connections that never send a
    ClientHello hold at most maxConnections fds, a scheduler still gets in, and all are closed at the
    head's deadline."""
    pki = tmp_path / "pki"
    pki.mkdir()
    ca = TestCA(pki)
    pair = ca.issue("extender", "mco-scheduler-extender", ["localhost"], server=True, ips=["127.0.0.1"])
    ext = extender(web={"tls": {"certFile": str(pair.cert), "keyFile": str(pair.key)}})
    context = ssl.create_default_context(cafile=str(ca.path))
    cap = int(LIMITS["maxConnections"])
    fds_before = ext.fds()
    silent = [ext.connect() for _ in range(cap * 3)]  # three times the cap, none starts its handshake
    time.sleep(0.5)
    assert ext.fds() <= fds_before + cap + 2
    req = urllib.request.Request(f"https://127.0.0.1:{ext.port}{PREDICATE}", data=b"{}", method="POST")
    with urllib.request.urlopen(req, timeout=10, context=context) as resp:  # a scheduler still gets in
        assert resp.status == 200
    started = time.monotonic()
    wait_until(lambda: ext.fds() <= fds_before, "the unfinished handshakes to be closed", 10)
    assert time.monotonic() - started < LIMITS["headerTimeoutSeconds"] + 3
    assert all(closed_by_server(sock, 1) for sock in silent)
    with urllib.request.urlopen(f"https://127.0.0.1:{ext.port}/metrics", timeout=10, context=context) as resp:
        counters = dict(
            line.rsplit(" ", 1) for line in resp.read().decode().splitlines() if line and not line.startswith("#")
        )
    assert float(counters['mco_extender_connections_closed_total{reason="evicted"}']) >= 2 * cap - 1
    assert float(counters['mco_extender_connections_closed_total{reason="handshake-timeout"}']) >= 1


def test_a_peer_that_never_reads_its_replies_is_paused_then_closed(extender):
    ext = extender()
    before = ext.rss_mib()
    sock = ext.connect()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    sock.settimeout(0.2)
    sent = 0
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        try:
            sent += sock.send(request * 200)
        except TimeoutError:  # the server stopped reading us: our send buffer is full
            continue
        except (BrokenPipeError, ConnectionResetError):
            break
    grown = ext.rss_mib() - before
    sock.close()
    assert grown < 16, f"unread replies held {grown:.0f} MiB"
    assert sent < 64 * 2**20, "the server kept reading requests whose replies nobody read"
    counters = ext.metrics()
    assert counters['mco_extender_connections_closed_total{reason="unread-replies"}'] == 1


def test_deeply_nested_bodies_are_counted_and_logged_once_a_second(extender):
    ext = extender(logLevel="warning")
    deep = b'{"task":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    lines_before = len(ext.log_lines())
    started = time.monotonic()
    for _ in range(200):
        status, body = ext.post(PREDICATE, deep)
        assert (status, body) == (200, b"{}")  # a pass: fail-open
    seconds = time.monotonic() - started
    new = ext.log_lines()[lines_before:]
    assert len(new) <= seconds + 2, f"{len(new)} log lines for 200 bad requests in {seconds:.1f}s"
    assert not any("Traceback" in line for line in new)
    counters = ext.metrics()
    assert counters['mco_extender_decode_errors_total{kind="invalid",route="volcano_predicate"}'] == 200


def test_kube_filter_with_a_mistyped_node_list_makes_an_ignorable_extender_skip(extender):
    ext = extender()
    for body in ({"Pod": {}, "NodeNames": "node-1"}, {"Pod": {}, "Nodes": {"items": 5}}, {"Pod": {}}):
        status, data = ext.post("/kube/filter", json.dumps(body).encode())
        reply = json.loads(data)
        assert status == 200
        assert reply["Error"], f"{body}: {reply} would filter out every node"
