"""Prometheus exposition of the latest sample and the collector's self-metrics.

Signal series are produced at scrape time from the latest sample by a custom
collector, so an absent signal simply has no series (never 0); its absence is
shown by ``mco_collector_signal_absent{signal,kind}``.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from mco_py.collector import histogram, psi
from mco_py.collector.cgroups import CLASSES, PRESSURE_RESOURCES, class_signal
from mco_py.collector.procfs import PSI_KINDS
from mco_py.collector.signals import NodeSample, StreamStatus, Total
from mco_py.obs.runtime import RuntimeMetrics

_go_float = cast(Callable[[float], str], floatToGoString)

#: signal key -> (node metric, device metric or "", help, factor from the signal's unit to the metric's):
#: the report keeps milliseconds (``bioLatencyP99Ms``, the CRD's field), /metrics the base unit, seconds
SIGNAL_METRICS: dict[str, tuple[str, str, str, float]] = {
    "llcMissRate": ("mco_node_cache_miss_rate", "", "LLC misses / references over the interval (perf counters)", 1.0),
    "bioLatencyP99Ms": (
        "mco_node_bio_latency_p99_seconds",
        "mco_device_bio_latency_p99_seconds",
        "P99 block request latency over the interval, seconds",
        1e-3,
    ),
    "bioLatencyAvgMs": (
        "mco_node_bio_latency_avg_seconds",
        "mco_device_bio_latency_avg_seconds",
        "AVERAGE block request latency over the interval from /proc/diskstats (not a percentile), seconds",
        1e-3,
    ),
    "bioRequests": ("mco_node_bio_requests_raw", "", "Block requests completed in the interval", 1.0),
    "cpuStealPercent": ("mco_node_cpu_steal_percent_raw", "", "CPU steal time over the interval, percent", 1.0),
    "oomKills": ("mco_node_oom_kills_raw", "", "OOM kills in the interval (/proc/vmstat oom_kill delta)", 1.0),
    "llcOccupancyBytes": ("mco_node_llc_occupancy_bytes", "", "LLC occupancy (resctrl CMT), bytes", 1.0),
    "memBandwidthBytesPerSecond": (
        "mco_node_memory_bandwidth_bytes_per_second",
        "",
        "Memory bandwidth (resctrl MBM total), bytes per second",
        1.0,
    ),
}
for _c in CLASSES:
    for _r in PRESSURE_RESOURCES:
        SIGNAL_METRICS[class_signal(_c, _r)] = (
            f"mco_workload_psi_{_c}_{_r}_some_rate",
            "",
            f"PSI {_r} some of the worst {_c} cgroup: stall share of the interval, percent",
            1.0,
        )
for _r in psi.RESOURCES:
    for _k in ("some", "full"):
        for _w in (*psi.WINDOWS, "rate"):
            what = f"PSI {_r} {_k} {_w}" + (" (stall share of the interval from total= deltas)" if _w == "rate" else "")
            SIGNAL_METRICS[psi.signal_name(_r, _k, _w)] = (
                f"mco_node_psi_{_r}_{_k}_{_w}_raw",
                "",
                f"{what}, percent",
                1.0,
            )

#: running-count key -> (counter name without ``_total``, help); base units, node_exporter style
TOTAL_METRICS: dict[str, tuple[str, str]] = {
    "oomKills": ("mco_node_oom_kills", "OOM kills since boot (/proc/vmstat oom_kill)"),
    "bioRequests": ("mco_node_bio_requests", "Block requests completed since the collector started"),
}
for _r in psi.RESOURCES:
    for _k in PSI_KINDS:
        TOTAL_METRICS[psi.signal_name(_r, _k, "seconds")] = (
            f"mco_node_pressure_{_r}_{_k}_seconds",
            f"Time with {_k} tasks stalled on {_r} since boot (PSI total=), seconds",
        )
BIO_LATENCY = "mco_node_bio_latency_seconds"
BIO_LATENCY_HELP = (
    "Block request latency since the collector started (histogram backends only); "
    "the sum is estimated from the kernel's slots (about 19 % resolution), seconds"
)
#: histogram bounds, microseconds: powers of two are slot boundaries, so every count is exact (16 us .. 33.6 s)
BIO_LATENCY_BOUNDS_US: tuple[int, ...] = tuple(1 << k for k in range(4, 26))


@dataclass(slots=True)
class Family:
    """One metric family as plain data (:meth:`metric` is its prometheus_client form)."""

    name: str
    help: str
    kind: str
    """``gauge`` or ``counter`` (``name`` without ``_total``)."""
    labels: tuple[str, ...] = ()
    rows: list[tuple[tuple[str, ...], float]] = field(default_factory=list)

    def metric(self) -> Metric:
        """The prometheus_client form."""
        cls = CounterMetricFamily if self.kind == "counter" else GaugeMetricFamily
        family = cls(self.name, self.help, labels=list(self.labels))
        for values, value in self.rows:
            family.add_metric(list(values), value)
        return family


def signal_families(sample: NodeSample) -> list[Family]:
    """Gauges for every present reading of ``sample`` (absent ones produce no series)."""
    families: dict[str, Family] = {}

    def family(name: str, help_text: str, labels: tuple[str, ...]) -> Family:
        if name not in families:
            families[name] = Family(name, help_text, "gauge", labels)
        return families[name]

    for reading in sample.readings:
        spec = SIGNAL_METRICS.get(reading.name)
        if spec is None or reading.value is None:
            continue
        node_metric, device_metric, help_text, factor = spec
        value = reading.value * factor
        if reading.device:
            if device_metric:
                family(device_metric, help_text + " (per device)", ("device",)).rows.append(((reading.device,), value))
            if reading.name == "bioLatencyP99Ms" and reading.events is not None:
                family(
                    "mco_device_bio_requests_raw", "Block requests in the interval (per device)", ("device",)
                ).rows.append(((reading.device,), float(reading.events)))
            continue
        family(node_metric, help_text, ()).rows.append(((), value))
    return list(families.values())


def total_families(totals: Iterable[Total]) -> list[Family]:
    """Counters for every running count with a metric name (the latency histogram is :func:`bio_latency`)."""
    out: list[Family] = []
    for total in totals:
        spec = TOTAL_METRICS.get(total.name)
        if spec is not None:
            out.append(Family(spec[0], spec[1], "counter", (), [((), total.value)]))
    return out


@dataclass(frozen=True, slots=True)
class HistogramData:
    """One histogram's state: cumulative counts per ``le`` (the last is ``+Inf``) and the sum."""

    name: str
    help: str
    les: Sequence[str]
    cumulative: Sequence[float]
    total: float

    def metric(self) -> Metric:
        """The prometheus_client form."""
        buckets = list(zip(self.les, self.cumulative, strict=True))
        return HistogramMetricFamily(self.name, self.help, buckets=buckets, sum_value=self.total)


_BIO_LES = [_go_float(b / 1e6) for b in BIO_LATENCY_BOUNDS_US] + ["+Inf"]


def bio_latency(slots: Mapping[int, int]) -> HistogramData:
    """The block latency histogram in seconds from slot -> count (``histogram.py`` layout)."""
    per_bound = [0] * (len(BIO_LATENCY_BOUNDS_US) + 1)
    total_s = 0.0
    for slot, count in slots.items():
        low, high = histogram.slot_bounds(slot)
        # slots cover [low, high) whole microseconds and every bound is a slot boundary
        per_bound[bisect.bisect_left(BIO_LATENCY_BOUNDS_US, high)] += count
        total_s += count * (low + high) / 2e6
    cumulative = [float(n) for n in itertools.accumulate(per_bound)]
    return HistogramData(BIO_LATENCY, BIO_LATENCY_HELP, _BIO_LES, cumulative, total_s)


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
        return [*(f.metric() for f in self.families()), *(h.metric() for h in self.histograms())]

    def histograms(self) -> list[HistogramData]:
        """The block latency histogram, when a histogram backend measures it."""
        with self._lock:
            sample = self._sample
        if sample is None:
            return []
        return [bio_latency(t.slots) for t in sample.totals if t.slots is not None]

    def families(self) -> list[Family]:
        """Every family of the latest sample and the streams, in exposition order."""
        with self._lock:
            sample = self._sample
        out: list[Family] = []
        if sample is not None:
            out += signal_families(sample)
            out += total_families(sample.totals)
            out.append(
                Family(
                    "mco_collector_backend_info",
                    "Backend in use per signal group (1)",
                    "gauge",
                    ("signal", "backend"),
                    [((group, backend), 1.0) for group, backend in sorted(sample.backends.items())],
                )
            )
            out.append(
                Family(
                    "mco_collector_signal_absent",
                    "Signals without a value in the latest sample, by absence kind (1)",
                    "gauge",
                    ("signal", "kind"),
                    [
                        ((r.name, r.absence.value), 1.0)
                        for r in sample.readings
                        if not r.device and r.absence is not None
                    ],
                )
            )
        statuses = list(self._streams())
        out += [
            Family(
                "mco_collector_stream_connected",
                "1 while the stream to this analyzer is open",
                "gauge",
                ("analyzer",),
                [((st.analyzer,), 1.0 if st.connected else 0.0) for st in statuses],
            ),
            Family(
                "mco_collector_stream_buffered_samples",
                "Samples waiting in the send buffer",
                "gauge",
                ("analyzer",),
                [((st.analyzer,), float(st.buffered)) for st in statuses],
            ),
            Family(
                "mco_collector_samples_sent",
                "Samples the analyzer acknowledged",
                "counter",
                ("analyzer",),
                [((st.analyzer,), float(st.sent)) for st in statuses],
            ),
            Family(
                "mco_collector_samples_dropped",
                "Samples dropped from a full send buffer",
                "counter",
                ("analyzer",),
                [((st.analyzer,), float(st.dropped)) for st in statuses],
            ),
            Family(
                "mco_collector_stream_reconnects",
                "Streams re-opened after a failure",
                "counter",
                ("analyzer",),
                [((st.analyzer,), float(st.reconnects)) for st in statuses],
            ),
        ]
        return out


class DurationHistogram:
    """A fixed-bucket histogram (seconds); the same series as prometheus_client's."""

    def __init__(self, name: str, help_text: str, buckets: Sequence[float]) -> None:
        self.name, self.help = name, help_text
        self._bounds = tuple(sorted(buckets))
        les = [_go_float(b) for b in self._bounds] + ["+Inf"]
        self._les = les
        self._counts = [0] * len(les)
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        """Count one observation (a bucket's bound is inclusive, as in Prometheus)."""
        with self._lock:
            self._counts[bisect.bisect_left(self._bounds, seconds)] += 1
            self._sum += seconds

    def snapshot(self) -> HistogramData:
        """The counts so far."""
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative = [float(c) for c in itertools.accumulate(counts)]
        return HistogramData(self.name, self.help, self._les, cumulative, total)


class CollectorMetrics(Collector):
    """Every collector metric, registered in the given registry."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        streams: Callable[[], Iterable[StreamStatus]] | None = None,
        process_proc_root: str = "/proc",
        extra: Callable[[], list[Family]] | None = None,
    ) -> None:
        self.samples = SampleCollector(streams)
        self._extra = extra or (lambda: [])
        """More families (the node guard's), exposed after the collector's own."""
        self.sample_duration = DurationHistogram(
            "mco_collector_sample_duration_seconds",
            "Time to take one sample (all sources)",
            (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
        )
        self.samples_taken = _Count()
        registry.register(self)
        self.runtime = RuntimeMetrics("collector", registry, proc_root=process_proc_root)  # exposed after these

    def _taken(self) -> Family:
        return Family("mco_collector_samples", "Samples taken", "counter", (), [((), float(self.samples_taken.value))])

    def collect(self) -> Iterable[Metric]:
        return [
            *self.samples.collect(),
            self.sample_duration.snapshot().metric(),
            self._taken().metric(),
            *(f.metric() for f in self._extra()),
        ]


class _Count:
    """A counter that only this process increments (the sample loop)."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def inc(self) -> None:
        """Add one."""
        with self._lock:
            self.value += 1
