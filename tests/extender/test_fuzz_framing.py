"""Fuzz pass over the extender's HTTP framing: request lines, headers, lengths and chunking that a
stranger may send, split at random points. The server answers with a well-formed 4xx/2xx status or
closes the connection, never a 5xx other than a counted 503, and a scheduler's request on a fresh
connection still gets its answer."""

from __future__ import annotations

import http.client
import re
import socket
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mco_py.obs.http import RunningServer
from mco_py.obs.http_app import Limits

from . import bodies
from .conftest import serve_fresh_report

STATUS_LINE = re.compile(rb"^HTTP/1\.[01] (\d{3}) ")
ANY_STATUS = re.compile(rb"HTTP/1\.[01] (\d{3}) ")
PATHS = [b"/volcano/v1.9/predicate", b"/kube/filter", b"/healthz", b"/metrics", b"/", b"/x" * 300, b"*", b""]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    limits = Limits(header_timeout=1.0, body_timeout=1.0, request_timeout=2.0, idle_timeout=2.0, sweep_interval=0.1)
    running = serve_fresh_report(tmp_path_factory.mktemp("framing"), max_body=64 * 1024, limits=limits)
    yield running
    running.stop()


def chunked(body: bytes, sizes: list[int], lie: int) -> bytes:
    """``body`` in chunks of ``sizes``; ``lie`` is added to every announced size (0 = honest)."""
    out, i = b"", 0
    for size in sizes:
        piece = body[i : i + size]
        i += size
        out += f"{max(len(piece) + lie, 0):x}\r\n".encode() + piece + b"\r\n"
    return out + b"0\r\n\r\n"


GOOD_HEADERS = [
    b"Content-Type: application/json",
    b"Host: x",
    b"Connection: close",
    b"Connection: keep-alive",
    b"Transfer-Encoding: chunked",
    b"Expect: 100-continue",
    b"Accept-Encoding: gzip",
]
BAD_HEADERS = [
    b"Content-Length: 0",
    b"Content-Length: -1",
    b"Content-Length: 99999999999999999999",
    b"Content-Length: abc",
    b"Content-Length: 5, 7",
    b"Transfer-Encoding: gzip, chunked",
    b"Transfer-Encoding: identity",
    b" folded: continuation",
    b"NoColon",
    b":",
    b"X-Long: " + b"a" * 9000,
]
header_lines = st.lists(
    st.one_of(
        st.sampled_from(GOOD_HEADERS),
        st.sampled_from(GOOD_HEADERS),
        st.sampled_from(BAD_HEADERS),
        st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
    ),
    max_size=5,
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    # Mostly a plausible request line, so that the header, length and chunk handling is reached too.
    method = draw(
        st.sampled_from([b"POST"] * 6 + [b"GET", b"PUT", b"HEAD", b"DELETE", b"PRI", b"post", b"P\x00ST", b""])
    )
    path = draw(st.sampled_from(PATHS[:2] * 4 + PATHS))
    version = draw(st.sampled_from([b"HTTP/1.1"] * 6 + [b"HTTP/1.0", b"HTTP/2.0", b"HTTP/9", b"", b"HTTP/1.1 extra"]))
    headers = draw(header_lines)
    body = draw(st.one_of(st.binary(max_size=300), st.just(bodies.dumps(bodies.predicate_body("worker-1", pods=1)))))
    if b"Transfer-Encoding: chunked" in headers and draw(st.booleans()):
        sizes = draw(st.lists(st.integers(1, 64), min_size=1, max_size=6))
        body = chunked(body, sizes, draw(st.sampled_from([0, 0, 1, -1, 1000])))
    elif draw(st.booleans()):
        headers = [*headers, b"Content-Length: %d" % (len(body) + draw(st.sampled_from([0, 0, -3, 5])))]
    sep = draw(st.sampled_from([b"\r\n"] * 4 + [b"\n", b"\r"]))
    raw = b" ".join(p for p in (method, path, version) if p) + sep + sep.join(headers) + sep + sep + body
    if draw(st.booleans()):
        raw += raw  # a pipelined second request, or leftovers
    cuts = sorted(draw(st.lists(st.integers(0, len(raw)), max_size=4)))
    return raw, cuts


def exchange(port: int, raw: bytes, cuts: list[int]) -> bytes:
    """Send ``raw`` in pieces split at ``cuts``, half-close, read until the server closes (or 5 s)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        start = 0
        try:
            for cut in [*cuts, len(raw)]:
                sock.sendall(raw[start:cut])
                start = cut
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may close first (a bad head): what it sent is still read below
        data = b""
        while True:
            try:
                piece = sock.recv(65536)
            except TimeoutError:
                pytest.fail(f"the server neither answered nor closed within 5 s after {raw[:120]!r}")
            except ConnectionResetError:
                break
            if not piece:
                break
            data += piece
    return data


def answered_by_a_scheduler(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("POST", "/kube/filter", body=b'{"NodeNames": ["worker-1"]}')
        return conn.getresponse().status
    finally:
        conn.close()


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=requests())
def test_any_framing_gets_a_well_formed_answer_or_a_close(
    server: RunningServer, request: tuple[bytes, list[int]]
) -> None:
    raw, cuts = request
    data = exchange(server.port, raw, cuts)
    if data:
        assert STATUS_LINE.match(data), f"not an HTTP status line: {data[:80]!r} for {raw[:120]!r}"
        codes = [int(code) for code in ANY_STATUS.findall(data)]  # 100 Continue, pipelined replies
        assert all(code < 500 or code == 503 for code in codes), f"{codes} for {raw[:200]!r}"
    assert answered_by_a_scheduler(server.port) == 200
