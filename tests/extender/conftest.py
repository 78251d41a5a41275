"""Fixtures: a report file, a controllable clock, and real extender servers on port 0."""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from mco_py.analysis.policy import PolicySettings
from mco_py.extender.app import ExtenderApp
from mco_py.extender.source import FileReportSource, NoLabels
from mco_py.model import Level, NodeAssessment, Report
from mco_py.obs.http import RunningServer, ServerOptions, start_in_thread
from mco_py.store.file import FileReportStore

from .reference_decoder import decoder_named

NOW = 1_795_000_000.0


@dataclass
class Clock:
    now: float = NOW

    def __call__(self) -> float:
        return self.now


def assessment(name: str, level: Level = Level.NONE, score: float = 0.0, **signals: float) -> NodeAssessment:
    return NodeAssessment(name=name, level=level, score=score, signals=signals, last_sample_time=NOW - 1)


def sample_nodes() -> list[NodeAssessment]:
    """worker-1 noisy (io PSI 61.2), worker-2 quiet, worker-3 Unknown with a stale high value."""
    return [
        assessment("worker-1", Level.HIGH, 81.5, psiIoSomeAvg10=61.2, psiCpuSomeAvg10=14.0),
        assessment("worker-2", Level.NONE, 0.0, psiIoSomeAvg10=0.01),
        assessment("worker-3", Level.UNKNOWN, 90.0, psiIoSomeAvg10=95.0),
        assessment("worker-4", Level.LOW, 30.0, psiMemoryFullAvg10=0.5),
    ]


@dataclass
class ReportFile:
    path: Path

    def write(self, nodes: list[NodeAssessment] | None = None, *, updated: float = NOW) -> None:
        report = Report(
            last_update_time=updated,
            analyzer_identity="test",
            rules_version="1",
            nodes=tuple(sample_nodes() if nodes is None else nodes),
        )
        FileReportStore(self.path).write(report)

    def write_raw(self, data: bytes) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(self.path)


@pytest.fixture
def report_file(tmp_path: Path) -> ReportFile:
    return ReportFile(tmp_path / "report.json")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@dataclass
class Extender:
    app: ExtenderApp
    server: RunningServer
    registry: CollectorRegistry
    conns: list[http.client.HTTPConnection] = field(default_factory=list)

    @property
    def port(self) -> int:
        return self.server.port

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes, http.client.HTTPResponse]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        self.conns.append(conn)
        conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, data, resp

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        status, data, _ = self.request("POST", path, body)
        return status, data

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        return self.registry.get_sample_value(name, labels or {})


def serve_fresh_report(directory: Path, decoder: str = "msgspec", **server_args: Any) -> RunningServer:
    """A real extender on port 0 over a report written just now (for module-scoped fixtures)."""
    path = directory / "report.json"
    ReportFile(path).write(updated=time.time())
    app = ExtenderApp(
        policy=PolicySettings(),
        source=FileReportSource(path),
        labels=NoLabels(),
        decoder=decoder_named(decoder),
        registry=CollectorRegistry(),
    )
    return start_in_thread(app, options=ServerOptions(on_guard=app.metrics.watch_connections, **server_args))


@pytest.fixture
def make_extender(report_file: ReportFile, clock: Clock) -> Iterator[Callable[..., Extender]]:
    started: list[Extender] = []

    def _make(
        *,
        policy: PolicySettings | None = None,
        decoder: str = "msgspec",
        volcano_version: str = "1.9",
        max_body: int = 128 * 1024 * 1024,
        source: Any = None,
        labels: Any = None,
        trim_heap: Callable[[int], object] | None = None,
        trim_delay: float = 10.0,
    ) -> Extender:
        registry = CollectorRegistry()
        app = ExtenderApp(
            policy=policy or PolicySettings(),
            source=source or FileReportSource(report_file.path),
            labels=labels or NoLabels(),
            decoder=decoder_named(decoder),
            registry=registry,
            volcano_version=volcano_version,
            clock=clock,
        )
        options = ServerOptions(
            max_body=max_body, trim_heap=trim_heap, trim_delay=trim_delay, on_guard=app.metrics.watch_connections
        )
        server = start_in_thread(app, options=options)
        ext = Extender(app, server, registry)
        started.append(ext)
        return ext

    yield _make
    for ext in started:
        for conn in ext.conns:
            conn.close()
        ext.server.stop()
