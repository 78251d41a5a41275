"""A faster builder of the report ``status`` document. Pure.

:func:`fast_status` returns exactly what :func:`mco_py.model.report_to_status` returns
(a property test holds them equal); it exists because the analyzer builds the status
of every node every few seconds: it formats times with a per-second cache and avoids
the per-node function calls.

:class:`StatusCache` goes further: it keeps each node's entry and rebuilds it only when
the node's assessment is a different object (the scorer hands back the same
:class:`~mco_py.model.NodeAssessment` while nothing about the node changed).
"""

from __future__ import annotations

import functools
import math
from datetime import UTC, datetime
from typing import Any

from mco_py.model import Level, NodeAssessment, Report, format_time

_LEVEL_TEXT = {level: level.value for level in Level}
_LEVEL_KEY = {level: level.value.lower() for level in Level}
_MAX_CACHED_SECOND = 253402300799  # 9999-12-31T23:59:59Z


@functools.lru_cache(maxsize=8192)
def _second(whole: int) -> str:
    return datetime.fromtimestamp(whole, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


def fast_format_time(ts: float) -> str:
    """Same as :func:`mco_py.model.format_time` (datetime rounds to microseconds half-even, then truncates to ms)."""
    if not 0 <= ts < _MAX_CACHED_SECOND:
        return format_time(ts)
    frac, whole = math.modf(ts)
    micros = round(frac * 1e6)
    if micros >= 1_000_000:
        whole += 1
        micros -= 1_000_000
    return f"{_second(int(whole))}.{micros // 1000:03d}Z"


def _entry(item: NodeAssessment) -> dict[str, Any]:
    """One ``status.nodes[]`` entry (same as :func:`mco_py.model.assessment_to_dict`)."""
    isfinite = math.isfinite
    out: dict[str, Any] = {"name": item.name, "level": _LEVEL_TEXT[item.level], "score": round(item.score, 2)}
    if item.signals:
        out["signals"] = {k: round(v, 4) for k, v in item.signals.items() if isfinite(v)}
    if item.last_sample_time is not None:
        out["lastSampleTime"] = fast_format_time(item.last_sample_time)
    out["reasons"] = list(item.reasons)
    return out


class Cached:
    """One node's entry as built from ``item``, plus what the size fitting learnt about it."""

    __slots__ = ("bare", "detail", "entry", "item", "size")

    def __init__(self, item: NodeAssessment, entry: dict[str, Any]) -> None:
        self.item = item
        self.entry = entry
        """Shared between reports: never mutate it (copy first)."""
        self.size = -1
        """Encoded bytes of ``entry``; -1 until measured."""
        self.detail = -1
        """Bytes saved by stripping the detail; -1 until measured."""
        self.bare: tuple[NodeAssessment, dict[str, Any]] | None = None
        """The assessment and entry without detail, once built."""


class StatusCache:
    """Builds ``report_to_status(report)`` reusing the entries of unchanged assessments.

    An entry is reused when the report holds the very same assessment object as last
    time (assessments are immutable; their ``signals`` mappings must not be mutated
    either). Entries of nodes gone from the report are dropped. Not thread-safe.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, Cached] = {}
        self.last: list[Cached] = []
        """Records of the last :meth:`build`, in the order of its ``report.nodes``."""
        self.rebuilt = 0
        """Entries built (not reused) by the last :meth:`build`."""

    def build(self, report: Report) -> dict[str, Any]:
        """``report_to_status(report)``; the entries may be shared with earlier results."""
        summary = {"nodes": len(report.nodes), "detailDropped": report.detail_dropped}
        for key in _LEVEL_KEY.values():
            summary[key] = 0
        level_key = _LEVEL_KEY
        old = self._by_name
        by_name: dict[str, Cached] = {}
        records: list[Cached] = []
        rebuilt = 0
        for item in report.nodes:
            summary[level_key[item.level]] += 1
            rec = old.get(item.name)
            if rec is None or rec.item is not item:
                rec = Cached(item, _entry(item))
                rebuilt += 1
            by_name[item.name] = rec
            records.append(rec)
        self._by_name = by_name
        self.last = records
        self.rebuilt = rebuilt
        return {
            "lastUpdateTime": fast_format_time(report.last_update_time),
            "analyzer": {"identity": report.analyzer_identity, "rulesVersion": report.rules_version},
            "summary": summary,
            "nodes": [rec.entry for rec in records],
        }


def fast_status(report: Report) -> dict[str, Any]:
    """``report_to_status(report)``, built faster."""
    summary = {"nodes": len(report.nodes), "detailDropped": report.detail_dropped}
    for key in _LEVEL_KEY.values():
        summary[key] = 0
    level_key = _LEVEL_KEY
    level_text = _LEVEL_TEXT
    isfinite = math.isfinite
    entries: list[dict[str, Any]] = []
    append = entries.append
    for item in report.nodes:
        level = item.level
        summary[level_key[level]] += 1
        out: dict[str, Any] = {"name": item.name, "level": level_text[level], "score": round(item.score, 2)}
        if item.signals:
            out["signals"] = {k: round(v, 4) for k, v in item.signals.items() if isfinite(v)}
        if item.last_sample_time is not None:
            out["lastSampleTime"] = fast_format_time(item.last_sample_time)
        out["reasons"] = list(item.reasons)
        append(out)
    return {
        "lastUpdateTime": fast_format_time(report.last_update_time),
        "analyzer": {"identity": report.analyzer_identity, "rulesVersion": report.rules_version},
        "summary": summary,
        "nodes": entries,
    }
