"""The report document the plain way: the references the fast builder is held equal to."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import msgspec

from mco_py.model import Level, NodeAssessment, Report, round_to
from mco_py.report.document import encoded_size


def format_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def assessment_to_dict(item: NodeAssessment) -> dict[str, Any]:
    """One ``status.nodes[]`` entry: scores to 2 decimals, signals as the assessment has them (the scorer
    rounds them to 4)."""
    out: dict[str, Any] = {"name": item.name, "level": item.level.value, "score": round_to(item.score, 100.0)}
    if item.dominant:
        out["dominant"] = item.dominant
    if item.dimensions:
        out["dimensions"] = {
            name: {"level": d.level.value, "score": round_to(d.score, 100.0)} for name, d in item.dimensions.items()
        }
    if item.signals:
        out["signals"] = dict(item.signals)
    if item.last_sample_time is not None:
        out["lastSampleTime"] = format_time(item.last_sample_time)
    out["reasons"] = list(item.reasons)
    return out


def report_to_status(report: Report) -> dict[str, Any]:
    summary = {"nodes": len(report.nodes), "detailDropped": report.detail_dropped}
    for level in Level:
        summary[level.value.lower()] = 0
    for item in report.nodes:
        summary[item.level.value.lower()] += 1
    return {
        "lastUpdateTime": format_time(report.last_update_time),
        "analyzer": {"identity": report.analyzer_identity, "rulesVersion": report.rules_version},
        "summary": summary,
        "nodes": [assessment_to_dict(n) for n in report.nodes],
    }


def stripped(item: NodeAssessment) -> NodeAssessment:
    """``item`` without its detail (dimensions, signals, reasons)."""
    return msgspec.structs.replace(item, dimensions={}, signals={}, reasons=())


@dataclasses.dataclass
class ReferenceFit:
    report: Report
    """The fitted report: stripped assessments, nodes left out removed, detail_dropped counted."""
    size: int
    dropped: list[str]
    status: dict[str, Any]


def fit(report: Report, budget: int) -> ReferenceFit:
    """The size fitting done the plain way: strip in sacrifice order from the full status until it fits."""
    status = report_to_status(report)
    size = encoded_size(status)
    if size <= budget:
        return ReferenceFit(report, size, [], status)
    order = sorted(
        range(len(report.nodes)),
        key=lambda i: (
            [Level.NONE, Level.LOW, Level.UNKNOWN, Level.MEDIUM, Level.HIGH].index(report.nodes[i].level),
            report.nodes[i].score,
            report.nodes[i].name,
        ),
    )
    nodes, entries = list(report.nodes), status["nodes"]
    count = 0
    for i in order:
        if size + 32 <= budget:
            break
        if not entries[i].get("dimensions") and not entries[i].get("signals") and not entries[i]["reasons"]:
            continue
        size -= encoded_size(entries[i])
        nodes[i] = stripped(nodes[i])
        entries[i] = assessment_to_dict(nodes[i])
        size += encoded_size(entries[i])
        count += 1
    dropped: list[str] = []
    for i in order:
        if size + 32 <= budget:
            break
        size -= encoded_size(entries[i]) + 1
        dropped.append(nodes[i].name)
    fitted = dataclasses.replace(report, nodes=tuple(n for n in nodes if n.name not in dropped), detail_dropped=count)
    return ReferenceFit(fitted, size + len(str(count)), dropped, report_to_status(fitted))
