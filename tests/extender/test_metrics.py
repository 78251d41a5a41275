"""Per-request counters kept as plain numbers come out of the registry as Prometheus counters and a histogram."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mco_py.analysis.policy import Fallback, ReportState
from mco_py.extender.metrics import ExtenderMetrics


def make() -> tuple[ExtenderMetrics, CollectorRegistry]:
    registry = CollectorRegistry()
    return ExtenderMetrics(registry, lambda: ReportState(None, Fallback.MISSING, "no report", None)), registry


def test_request_latency_histogram_counts_le_buckets_sum_and_count():
    metrics, registry = make()
    for seconds in (0.0001, 0.0005, 0.0007, 0.003, 0.003, 7.0):
        metrics.request("volcano_predicate", 200, seconds)
    metrics.request("volcano_predicate", 404, 0.0002)

    def bucket(le: str) -> float | None:
        return registry.get_sample_value(
            "mco_extender_request_duration_seconds_bucket", {"route": "volcano_predicate", "le": le}
        )

    assert bucket("0.0005") == 3  # "le": 0.0005 itself counts in its bucket
    assert bucket("0.001") == 4
    assert bucket("0.0025") == 4
    assert bucket("0.005") == 6
    assert bucket("5.0") == 6
    assert bucket("+Inf") == 7
    labels = {"route": "volcano_predicate"}
    assert registry.get_sample_value("mco_extender_request_duration_seconds_count", labels) == 7
    assert registry.get_sample_value("mco_extender_request_duration_seconds_sum", labels) == pytest.approx(7.0075)
    assert registry.get_sample_value("mco_extender_requests_total", {**labels, "code": "200"}) == 6
    assert registry.get_sample_value("mco_extender_requests_total", {**labels, "code": "404"}) == 1
    # every route has its (empty) histogram from the start
    assert registry.get_sample_value("mco_extender_request_duration_seconds_count", {"route": "healthz"}) == 0


def test_decisions_add_counts_and_the_exposition_parses():
    metrics, registry = make()
    metrics.decision("volcano_predicate", "pass", "ok")
    metrics.decision("volcano_predicate", "pass", "ok")
    metrics.decision("volcano_prioritize", "score", "report", 100)
    get = registry.get_sample_value
    assert get("mco_extender_decisions_total", {"verb": "volcano_predicate", "result": "pass", "reason": "ok"}) == 2
    assert get("mco_extender_decisions_total", {"verb": "volcano_prioritize", "result": "score", "reason": "report"})
    families = {f.name: f.type for f in text_string_to_metric_families(generate_latest(registry).decode())}
    assert families["mco_extender_decisions"] == "counter"
    assert families["mco_extender_requests"] == "counter"
    assert families["mco_extender_request_duration_seconds"] == "histogram"
    assert families["mco_extender_basic_mode"] == "gauge"
