"""Prometheus exposition of the latest sample and the collector's self-metrics.

Signal series are produced at scrape time from the latest sample by a custom
collector, so an absent signal simply has no series (never 0); its absence is
shown by ``mco_collector_signal_absent{signal,kind}``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mco_py.collector import psi
from mco_py.collector.signals import NodeSample, Reading, StreamStatus

#: signal key -> (node metric, device metric or "", help)
SIGNAL_METRICS: dict[str, tuple[str, str, str]] = {
    "llcMissRate": ("mco_node_cache_miss_rate", "", "LLC misses / references over the interval (perf counters)"),
    "bioLatencyP99Ms": (
        "mco_node_bio_latency_p99_ms_raw",
        "mco_device_bio_latency_p99_ms_raw",
        "P99 block request latency over the interval, milliseconds",
    ),
    "bioLatencyAvgMs": (
        "mco_node_bio_latency_avg_ms_raw",
        "mco_device_bio_latency_avg_ms_raw",
        "AVERAGE block request latency over the interval from /proc/diskstats (not a percentile), milliseconds",
    ),
    "bioRequests": ("mco_node_bio_requests_raw", "", "Block requests completed in the interval"),
    "cpuStealPercent": ("mco_node_cpu_steal_percent_raw", "", "CPU steal time over the interval, percent"),
    "oomKills": ("mco_node_oom_kills_raw", "", "OOM kills in the interval (/proc/vmstat oom_kill delta)"),
    "llcOccupancyBytes": ("mco_node_llc_occupancy_bytes", "", "LLC occupancy (resctrl CMT), bytes"),
    "memBandwidthBytesPerSecond": (
        "mco_node_memory_bandwidth_bytes_per_second",
        "",
        "Memory bandwidth (resctrl MBM total), bytes per second",
    ),
}
for _r in psi.RESOURCES:
    for _k in ("some", "full"):
        for _w in (*psi.WINDOWS, "rate"):
            what = f"PSI {_r} {_k} {_w}" + (" (stall share of the interval from total= deltas)" if _w == "rate" else "")
            SIGNAL_METRICS[psi.signal_name(_r, _k, _w)] = (f"mco_node_psi_{_r}_{_k}_{_w}_raw", "", f"{what}, percent")


def signal_metric_families(sample: NodeSample) -> list[Metric]:
    """Gauges for every present reading of ``sample`` (absent ones produce no series)."""
    families: dict[str, GaugeMetricFamily] = {}

    def family(name: str, help_text: str, labels: Sequence[str]) -> GaugeMetricFamily:
        if name not in families:
            families[name] = GaugeMetricFamily(name, help_text, labels=list(labels))
        return families[name]

    for reading in sample.readings:
        spec = SIGNAL_METRICS.get(reading.name)
        if spec is None or reading.value is None:
            continue
        node_metric, device_metric, help_text = spec
        if reading.device:
            if device_metric:
                family(device_metric, help_text + " (per device)", ["device"]).add_metric(
                    [reading.device], reading.value
                )
            if reading.name == "bioLatencyP99Ms" and reading.events is not None:
                family(
                    "mco_device_bio_requests_raw", "Block requests in the interval (per device)", ["device"]
                ).add_metric([reading.device], float(reading.events))
            continue
        family(node_metric, help_text, []).add_metric([], reading.value)
    return list(families.values())


class SampleCollector(Collector):
    """Scrape-time view of the latest sample, the backends and the streams."""

    def __init__(self, streams: Callable[[], Iterable[StreamStatus]] | None = None) -> None:
        self._lock = threading.Lock()
        self._sample: NodeSample | None = None
        self._streams = streams or (lambda: ())

    def update(self, sample: NodeSample) -> None:
        """Publish ``sample`` as the one scrapes see."""
        with self._lock:
            self._sample = sample

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            sample = self._sample
        if sample is not None:
            yield from signal_metric_families(sample)
            info = GaugeMetricFamily(
                "mco_collector_backend_info", "Backend in use per signal group (1)", labels=["signal", "backend"]
            )
            for group, backend in sorted(sample.backends.items()):
                info.add_metric([group, backend], 1.0)
            yield info
            absent = GaugeMetricFamily(
                "mco_collector_signal_absent",
                "Signals without a value in the latest sample, by absence kind (1)",
                labels=["signal", "kind"],
            )
            for reading in _node_wide(sample.readings):
                if reading.absence is not None:
                    absent.add_metric([reading.name, reading.absence.value], 1.0)
            yield absent
        statuses = list(self._streams())
        connected = GaugeMetricFamily(
            "mco_collector_stream_connected", "1 while the stream to this analyzer is open", labels=["analyzer"]
        )
        buffered = GaugeMetricFamily(
            "mco_collector_stream_buffered_samples", "Samples waiting in the send buffer", labels=["analyzer"]
        )
        sent = CounterMetricFamily(
            "mco_collector_samples_sent", "Samples the analyzer acknowledged", labels=["analyzer"]
        )
        dropped = CounterMetricFamily(
            "mco_collector_samples_dropped", "Samples dropped from a full send buffer", labels=["analyzer"]
        )
        reconnects = CounterMetricFamily(
            "mco_collector_stream_reconnects", "Streams re-opened after a failure", labels=["analyzer"]
        )
        for st in statuses:
            connected.add_metric([st.analyzer], 1.0 if st.connected else 0.0)
            buffered.add_metric([st.analyzer], float(st.buffered))
            sent.add_metric([st.analyzer], float(st.sent))
            dropped.add_metric([st.analyzer], float(st.dropped))
            reconnects.add_metric([st.analyzer], float(st.reconnects))
        yield from (connected, buffered, sent, dropped, reconnects)


def _node_wide(readings: Iterable[Reading]) -> Iterable[Reading]:
    return (r for r in readings if not r.device)


class CollectorMetrics:
    """Every collector metric, registered in the given registry."""

    def __init__(
        self, registry: CollectorRegistry, *, streams: Callable[[], Iterable[StreamStatus]] | None = None
    ) -> None:
        self.samples = SampleCollector(streams)
        registry.register(self.samples)
        self.sample_duration = Histogram(
            "mco_collector_sample_duration_seconds",
            "Time to take one sample (all sources)",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
            registry=registry,
        )
        self.samples_taken = Counter("mco_collector_samples", "Samples taken", registry=registry)
