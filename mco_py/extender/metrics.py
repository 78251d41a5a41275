"""Prometheus metrics of the scheduler extender (registry injected)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from mco_py.analysis.policy import Fallback, ReportState

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


class ExtenderMetrics:
    """Counters and histograms; children are cached so the hot path does one dict lookup."""

    def __init__(self, registry: CollectorRegistry, state: Callable[[], ReportState]) -> None:
        self.registry = registry
        self.decisions = Counter(
            "mco_extender_decisions_total",
            "Filter/score decisions per node, by verb, result (pass, reject, score) and reason",
            ["verb", "result", "reason"],
            registry=registry,
        )
        self.decode_errors = Counter(
            "mco_extender_decode_errors_total",
            "Requests that could not be decoded (answered fail-open), by route and kind",
            ["route", "kind"],
            registry=registry,
        )
        self.slow_decodes = Counter(
            "mco_extender_slow_decodes_total",
            "Requests decoded on the case-insensitive path (keys not spelled as Volcano/kube-scheduler do)",
            ["route"],
            registry=registry,
        )
        self.requests = Counter(
            "mco_extender_requests_total",
            "HTTP requests by route and status code",
            ["route", "code"],
            registry=registry,
        )
        self.latency = Histogram(
            "mco_extender_request_duration_seconds",
            "Time from the full request to the reply being queued, by route",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        registry.register(_StateCollector(state))
        self._decision_children: dict[tuple[str, str, str], Counter] = {}
        self._latency_children = {route: self.latency.labels(route) for route in ROUTES}
        self._request_children: dict[tuple[str, int], Counter] = {}

    def decision(self, verb: str, result: str, reason: str, count: int = 1) -> None:
        key = (verb, result, reason)
        child = self._decision_children.get(key)
        if child is None:
            child = self._decision_children[key] = self.decisions.labels(verb, result, reason)
        child.inc(count)

    def request(self, route: str, code: int, seconds: float) -> None:
        key = (route, code)
        child = self._request_children.get(key)
        if child is None:
            child = self._request_children[key] = self.requests.labels(route, str(code))
        child.inc()
        self._latency_children[route].observe(seconds)
