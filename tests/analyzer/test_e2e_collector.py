"""End to end: real `mco collector` processes stream to a real `mco analyzer` process (standalone).

One collector reads a fixture /proc under heavy pressure (its PSI ``total=`` counters
advance as on a host where tasks stall 60-70 % of the time), the other a calm one; the
report file must show one High and one None node, valid against the CRD schema.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.analyzer.test_main import Process, read_report
from tests.contracts import crd_schema

ROOT = Path(__file__).resolve().parents[2]
HOST_TREE = ROOT / "tests" / "collector" / "fixtures" / "host"

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("mco_py.collector.main") is None,
        reason="mco collector (branch collector) is not merged yet",
    ),
    pytest.mark.skipif(not HOST_TREE.is_dir(), reason="collector fixture tree tests/collector/fixtures/host missing"),
]

#: resource -> (some avg10, full avg10, share of time some / all tasks stall)
HOT_PSI = {"cpu": (60.0, 0.0, 0.6, 0.0), "memory": (30.0, 10.0, 0.3, 0.1), "io": (70.0, 40.0, 0.7, 0.4)}


def write_pressure(proc: Path, elapsed_us: int) -> None:
    """PSI files as on a host that has been under HOT_PSI for ``elapsed_us`` (atomic rename per file)."""
    for resource, (some, full, some_share, full_share) in HOT_PSI.items():
        text = (
            f"some avg10={some:.2f} avg60={some:.2f} avg300={some:.2f} total={int(elapsed_us * some_share)}\n"
            f"full avg10={full:.2f} avg60={full:.2f} avg300={full:.2f} total={int(elapsed_us * full_share)}\n"
        )
        tmp = proc / "pressure" / f".{resource}"
        tmp.write_text(text)
        tmp.replace(proc / "pressure" / resource)


@contextlib.contextmanager
def stalling(proc: Path) -> Iterator[None]:
    """Advance the PSI counters of the fixture tree ``proc`` in real time until the block ends."""
    stop = threading.Event()
    started = time.monotonic()

    def run() -> None:
        # every 10 ms: the collector's 0.2 s windows then see at most a few percent of jitter
        while not stop.wait(0.01):
            write_pressure(proc, int((time.monotonic() - started) * 1e6))

    write_pressure(proc, 0)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def tree(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(HOST_TREE, root)
    return root


@pytest.fixture
def collectors(tmp_path: Path) -> Iterator[tuple[Process, Path, list[subprocess.Popen[str]]]]:
    report = tmp_path / "report.json"
    analyzer = Process(
        "--listen",
        "127.0.0.1:0",
        "--metrics-host",
        "127.0.0.1",
        "--metrics-port",
        "0",
        "--report-file",
        str(report),
        "--rules-file",
        str(tmp_path / "defaults-please.yaml"),
        "--report-interval",
        "0.2",
        "--report-min-interval",
        "0.1",
    )
    procs: list[subprocess.Popen[str]] = []
    stack = contextlib.ExitStack()
    stack.enter_context(stalling(tree(tmp_path, "hot-node") / "proc"))
    stack.callback(analyzer.stop)
    for node in ("hot-node", "calm-node"):
        root = tmp_path / node if node == "hot-node" else tree(tmp_path, node)
        # stderr to a file: a pipe nobody reads could fill up and block the collector
        with (tmp_path / f"{node}.log").open("w") as log:
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "mco_py.cli",
                        "collector",
                        "--node-name",
                        node,
                        "--interval",
                        "0.2",
                        "--proc-root",
                        str(root / "proc"),
                        "--sys-root",
                        str(root / "sys"),
                        "--bio-backend",
                        "diskstats",
                        "--llc",
                        "off",
                        "--metrics-host",
                        "127.0.0.1",
                        "--metrics-port",
                        "0",
                        "--stream-analyzers",
                        f"127.0.0.1:{analyzer.grpc_port}",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    text=True,
                )
            )
    with stack:
        yield analyzer, report, procs
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.mark.slow
def test_collectors_to_analyzer_to_report(collectors: tuple[Process, Path, list[subprocess.Popen[str]]]) -> None:
    analyzer, report, procs = collectors

    def levels() -> dict[str, str]:
        nodes = read_report(report).get("status", {}).get("nodes", [])
        return {n["name"]: n["level"] for n in nodes}

    def ready() -> bool:
        for proc in procs:
            if proc.poll() is not None:
                logs = {log.name: log.read_text()[-2000:] for log in report.parent.glob("*.log")}
                raise AssertionError(f"collector exited {proc.returncode}: {logs}")
        return levels() == {"hot-node": "High", "calm-node": "None"}

    analyzer.wait_for(ready, "one High and one None node from two real collectors", timeout=60)
    doc = read_report(report)
    assert crd_schema.errors(doc) == []
    hot = next(n for n in doc["status"]["nodes"] if n["name"] == "hot-node")
    assert hot["signals"]["psiIoSomeAvg10"] == pytest.approx(70.0)
    # A busy host delays the writer thread and the collector's reads: the measured rate
    # jitters around 70 (82.7 was seen under make test's second lane); what matters is that
    # it arrives and is judged past the critical line (50).
    assert hot["signals"]["psiIoSomeRate"] == pytest.approx(70.0, abs=18)
    assert any(r.startswith("psiIoSomeRate=") and "≥ critical 50 (io sub-score 100)" in r for r in hot["reasons"])
    assert hot["dimensions"]["io"]["level"] == "High"
    # The dominant dimension scores highest, the first in rules order on a tie. All three are
    # near or past critical here, and a busy host makes the measured rates jitter around those
    # lines, so which one that is may change from run to run: the rule does not.
    dims = hot["dimensions"]
    top = max(d["score"] for d in dims.values())
    assert hot["dominant"] == next(name for name in ("cpu", "memory", "io") if dims.get(name, {}).get("score") == top)
    metrics = analyzer.metrics()
    assert "mco_analyzer_connected_collectors 2.0" in metrics
    assert 'mco_node_interference_level{node="hot-node"} 3.0' in metrics
    assert 'mco_node_interference_level{dimension="io",node="hot-node"} 3.0' in metrics
    assert 'mco_node_interference_level{dimension="cache",node="calm-node"} 0.0' in metrics
    rejected = [
        line
        for line in metrics.splitlines()
        if line.startswith("mco_analyzer_samples_total{") and 'result="rejected"' in line and not line.endswith(" 0.0")
    ]
    assert rejected == [], f"the collector's samples must all be accepted: {json.dumps(rejected)}"
