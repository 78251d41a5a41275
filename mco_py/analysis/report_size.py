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
from dataclasses import dataclass
from typing import Any

import msgspec

from mco_py.analysis.status import StatusCache
from mco_py.model import Level, NodeAssessment, Report

#: etcd's default request size limit.
ETCD_REQUEST_LIMIT = 1_572_864
#: Default budget for the serialized status (the rest is for metadata and envelope).
DEFAULT_STATUS_BUDGET = 1_400_000

_STRIP_ORDER = (Level.NONE, Level.LOW, Level.UNKNOWN, Level.MEDIUM, Level.HIGH)


_NON_ASCII = bytes(range(128, 256))


def encoded_size(doc: object) -> int:
    """Bytes of ``doc`` as the Kubernetes client sends it (compact JSON, non-ASCII as ``\\uXXXX``).

    Encodes with msgspec (fast) and accounts for the escapes: each non-ASCII UTF-8 byte
    costs at most 2 more bytes once escaped (3-byte char -> 6, 2-byte -> 6, 4-byte -> 12).
    """
    data = msgspec.json.encode(doc)
    return len(data) + 2 * (len(data) - len(data.translate(None, _NON_ASCII)))


@dataclass(frozen=True, slots=True)
class Fitted:
    """The report that fits, and what it took."""

    report: Report
    size: int
    """Encoded size of the status, bytes."""
    nodes_dropped: tuple[str, ...] = ()
    """Nodes left out entirely (only when bare entries do not fit)."""
    status: dict[str, Any] | None = None
    """``report_to_status(report)``, already built while measuring (stores reuse it); None if not built."""


def fit_report(report: Report, budget: int = DEFAULT_STATUS_BUDGET, *, cache: StatusCache | None = None) -> Fitted:
    """``report`` unchanged when its status fits ``budget`` bytes, else with detail stripped.

    With ``cache`` the entries of unchanged assessments, their sizes and their stripped
    forms are reused from earlier calls (same result as without).
    """
    cache = StatusCache() if cache is None else cache
    status = cache.build(report)
    records = cache.last
    for rec in records:
        if rec.size < 0:
            rec.size = encoded_size(rec.entry)
    # compact JSON: the entries joined by commas inside "nodes":[...]
    size = encoded_size({**status, "nodes": []}) + sum(rec.size for rec in records) + max(0, len(records) - 1)
    if size <= budget:
        return Fitted(report, size, status=status)
    nodes = list(report.nodes)
    entries: list[dict[str, Any]] = list(status["nodes"])
    order = sorted(
        range(len(nodes)),
        key=lambda i: (_STRIP_ORDER.index(nodes[i].level), nodes[i].score, nodes[i].name),
    )
    stripped = 0
    margin = 32  # the summary grows by a few digits at most
    for i in order:
        if size + margin <= budget:
            break
        rec = records[i]
        if rec.detail < 0:
            rec.detail, rec.bare = _strip(rec.item, rec.entry)
        if rec.bare is None:
            continue
        size -= rec.detail
        nodes[i], entries[i] = rec.bare
        stripped += 1
    dropped: list[str] = []
    if size + margin > budget:
        keep = [True] * len(nodes)
        for i in order:
            if size + margin <= budget:
                break
            keep[i] = False
            size -= encoded_size(entries[i]) + 1
            dropped.append(nodes[i].name)
        nodes = [n for n, k in zip(nodes, keep, strict=True) if k]
        entries = [e for e, k in zip(entries, keep, strict=True) if k]
    fitted = dataclasses.replace(report, nodes=tuple(nodes), detail_dropped=stripped)
    summary = {"nodes": len(nodes), "detailDropped": stripped} | {level.value.lower(): 0 for level in Level}
    for item in nodes:
        summary[item.level.value.lower()] += 1
    status = {**status, "summary": summary, "nodes": entries}
    return Fitted(fitted, size + len(str(stripped)), tuple(dropped), status=status)


def _strip(item: NodeAssessment, entry: dict[str, Any]) -> tuple[int, tuple[NodeAssessment, dict[str, Any]] | None]:
    """Bytes saved by dropping the entry's detail, and the assessment and entry without it (None: no detail)."""
    signals = entry.get("signals")
    reasons = entry.get("reasons")
    if not signals and not reasons:
        return 0, None
    # the entry shrinks by `"signals":{...},` and the content of `"reasons":[...]`
    saved = 0
    bare = dict(entry)
    if signals is not None:
        saved += len('"signals":,') + encoded_size(signals)
        del bare["signals"]
    if reasons:
        saved += encoded_size(reasons) - len("[]")
        bare["reasons"] = []
    return saved, (NodeAssessment(item.name, item.level, item.score, {}, item.last_sample_time, ()), bare)
