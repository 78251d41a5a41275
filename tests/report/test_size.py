"""Size limit: detail of None nodes goes first, nodes only when nothing else helps."""

from __future__ import annotations

from mco_py.model import SIGNAL_NAMES, Level, NodeAssessment, Report
from mco_py.report.builder import ReportBuilder
from mco_py.report.document import encoded_size, report_of, status_of, to_builtins
from tests.contracts import crd_schema


def big_report(n: int, *, high_every: int = 10) -> Report:
    nodes = []
    for i in range(n):
        high = i % high_every == 0
        nodes.append(
            NodeAssessment(
                name=f"worker-{i:05d}.cluster.example.com",
                level=Level.HIGH if high else Level.NONE,
                score=90.0 if high else 3.0,
                signals={k: 12.345678 if not k.startswith("llc") else 0.12345 for k in SIGNAL_NAMES},
                last_sample_time=1_800_000_000.0,
                reasons=("psiIoSomeAvg10=61.2 ≥ critical 50 (sub-score 100, weight 1)",) * (3 if high else 1),
            )
        )
    return Report(last_update_time=1_800_000_000.0, analyzer_identity="a", rules_version="r", nodes=tuple(nodes))


def test_small_report_is_untouched() -> None:
    report = big_report(10)
    fitted = ReportBuilder(1_000_000).build(report)
    assert fitted.status == status_of(report)
    assert (fitted.detail_dropped, fitted.nodes_dropped) == (0, ())


def test_none_detail_dropped_first_and_counted() -> None:
    report = big_report(2000)
    budget = encoded_size(status_of(report)) // 2
    fitted = ReportBuilder(budget).build(report)
    assert fitted.size <= budget
    assert fitted.nodes_dropped == ()
    assert len(fitted.status.nodes) == 2000
    assert fitted.detail_dropped > 0
    assert fitted.status.summary.detail_dropped == fitted.detail_dropped
    for item in report_of(fitted.status).nodes:
        if item.level is Level.HIGH:
            assert item.signals, "High nodes keep their detail while None detail can go"
    doc = {
        "apiVersion": "mco.many-core.io/v1alpha1",
        "kind": "NodeInterferenceReport",
        "status": to_builtins(fitted.status),
    }
    assert crd_schema.errors(doc) == []


def test_nodes_dropped_only_when_bare_entries_do_not_fit() -> None:
    report = big_report(500)
    fitted = ReportBuilder(20_000).build(report)
    assert fitted.size <= 20_000
    assert fitted.nodes_dropped
    assert fitted.detail_dropped > 0
    kept = {n.name for n in fitted.status.nodes}
    assert kept.isdisjoint(fitted.nodes_dropped)
    assert fitted.status.summary.nodes == len(kept) == 500 - len(fitted.nodes_dropped)
    dropped_levels = {n.level for n in report.nodes if n.name not in kept}
    assert dropped_levels == {Level.NONE}, "High nodes are kept as long as None nodes can go"


def test_the_running_size_is_the_encoded_size() -> None:
    for n, budget in ((10, 1_000_000), (2000, 300_000), (500, 20_000)):
        fitted = ReportBuilder(budget).build(big_report(n))
        assert encoded_size(fitted.status) <= budget
        assert abs(fitted.size - encoded_size(fitted.status)) <= 2, "the running size estimate is exact"
