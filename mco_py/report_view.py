"""Render a report for people (`mco report`): a table, or JSON/YAML. Pure functions."""

from __future__ import annotations

import json

import yaml

from mco_py.model import NodeAssessment, Report, format_time
from mco_py.report.document import status_of, to_builtins

COLUMNS = ("NODE", "LEVEL", "SCORE", "PSI CPU", "PSI MEM", "PSI IO", "LLC MISS", "BIO P99 MS", "AGE")
#: ``-o wide`` adds the worst dimension and every dimension above 0 (``cpu=High/87.5``).
WIDE_COLUMNS = (*COLUMNS, "DOMINANT", "DIMENSIONS")


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


def _row(node: NodeAssessment, now: float) -> tuple[str, ...]:
    s = node.signals
    age = None if node.last_sample_time is None else now - node.last_sample_time
    return (
        node.name,
        node.level.value,
        _num(node.score),
        _num(s.get("psiCpuSomeAvg10"), 2),
        _num(s.get("psiMemorySomeAvg10"), 2),
        _num(s.get("psiIoSomeAvg10"), 2),
        _num(s.get("llcMissRate"), 3),
        _num(s.get("bioLatencyP99Ms"), 2),
        _age(age),
    )


def _wide_row(node: NodeAssessment, now: float) -> tuple[str, ...]:
    dims = ",".join(f"{name}={d.level.value}/{d.score:.1f}" for name, d in node.dimensions.items())
    return (*_row(node, now), node.dominant or "-", dims or "-")


#: ``mco report -o`` choices.
FORMATS = ("table", "wide", "name", "json", "yaml")


def render_table(report: Report, *, now: float, source: str = "", wide: bool = False, headers: bool = True) -> str:
    """A fixed-width table, one row per node, after a line about the report itself.

    Without ``headers`` only the rows are printed (no report line, column names or
    reasons), for ``awk`` and ``cut``.
    """
    header, row = (WIDE_COLUMNS, _wide_row) if wide else (COLUMNS, _row)
    rows = [header, *(row(n, now) for n in report.nodes)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    cells = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if not headers:
        return "".join(line + "\n" for line in cells[1:])
    lines = [
        f"report {source or '-'}: updated {format_time(report.last_update_time)} "
        f"({_age(now - report.last_update_time)} ago) by {report.analyzer_identity or '?'}, "
        f"rules {report.rules_version or '?'}",
        *cells,
    ]
    if not report.nodes:
        lines.append("(no nodes yet: is a collector streaming to the analyzer?)")
    for node in report.nodes:
        for reason in node.reasons:
            lines.append(f"  {node.name}: {reason}")
    return "\n".join(lines) + "\n"


def render(report: Report, *, fmt: str, now: float, source: str = "", headers: bool = True) -> str:
    """One of :data:`FORMATS`: a table (``wide`` with dimensions), ``node/NAME`` lines, or the status document."""
    if fmt in ("table", "wide"):
        return render_table(report, now=now, source=source, wide=fmt == "wide", headers=headers)
    if fmt == "name":  # as `kubectl get -o name`: pipe it to `kubectl describe`
        return "".join(f"node/{node.name}\n" for node in report.nodes)
    doc = to_builtins(status_of(report))
    if fmt == "json":
        return json.dumps(doc, indent=2) + "\n"
    if fmt == "yaml":
        return str(yaml.safe_dump(doc, sort_keys=False))
    raise ValueError(f"unknown output format {fmt!r}; use one of {', '.join(FORMATS)}")
