"""A real ``mco extender`` process with short deadlines, watched from outside (RSS, fds, log lines)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from mco_py.model import Level, NodeAssessment, Report
from mco_py.store.file import FileReportStore
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]

#: Short deadlines so each attack ends within seconds.
LIMITS = {
    "maxConnections": 40,
    "headerTimeoutSeconds": 1.0,
    "bodyTimeoutSeconds": 1.0,
    "requestTimeoutSeconds": 3.0,
    "idleTimeoutSeconds": 2.0,
}


@dataclass
class ExtenderProcess:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    sockets: list[socket.socket] = field(default_factory=list)

    @property
    def ps(self) -> psutil.Process:
        return psutil.Process(self.proc.pid)

    def rss_mib(self) -> float:
        return self.ps.memory_info().rss / 2**20

    def fds(self) -> int:
        return self.ps.num_fds()

    def log_lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        self.sockets.append(sock)  # closed at teardown whatever the test did
        return sock

    def metrics(self) -> dict[str, float]:
        """``name{labels}`` -> value from /metrics (on a connection of its own)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def connections(self) -> float:
        """Open connections; while the server still counts closed ones at the cap it refuses a new
        one with 503 (as it should), which counts as "still full"."""
        try:
            return self.metrics()["mco_extender_connections"]
        except urllib.error.HTTPError as exc:
            if exc.code != 503:
                raise
            return float("inf")

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=body, method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()


@pytest.fixture
def extender(tmp_path: Path) -> Iterator[Callable[..., ExtenderProcess]]:
    started: list[ExtenderProcess] = []

    def _start(**settings: Any) -> ExtenderProcess:
        report = tmp_path / "report.json"
        nodes = (NodeAssessment("worker-1", Level.NONE, 1.0, {"psiIoSomeAvg10": 0.1}, last_sample_time=time.time()),)
        FileReportStore(report).write(Report(time.time(), "test", "1", nodes))
        cfg = tmp_path / "extender.yaml"
        cfg.write_text(
            json.dumps(
                {
                    "mode": "standalone",
                    "reportFile": str(report),
                    "crStatusTTLSeconds": 3600,
                    "volcanoVersion": "1.10",
                    "listen": "127.0.0.1:0",
                    **LIMITS,
                    **settings,
                }
            )
        )
        log = tmp_path / f"extender-{len(started)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "mco_py.cli", "extender", "--config", str(cfg)], cwd=ROOT, stderr=out
            )
        ext = ExtenderProcess(proc, 0, log)
        started.append(ext)

        def _listening() -> bool:
            assert proc.poll() is None, ext.log.read_text()
            ports = [c.laddr.port for c in ext.ps.net_connections("tcp") if c.status == psutil.CONN_LISTEN]
            if ports:
                ext.port = ports[0]
            return bool(ports)

        wait_until(_listening, "the extender to listen", 30)
        return ext

    yield _start
    for ext in started:
        for sock in ext.sockets:
            sock.close()
        ext.proc.terminate()
        try:
            ext.proc.wait(10)
        except subprocess.TimeoutExpired:
            ext.proc.kill()
