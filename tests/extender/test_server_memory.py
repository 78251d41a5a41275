"""The server frees what a closed connection held and trims the C heap after large requests (flat RSS under load)."""

from __future__ import annotations

import gc
import socket
import threading
import time

import httptools
import pytest

from mco_py.obs.process import malloc_trim

from . import bodies

PREDICATE = "/volcano/v1.10/predicate"


@pytest.fixture
def fresh(report_file):
    report_file.write()
    return report_file


def parsers() -> int:
    return sum(1 for obj in gc.get_objects() if isinstance(obj, httptools.HttpRequestParser))


def test_closed_connections_are_freed_without_the_cyclic_gc(make_extender, fresh):
    """The service runs the cyclic GC rarely; a connection left in a reference cycle would pile up until then."""
    ext = make_extender()
    body = bodies.dumps(bodies.predicate_body("worker-2", pods=1))
    gc.collect()
    gc.disable()
    try:
        before = parsers()
        for _ in range(20):
            status, _ = ext.post(PREDICATE, body)
            assert status == 200
            ext.conns.pop().close()
        deadline = time.monotonic() + 10
        while parsers() > before and time.monotonic() < deadline:  # the server sees the closes in its own thread
            time.sleep(0.02)
        assert parsers() == before
    finally:
        gc.enable()


def test_heap_is_trimmed_after_a_large_request_and_not_after_small_ones(make_extender, fresh):
    trimmed = threading.Event()
    pads: list[int] = []

    def trim(pad: int) -> None:
        pads.append(pad)
        trimmed.set()

    ext = make_extender(trim_heap=trim, trim_delay=0.05)
    small = bodies.dumps(bodies.predicate_body("worker-2", pods=7))  # ~64 KiB
    large = bodies.dumps(bodies.predicate_body("worker-2", pods=104))  # ~730 KiB
    assert len(small) < 512 * 1024 <= len(large)
    for _ in range(3):
        assert ext.post(PREDICATE, small)[0] == 200
    assert not trimmed.wait(0.5)
    assert ext.post(PREDICATE, large)[0] == 200
    assert trimmed.wait(10)
    assert pads == [len(large)]  # room for the next body of that size stays at the top of the heap


def test_heap_is_trimmed_after_a_large_body_dropped_half_way(make_extender, fresh):
    """A peer that sends 2 MiB of a body and hangs up leaves no high heap behind (no later request needed)."""
    pads: list[int] = []
    trimmed = threading.Event()
    ext = make_extender(trim_heap=lambda pad: (pads.append(pad), trimmed.set()), trim_delay=0.05)
    with socket.create_connection(("127.0.0.1", ext.port), timeout=10) as sock:
        sock.sendall(b"POST /volcano/v1.10/predicate HTTP/1.1\r\nHost: x\r\nContent-Length: 8000000\r\n\r\n")
        sock.sendall(b" " * (2 * 1024 * 1024))
        time.sleep(0.3)
    assert trimmed.wait(10)
    assert pads
    assert 1024 * 1024 < pads[0] <= 2 * 1024 * 1024


def test_malloc_trim_is_found_and_callable():
    trim = malloc_trim()
    assert trim is not None  # the test host and the service image run glibc
    assert trim(0) in (0, 1)  # 1 = memory was released
