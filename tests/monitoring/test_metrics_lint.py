"""`promtool check metrics` on every part's exposition, with every family it can show filled in.

The only problems promtool may find are the abbreviated unit (``_ms``) in the block-latency
names that the architecture fixes (``mco_node_bio_latency_p99_ms_raw`` and its per-device and
average siblings); every other name follows Prometheus's conventions.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from mco_py.analysis.guard import GuardRules
from mco_py.analysis.policy import Fallback, ReportState
from mco_py.analyzer.metrics import AnalyzerMetrics
from mco_py.collector.exporter import SIGNAL_METRICS, TOTAL_METRICS, CollectorMetrics
from mco_py.collector.guard.files import detect_layout
from mco_py.collector.guard.loop import NodeGuard
from mco_py.collector.signals import Absence, NodeSample, Reading, StreamStatus, Total
from mco_py.extender.metrics import ExtenderMetrics
from mco_py.model import DimensionScore, Level, NodeAssessment
from mco_py.obs.credentials import CredentialExpiry, CredentialFile
from tests.analyzer.certs import TestCA

pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool missing: run make setup as root (Debian package prometheus)"
)

#: The design's names (ARCHITECTURE.md, signals table) with a unit promtool calls abbreviated.
SEED_MS_NAMES = {
    "mco_node_bio_latency_p99_ms_raw",
    "mco_device_bio_latency_p99_ms_raw",
    "mco_node_bio_latency_avg_ms_raw",
    "mco_device_bio_latency_avg_ms_raw",
}


def problems(exposition: bytes) -> list[str]:
    """promtool's findings, one per line (exit 0: none)."""
    out = subprocess.run(
        ["promtool", "check", "metrics"], input=exposition, capture_output=True, timeout=60, check=False
    )
    found = (out.stdout + out.stderr).decode().splitlines()
    assert (out.returncode == 0) == (not found), found
    return found


def test_the_collector_with_every_signal_present(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    statuses = [StreamStatus(analyzer="10.0.0.1:9876", connected=True, sent=5, dropped=1, buffered=0, reconnects=2)]
    tree = tmp_path / "cgroup"
    (tree / "online").mkdir(parents=True)
    (tree / "offline").mkdir()
    (tree / "cgroup.controllers").write_text("cpu io memory\n")
    for group in ("online", "offline"):
        (tree / group / "cpu.max").write_text("max 100000\n")
        for resource in ("cpu", "io", "memory"):
            (tree / group / f"{resource}.pressure").write_text("some avg10=0 avg60=0 avg300=0 total=5\n")
    guard = NodeGuard(
        detect_layout(tree),
        online=["online"],
        offline=["offline"],
        rules=GuardRules(),
        mode="on",
        journal_path=tmp_path / "journal.json",
    )
    guard.step()
    metrics = CollectorMetrics(registry, streams=lambda: statuses, extra=guard.families)
    readings = [Reading(name, 1.5, "procfs") for name in SIGNAL_METRICS]
    per_device = ("bioLatencyP99Ms", "bioLatencyAvgMs")
    readings += [Reading(name, 2.5, "libbpf", device="sda", events=40) for name in per_device]
    readings.append(Reading.absent("llcMissRate", "perf", Absence.UNSUPPORTED, "no PMU"))
    totals = [Total(name, 12.5) for name in TOTAL_METRICS]
    totals.append(Total("bioLatency", 7.0, slots={3: 1, 40: 5, 90: 1}))
    metrics.samples.update(NodeSample("n1", 1.0, 1.0, tuple(readings), {"psi": "procfs"}, tuple(totals)))
    metrics.sample_duration.observe(0.002)
    metrics.samples_taken.inc()
    body = generate_latest(registry)
    assert all(name.encode() in body for name in SEED_MS_NAMES)
    assert b"\nmco_node_pressure_io_full_seconds_total 12.5\n" in body
    assert b'\nmco_workload_pressure_seconds_total{class="offline",group="offline",resource="io"} 5e-06\n' in body
    assert b'\nmco_node_bio_latency_seconds_bucket{le="+Inf"} 7.0\n' in body
    for line in problems(body):
        name, _, problem = line.partition(" ")
        assert name in SEED_MS_NAMES, line
        assert problem == "metric names should not contain abbreviated units", line


def test_the_analyzer_is_clean() -> None:
    registry = CollectorRegistry()
    metrics = AnalyzerMetrics(registry)
    node = NodeAssessment(name="w1", level=Level.HIGH, score=90.0, dimensions={"io": DimensionScore(Level.HIGH, 90.0)})
    metrics.publish_nodes((node,), ("io",))
    body = generate_latest(registry)
    assert b'mco_build_info{component="analyzer"' in body
    assert b"process_cpu_seconds_total" in body
    assert problems(body) == []


def test_the_extender_is_clean() -> None:
    registry = CollectorRegistry()
    metrics = ExtenderMetrics(registry, lambda: ReportState(None, Fallback.STALE, "stale", 120.0))
    metrics.request("kube_filter", 200, 0.001)
    metrics.decision("filter", "pass", "quiet")
    body = generate_latest(registry)
    assert b'mco_build_info{component="extender"' in body
    assert problems(body) == []


@pytest.mark.parametrize("part", ["collector", "analyzer", "extender"])
def test_the_credential_expiry_gauges_are_clean(part: str, tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    registry = CollectorRegistry()
    CredentialExpiry(part, [CredentialFile("grpc_ca", "bundle", ca.path)], registry=registry)
    body = generate_latest(registry)
    assert f'mco_{part}_credential_expiry_timestamp_seconds{{credential="grpc_ca"}}'.encode() in body
    assert f'mco_{part}_credential_issued_timestamp_seconds{{credential="grpc_ca"}}'.encode() in body
    assert problems(body) == []
