"""Prometheus metrics of the scheduler extender (registry injected)."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sized
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from mco_py.analysis.policy import Fallback, ReportState
from mco_py.obs.runtime import RuntimeMetrics

#: Route label values (bounded).
ROUTES = (
    "volcano_predicate",
    "volcano_prioritize",
    "kube_filter",
    "kube_prioritize",
    "metrics",
    "healthz",
    "readyz",
    "other",
)

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _StateCollector(Collector):
    """Fallback state, report age and outdated-in-use, computed at scrape time (staleness shows without traffic)."""

    def __init__(self, state: Callable[[], ReportState]) -> None:
        self._state = state

    def collect(self) -> Iterator[GaugeMetricFamily]:
        state = self._state()
        basic = GaugeMetricFamily(
            "mco_extender_basic_mode", "1 when the extender runs in basic mode (fallback: every node passes)"
        )
        basic.add_metric([], 1.0 if state.basic_mode else 0.0)
        yield basic
        reason = GaugeMetricFamily(
            "mco_extender_fallback",
            "1 for the reason basic mode is on (all 0 while the report is used)",
            labels=["reason"],
        )
        for item in Fallback:
            if item is not Fallback.NONE:
                reason.add_metric([item.value], 1.0 if state.fallback is item else 0.0)
        yield reason
        age = GaugeMetricFamily("mco_extender_report_age_seconds", "Age of the report in use or last seen (NaN: none)")
        age.add_metric([], state.age_seconds if state.age_seconds is not None else math.nan)
        yield age
        outdated = GaugeMetricFamily(
            "mco_extender_report_outdated_in_use",
            "1 when an outdated report is used because fallbackWhenCROutdated is false",
        )
        outdated.add_metric([], 1.0 if state.outdated_in_use else 0.0)
        yield outdated


class _HotCollector(Collector):
    """Request counts, latency and decisions: plain counters on the request path, turned into samples at scrape time."""

    def __init__(self, metrics: ExtenderMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        m = self._metrics
        decisions = CounterMetricFamily(
            "mco_extender_decisions_total",
            "Filter/score decisions per node, by verb, result (pass, reject, score) and reason",
            labels=["verb", "result", "reason"],
        )
        for (verb, result, reason), count in sorted(m.decision_counts().items()):
            decisions.add_metric([verb, result, reason], count)
        yield decisions
        requests = CounterMetricFamily(
            "mco_extender_requests_total", "HTTP requests by route and status code", labels=["route", "code"]
        )
        for (route, code), count in sorted(m.request_counts().items()):
            requests.add_metric([route, str(code)], count)
        yield requests
        latency = HistogramMetricFamily(
            "mco_extender_request_duration_seconds",
            "Time from the full request to the reply being queued, by route",
            labels=["route"],
        )
        for route, (counts, total) in m.latency_counts().items():
            cumulative, running = [], 0
            for bound, count in zip(_BOUND_LABELS, counts, strict=True):
                running += count
                cumulative.append((bound, float(running)))
            latency.add_metric([route], cumulative, total)
        yield latency


_BOUNDS = (*_LATENCY_BUCKETS, math.inf)
_BOUND_LABELS = tuple("+Inf" if b == math.inf else repr(b) for b in _BOUNDS)  # as prometheus_client writes `le`


class _ConnectionCollector(Collector):
    """Open, refused and server-closed connections, read from the server's guard at scrape time."""

    def __init__(self, guard: ConnectionStats) -> None:
        self._guard = guard

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        g = self._guard
        open_ = GaugeMetricFamily("mco_extender_connections", "Open client connections")
        open_.add_metric([], float(len(g.open)))
        yield open_
        refused = CounterMetricFamily(
            "mco_extender_connections_refused",
            "Connections answered 503 and closed at once: maxConnections open and none idle",
        )
        refused.add_metric([], float(g.refused))
        yield refused
        closed = CounterMetricFamily(
            "mco_extender_connections_closed",
            "Connections the server closed, by reason (header-timeout, body-timeout, request-timeout, "
            "idle-timeout, evicted: the longest-idle one, to admit a new connection at maxConnections, "
            "unread-replies: pipelined requests whose replies the peer does not read, unauthorized: answered 401, "
            "auth-throttled: answered 429, more new credentials than the bcrypt budget, handshake-timeout: a TLS "
            "handshake unfinished at headerTimeoutSeconds, handshake-failed: a TLS handshake the peer broke off or "
            "failed)",
            labels=["reason"],
        )
        for reason in CLOSE_REASONS:
            closed.add_metric([reason], float(g.closed.get(reason, 0)))
        yield closed


#: Why the server closes a connection (label values of mco_extender_connections_closed_total).
CLOSE_REASONS = (
    "header-timeout",
    "body-timeout",
    "request-timeout",
    "idle-timeout",
    "evicted",
    "unread-replies",
    "unauthorized",
    "auth-throttled",
    "handshake-timeout",
    "handshake-failed",
)


class ConnectionStats(Protocol):
    """What the metrics read from the server's connection guard."""

    @property
    def open(self) -> Sized: ...

    refused: int
    closed: dict[str, int]


class ExtenderMetrics:
    """The extender's metrics.

    The per-request ones (requests, latency, decisions) are plain dict and list
    counters read by a collector at scrape time: a ``prometheus_client`` child's
    ``inc``/``observe`` takes a lock and costs microseconds, several times per
    request. They are updated only from the server's event-loop thread; a scrape
    (same thread, or another one) reads a consistent-enough copy.
    """

    def __init__(self, registry: CollectorRegistry, state: Callable[[], ReportState]) -> None:
        self.registry = registry
        self.decode_errors = Counter(
            "mco_extender_decode_errors_total",
            "Requests that could not be decoded (answered fail-open), by route and kind",
            ["route", "kind"],
            registry=registry,
        )
        self.internal_errors = Counter(
            "mco_extender_internal_errors_total",
            "Requests that met an internal error (answered fail-open; traceback logged at most once a second)",
            ["route"],
            registry=registry,
        )
        self.slow_decodes = Counter(
            "mco_extender_slow_decodes_total",
            "Requests decoded on the case-insensitive path (keys not spelled as Volcano/kube-scheduler do)",
            ["route"],
            registry=registry,
        )
        self._decisions: dict[tuple[str, str, str], float] = {}
        self._requests: dict[tuple[str, int], float] = {}
        self._latency: dict[str, tuple[list[int], list[float]]] = {
            route: ([0] * len(_BOUNDS), [0.0]) for route in ROUTES
        }
        self._connections: _ConnectionCollector | None = None
        registry.register(_HotCollector(self))
        registry.register(_StateCollector(state))
        self.runtime = RuntimeMetrics("extender", registry)

    def watch_connections(self, guard: ConnectionStats) -> None:
        """Export the connection counts of the server's guard (one server per registry)."""
        if self._connections is None:
            self._connections = _ConnectionCollector(guard)
            self.registry.register(self._connections)

    def decision_counts(self) -> dict[tuple[str, str, str], float]:
        """Decisions so far by (verb, result, reason); a copy."""
        return dict(self._decisions)

    def request_counts(self) -> dict[tuple[str, int], float]:
        """Requests so far by (route, status code); a copy."""
        return dict(self._requests)

    def latency_counts(self) -> dict[str, tuple[list[int], float]]:
        """Per route: requests per latency bucket (not cumulative; the last is ``+Inf``) and the seconds summed."""
        return {route: (list(counts), total[0]) for route, (counts, total) in self._latency.items()}

    def decision(self, verb: str, result: str, reason: str, count: int = 1) -> None:
        key = (verb, result, reason)
        self._decisions[key] = self._decisions.get(key, 0.0) + count

    def request(self, route: str, code: int, seconds: float) -> None:
        key = (route, code)
        self._requests[key] = self._requests.get(key, 0.0) + 1.0
        counts, total = self._latency[route]
        counts[bisect_left(_BOUNDS, seconds)] += 1  # the first bucket whose bound is >= seconds ("le")
        total[0] += seconds
