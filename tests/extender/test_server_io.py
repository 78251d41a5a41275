"""The server's shared read buffer and batched replies: interleaved connections, pipelining, ``Connection: close``."""

from __future__ import annotations

import socket

import pytest

from . import bodies, go_contract

REJECTED = {"worker-1", "worker-4"}  # by the sample report: io and memory PSI over the thresholds
REQ = b"POST /volcano/v1.10/predicate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s\r\n%s"


@pytest.fixture
def fresh(report_file):
    report_file.write()
    return report_file


def read_replies(sock: socket.socket, count: int) -> list[bytes]:
    """``count`` HTTP replies (bodies), reading until they are complete or the peer closes."""
    data = b""
    replies: list[bytes] = []
    while len(replies) < count:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            head = data[:head_end].decode()
            length = int(head.lower().split("content-length:")[1].split("\r\n")[0])
            if len(data) >= head_end + 4 + length:
                replies.append(data[head_end + 4 : head_end + 4 + length])
                data = data[head_end + 4 + length :]
                continue
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return replies


def test_bodies_arriving_interleaved_in_small_pieces_on_many_connections(make_extender, fresh):
    """Every connection reads through one buffer: pieces of one body must never end up in another."""
    ext = make_extender()
    names = ["worker-1", "worker-2", "worker-3", "worker-4"] * 2
    requests = [REQ % (len(b), b"", b) for b in (bodies.dumps(bodies.predicate_body(n, pods=6)) for n in names)]
    socks = [socket.create_connection(("127.0.0.1", ext.port), timeout=10) for _ in names]
    try:
        for offset in range(0, max(len(r) for r in requests), 7000):
            for sock, req in zip(socks, requests, strict=True):
                if offset < len(req):
                    sock.sendall(req[offset : offset + 7000])
        replies = [read_replies(sock, 1) for sock in socks]
    finally:
        for sock in socks:
            sock.close()
    for name, (reply,) in zip(names, replies, strict=True):
        verdict = go_contract.volcano_predicate_v110(reply)
        assert verdict.passed == (name not in REJECTED), (name, reply)


def test_pipelined_replies_keep_their_order_and_stop_after_connection_close(make_extender, fresh):
    ext = make_extender()
    names = ["worker-1", "worker-2", "worker-1", "worker-2", "worker-1"]
    docs = [bodies.dumps(bodies.predicate_body(n, pods=1)) for n in names]
    close = b"Connection: close\r\n"
    pipeline = b"".join(REQ % (len(d), close if i == 2 else b"", d) for i, d in enumerate(docs))
    with socket.create_connection(("127.0.0.1", ext.port), timeout=10) as sock:
        sock.sendall(pipeline)
        replies = read_replies(sock, 5)
        assert sock.recv(100) == b""  # closed after the third reply
    assert [go_contract.volcano_predicate_v110(r).passed for r in replies] == [False, True, False]


def test_many_ready_connections_each_get_their_own_reply(make_extender, fresh):
    """Requests that are ready in the same loop pass are answered together, each on its own connection."""
    ext = make_extender()
    names = [f"worker-{1 + i % 4}" for i in range(16)]
    socks = [socket.create_connection(("127.0.0.1", ext.port), timeout=10) for _ in names]
    try:
        for sock, name in zip(socks, names, strict=True):
            doc = bodies.dumps(bodies.predicate_body(name, pods=1))
            sock.sendall((REQ % (len(doc), b"", doc)) * 3)
        replies = [read_replies(sock, 3) for sock in socks]
    finally:
        for sock in socks:
            sock.close()
    for name, got in zip(names, replies, strict=True):
        assert [go_contract.volcano_predicate_v110(r).passed for r in got] == [name not in REJECTED] * 3
