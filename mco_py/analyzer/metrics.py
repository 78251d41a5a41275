"""The analyzer's Prometheus metrics, on an injected registry."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from mco_py.analysis.samples import REJECT_REASONS
from mco_py.model import NodeAssessment

RELOAD_RESULTS = ("success", "unchanged", "invalid", "missing", "error")


class _NodeSeries(Collector):
    """``mco_node_interference_level`` and ``_score`` per node, read from the last report at scrape time.

    Setting 20,000 labelled gauges after every build cost more than the build of the
    unchanged report; a scrape (every 15-60 s) walks the node list once instead.
    """

    def __init__(self) -> None:
        self.nodes: Sequence[NodeAssessment] = ()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        nodes = self.nodes  # one reference read: a concurrent publish swaps the whole tuple
        level = GaugeMetricFamily(
            "mco_node_interference_level",
            "Interference level per node: None=0, Low=1, Medium=2, High=3, Unknown=-1",
            labels=["node"],
        )
        score = GaugeMetricFamily("mco_node_interference_score", "Interference score per node, 0-100", labels=["node"])
        for item in nodes:
            level.add_metric([item.name], item.level.code)
            score.add_metric([item.name], item.score)
        yield level
        yield score


class AnalyzerMetrics:
    """Every series the analyzer exports. Label values are bounded (node names aside)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._node_series = _NodeSeries()
        registry.register(self._node_series)
        self.generation = Histogram(
            "mco_analyzer_report_generation_duration_seconds",
            "Time to build and size-check one report",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=registry,
        )
        self.write_errors = Counter(
            "mco_analyzer_report_write_errors_total", "Report writes that failed", registry=registry
        )
        self.writes = Counter("mco_analyzer_report_writes_total", "Reports written", registry=registry)
        self.report_bytes = Gauge(
            "mco_analyzer_report_size_bytes", "Encoded size of the last report status", registry=registry
        )
        self.detail_dropped = Gauge(
            "mco_analyzer_report_detail_dropped_nodes",
            "Nodes whose signals and reasons were left out of the last report (size limit)",
            registry=registry,
        )
        self.nodes_dropped = Gauge(
            "mco_analyzer_report_dropped_nodes",
            "Nodes left out of the last report entirely (size limit)",
            registry=registry,
        )
        self.nodes = Gauge("mco_analyzer_nodes", "Nodes tracked by the analyzer", registry=registry)
        self.collectors = Gauge(
            "mco_analyzer_connected_collectors", "Collector streams currently open", registry=registry
        )
        self.collector_dropped = Counter(
            "mco_analyzer_collector_dropped_samples_total",
            "Samples collectors report they dropped from full send buffers",
            registry=registry,
        )
        self.samples = Counter(
            "mco_analyzer_samples_total",
            "Samples received, by result and rejection reason",
            ["result", "reason"],
            registry=registry,
        )
        self.batches_rejected = Counter(
            "mco_analyzer_streams_rejected_total",
            "Streams refused before any sample was read",
            ["reason"],
            registry=registry,
        )
        self.leader = Gauge(
            "mco_analyzer_leader", "1 while this replica holds the Lease and writes the report", registry=registry
        )
        self.rules = Info("mco_analyzer_rules", "Detection rules in force", registry=registry)
        self.rules_reloads = Counter(
            "mco_analyzer_rules_reload_total", "Rules reload attempts by result", ["result"], registry=registry
        )
        self.samples.labels("accepted", "none")
        for reason in REJECT_REASONS:
            self.samples.labels("rejected", reason)
        for reason in ("unauthenticated", "permission_denied"):
            self.batches_rejected.labels(reason)
        for result in RELOAD_RESULTS:
            self.rules_reloads.labels(result)

    def publish_nodes(self, nodes: tuple[NodeAssessment, ...]) -> None:
        """Per-node series for exactly ``nodes`` from now on (forgotten nodes vanish with them)."""
        self._node_series.nodes = nodes
        self.nodes.set(len(nodes))
