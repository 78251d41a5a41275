"""End to end: real `mco collector` processes stream to a real `mco analyzer` process (standalone).

One collector reads a fixture /proc with heavy pressure, the other a calm one; the
report file must show one High and one None node, valid against the CRD schema.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import signal
import subprocess
import sys
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

HOT_PSI = {
    "cpu": "some avg10=60.00 avg60=50.00 avg300=40.00 total=1000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    "memory": "some avg10=30.00 avg60=20.00 avg300=10.00 total=1000\n"
    "full avg10=10.00 avg60=5.00 avg300=1.00 total=500\n",
    "io": "some avg10=70.00 avg60=60.00 avg300=50.00 total=1000\nfull avg10=40.00 avg60=30.00 avg300=20.00 total=500\n",
}


def tree(tmp_path: Path, name: str, *, hot: bool) -> Path:
    root = tmp_path / name
    shutil.copytree(HOST_TREE, root)
    if hot:
        for resource, text in HOT_PSI.items():
            (root / "proc" / "pressure" / resource).write_text(text)
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
    )
    procs: list[subprocess.Popen[str]] = []
    for node, hot in (("hot-node", True), ("calm-node", False)):
        root = tree(tmp_path, node, hot=hot)
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
                        "--analyzer",
                        f"127.0.0.1:{analyzer.grpc_port}",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    text=True,
                )
            )
    yield analyzer, report, procs
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    analyzer.stop()


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
    assert any("psiIoSomeAvg10=70 ≥ critical 50" in r for r in hot["reasons"])
    metrics = analyzer.metrics()
    assert "mco_analyzer_connected_collectors 2.0" in metrics
    assert 'mco_node_interference_level{node="hot-node"} 3.0' in metrics
    rejected = [
        line
        for line in metrics.splitlines()
        if line.startswith("mco_analyzer_samples_total{") and 'result="rejected"' in line and not line.endswith(" 0.0")
    ]
    assert rejected == [], f"the collector's samples must all be accepted: {json.dumps(rejected)}"
