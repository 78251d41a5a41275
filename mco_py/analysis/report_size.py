"""Keep the report under the Kubernetes API / etcd request size limit. Pure.

etcd refuses requests above 1.5 MiB (``--max-request-bytes`` default 1,572,864). The
whole object travels in one request, so the ``status`` must stay well below that; the
default budget leaves room for metadata and the JSON envelope.

Order of sacrifice, least useful first: the detail (``signals`` and ``reasons``) of None
nodes (lowest score first), then of Low, Unknown, Medium and High nodes; only when even
bare entries do not fit are whole nodes left out (None nodes first, lowest score first).
Stripped nodes are counted in ``Report.detail_dropped``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from mco_py.model import Level, NodeAssessment, Report, assessment_to_dict, report_to_status

#: etcd's default request size limit.
ETCD_REQUEST_LIMIT = 1_572_864
#: Default budget for the serialized status (the rest is for metadata and envelope).
DEFAULT_STATUS_BUDGET = 1_400_000

_STRIP_ORDER = (Level.NONE, Level.LOW, Level.UNKNOWN, Level.MEDIUM, Level.HIGH)


def encoded_size(doc: object) -> int:
    """Bytes of ``doc`` as the Kubernetes client sends it (compact JSON, ASCII escapes)."""
    return len(json.dumps(doc, separators=(",", ":")))


@dataclass(frozen=True, slots=True)
class Fitted:
    """The report that fits, and what it took."""

    report: Report
    size: int
    """Encoded size of the status, bytes."""
    nodes_dropped: tuple[str, ...] = ()
    """Nodes left out entirely (only when bare entries do not fit)."""


def _bare(item: NodeAssessment) -> NodeAssessment:
    return dataclasses.replace(item, signals={}, reasons=())


def fit_report(report: Report, budget: int = DEFAULT_STATUS_BUDGET) -> Fitted:
    """``report`` unchanged when its status fits ``budget`` bytes, else with detail stripped."""
    size = encoded_size(report_to_status(report))
    if size <= budget:
        return Fitted(report, size)
    nodes = list(report.nodes)
    full = [encoded_size(assessment_to_dict(n)) for n in nodes]
    bare_nodes = [_bare(n) for n in nodes]
    bare = [encoded_size(assessment_to_dict(n)) for n in bare_nodes]
    order = sorted(
        range(len(nodes)),
        key=lambda i: (_STRIP_ORDER.index(nodes[i].level), nodes[i].score, nodes[i].name),
    )
    stripped = 0
    # the summary grows by a few digits at most; keep a small margin for it
    margin = 32
    for i in order:
        if size + margin <= budget:
            break
        saving = full[i] - bare[i]
        if saving <= 0:
            continue
        nodes[i] = bare_nodes[i]
        size -= saving
        stripped += 1
    dropped: list[str] = []
    if size + margin > budget:
        keep = [True] * len(nodes)
        for i in order:
            if size + margin <= budget:
                break
            keep[i] = False
            size -= bare[i] + 1
            dropped.append(nodes[i].name)
        nodes = [n for n, k in zip(nodes, keep, strict=True) if k]
    fitted = dataclasses.replace(report, nodes=tuple(nodes), detail_dropped=stripped)
    return Fitted(fitted, encoded_size(report_to_status(fitted)), tuple(dropped))
