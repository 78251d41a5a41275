"""The analyzer's Prometheus metrics, on an injected registry."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from mco_py.analysis.samples import REJECT_REASONS
from mco_py.model import Level, NodeAssessment
from mco_py.obs.runtime import RuntimeMetrics

RELOAD_RESULTS = ("success", "unchanged", "invalid", "missing", "error")


LEVEL_METRIC = "mco_node_interference_level"


class _NodeSeries(Collector):
    """``mco_node_interference_level`` and ``_score`` per node, read from the last report at scrape time.

    The level has one series per node (label ``node``: the node level) and one per node and
    dimension of the rules (labels ``node`` and ``dimension``; a dimension missing from a node's
    assessment is at None, an Unknown node's dimensions are Unknown). Select the node levels with
    ``{dimension=""}``.

    Setting 20,000 labelled gauges after every build cost more than the build of the
    unchanged report; a scrape (every 15-60 s) walks the node list once instead.
    """

    def __init__(self) -> None:
        self.nodes: Sequence[NodeAssessment] = ()
        self.dimensions: Sequence[str] = ()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        nodes, dimensions = self.nodes, self.dimensions  # a concurrent publish swaps whole tuples
        level = GaugeMetricFamily(
            LEVEL_METRIC,
            "Interference level per node, and per node and dimension: None=0, Low=1, Medium=2, High=3, Unknown=-1",
            labels=["node"],
        )
        score = GaugeMetricFamily("mco_node_interference_score", "Interference score per node, 0-100", labels=["node"])
        unknown = Level.UNKNOWN
        for item in nodes:
            name = item.name
            code = item.level.code
            level.add_metric([name], code)
            score.add_metric([name], item.score)
            dims = item.dimensions
            for dim in dimensions:
                if item.level is unknown:
                    value = code
                else:
                    found = dims.get(dim)
                    value = 0 if found is None else found.level.code
                level.add_sample(LEVEL_METRIC, {"node": name, "dimension": dim}, value)
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
            "Nodes whose dimensions, signals and reasons were left out of the last report (size limit)",
            registry=registry,
        )
        self.nodes_dropped = Gauge(
            "mco_analyzer_report_dropped_nodes",
            "Nodes left out of the last report entirely (size limit)",
            registry=registry,
        )
        self.shards = Gauge(
            "mco_analyzer_report_shards",
            "Shard objects of the last report (0: one object); see docs/architecture.md",
            registry=registry,
        )
        self.shard_writes = Counter(
            "mco_analyzer_report_shard_writes_total", "Shards written whole (each a JSON patch)", registry=registry
        )
        self.nodes = Gauge("mco_analyzer_nodes", "Nodes tracked by the analyzer", registry=registry)
        self.collectors = Gauge(
            "mco_analyzer_connected_collectors", "Collector streams currently open", registry=registry
        )
        self.guard_events = Counter(
            "mco_analyzer_guard_events_total",
            "Node guards' limit changes posted as Node Events, or dropped (queue full) or failed",
            ["result"],
            registry=registry,
        )
        self.renewals_signed = Counter(
            "mco_analyzer_certificate_renewals_signed_total",
            "Collectors' certificate renewals (Renew calls) this analyzer's signing CA signed or refused",
            ["result"],
            registry=registry,
        )
        self.collector_dropped = Counter(
            "mco_analyzer_collector_dropped_samples_total",
            "Samples collectors report they dropped from full send buffers",
            registry=registry,
        )
        self.nodes_evicted = Counter(
            "mco_analyzer_nodes_evicted_total",
            "Nodes forgotten early (silent for staleAfterSeconds) to admit new ones into a full node table",
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
        self.rules_source_valid = Gauge(
            "mco_analyzer_rules_source_valid",
            "0 while the rules document at the source is rejected as invalid (the last good rules stay in force), "
            "else 1",
            registry=registry,
        )
        self.rules_source_valid.set(1)
        self.samples.labels("accepted", "none")
        for reason in REJECT_REASONS:
            self.samples.labels("rejected", reason)
        for reason in ("unauthenticated", "permission_denied"):
            self.batches_rejected.labels(reason)
        for result in RELOAD_RESULTS:
            self.rules_reloads.labels(result)
        self.runtime = RuntimeMetrics("analyzer", registry)

    def publish_nodes(self, nodes: tuple[NodeAssessment, ...], dimensions: Sequence[str] = ()) -> None:
        """Per-node series for exactly ``nodes`` from now on (forgotten nodes vanish with them), and
        per node and each of ``dimensions`` (the rules' dimension names)."""
        series = self._node_series
        series.nodes, series.dimensions = nodes, tuple(dimensions)
        self.nodes.set(len(nodes))
