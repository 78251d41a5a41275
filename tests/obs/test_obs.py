"""Shared logging and metrics helpers."""

from __future__ import annotations

import io
import json
import logging
import urllib.request

from prometheus_client import CollectorRegistry, Counter

from mco_py.obs.logging import JsonFormatter, OnceFilter, setup_logging, truncate
from mco_py.obs.metrics import serve_metrics


def test_json_lines_carry_extra_fields_and_truncate_payloads() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    setup_logging("debug", stream=stream)
    try:
        logging.getLogger("mco.test").warning("bad body", extra={"node": "n1", "body": "x" * 5000})
    finally:
        root.handlers[:], level = saved  # later tests keep pytest's capture handlers and the root level
        root.setLevel(level)
    line = json.loads(stream.getvalue())
    assert line["level"] == "warning"
    assert line["node"] == "n1"
    assert line["message"] == "bad body"
    assert len(line["body"]) < 2100
    assert line["body"].endswith("[3000 more chars]")
    assert line["time"].endswith("Z")


def test_formatter_includes_exceptions() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "failed", None, exc_info=__import__("sys").exc_info()
        )
    out = json.loads(JsonFormatter().format(record))
    assert "ValueError: boom" in out["exception"]


def test_truncate_keeps_short_text() -> None:
    assert truncate("abc", 5) == "abc"


def test_once_filter() -> None:
    once = OnceFilter()
    assert once.first("psi")
    assert not once.first("psi")
    once.clear("psi")
    assert once.first("psi")


def test_metrics_server_on_port_zero_serves_the_registry() -> None:
    registry = CollectorRegistry()
    Counter("mco_test_events_total", "events", registry=registry).inc(3)
    server = serve_metrics(registry, host="127.0.0.1", port=0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=30) as response:
            body = response.read().decode()
    finally:
        server.stop()
    assert "mco_test_events_total 3.0" in body
