"""`promtool check metrics` on every part's exposition, with every family it declares holding a value.

promtool only judges a name once its family has a sample (a labelled family nobody has set yet is
invisible to it), so each test first fills every family through the part's own interfaces and
asserts that none is left empty: a family added later without a value here fails the test rather
than escaping the lint.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

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
from tests.collector.test_guard import Clock, memory_io_tree, set_stall

pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool missing: run make setup as root (Debian package prometheus), or MCO_TEST_SKIP_PROMTOOL=1",
)


def problems(exposition: bytes) -> list[str]:
    """promtool's findings, one per line (exit 0: none)."""
    out = subprocess.run(
        ["promtool", "check", "metrics"], input=exposition, capture_output=True, timeout=60, check=False
    )
    found = (out.stdout + out.stderr).decode().splitlines()
    assert (out.returncode == 0) == (not found), found
    return found


def empty_families(exposition: bytes) -> list[str]:
    """Families the exposition declares without a single sample."""
    return [f.name for f in text_string_to_metric_families(exposition.decode()) if not f.samples]


class _Connections:
    """A server's connection guard as the extender's metrics read it."""

    def __init__(self) -> None:
        self.open = [object()]
        self.refused = 1
        self.closed = {"idle-timeout": 2}


def test_the_collector_with_every_family_present(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    statuses = [StreamStatus(analyzer="10.0.0.1:9876", connected=True, sent=5, dropped=1, buffered=0, reconnects=2)]
    # a guard that has limited CPU, memory and I/O (tests/collector/test_guard.py's tree and clock)
    root, off = memory_io_tree(tmp_path, 400 * 2**20, "254:0 rbytes=0 wbytes=0 rios=0 wios=0 dbytes=0 dios=0\n")
    clock = Clock()
    guard = NodeGuard(detect_layout(root), online=["online.slice"], offline=["offline.slice"], rules=GuardRules(),
                      mode="on", journal_path=tmp_path / "j.json", cpus=2, clock=clock)  # fmt: skip
    guard.step()
    (off / "io.stat").write_text(f"254:0 rbytes={100 * 2**20} wbytes=0 rios=9 wios=0 dbytes=0 dios=0\n")
    for resource in ("cpu", "memory", "io"):
        set_stall(root, "online.slice", resource, 400_000)
    clock.now = 1.0
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
    assert empty_families(body) == []
    assert problems(body) == []
    # the block latency in the base unit: 1.5 ms and 2.5 ms
    assert b"\nmco_node_bio_latency_p99_seconds 0.0015\n" in body
    assert b'\nmco_device_bio_latency_p99_seconds{device="sda"} 0.0025\n' in body
    assert b"\nmco_node_pressure_io_full_seconds_total 12.5\n" in body
    assert b'\nmco_workload_pressure_seconds_total{class="online",group="online.slice",resource="io"} 0.4\n' in body
    assert b'\nmco_node_bio_latency_seconds_bucket{le="+Inf"} 7.0\n' in body
    assert b"mco_guard_online_cpu_pressure_percent" in body


def test_the_analyzer_with_every_family_present() -> None:
    registry = CollectorRegistry()
    metrics = AnalyzerMetrics(registry)
    node = NodeAssessment(name="w1", level=Level.HIGH, score=90.0, dimensions={"io": DimensionScore(Level.HIGH, 90.0)})
    metrics.publish_nodes((node,), ("io",))
    metrics.guard_events.labels("posted").inc()
    metrics.renewals_signed.labels("signed").inc()
    metrics.rules.info({"version": "v1", "source": "configmap"})
    metrics.generation.observe(0.01)
    body = generate_latest(registry)
    assert empty_families(body) == []
    assert b'mco_build_info{component="analyzer"' in body
    assert b"process_cpu_seconds_total" in body
    assert problems(body) == []


def test_the_extender_with_every_family_present() -> None:
    registry = CollectorRegistry()
    metrics = ExtenderMetrics(registry, lambda: ReportState(None, Fallback.STALE, "stale", 120.0))
    metrics.watch_connections(_Connections())
    metrics.request("kube_filter", 200, 0.001)
    metrics.decision("filter", "pass", "quiet")
    metrics.decode_errors.labels("kube_filter", "json").inc()
    metrics.internal_errors.labels("kube_filter").inc()
    metrics.slow_decodes.labels("kube_filter").inc()
    body = generate_latest(registry)
    assert empty_families(body) == []
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
