"""A faster builder of the report ``status`` document. Pure.

:class:`StatusCache` builds exactly what :func:`mco_py.model.report_to_status` returns
(a property test holds them equal) for the analyzer, which builds the status of every
node every few seconds: it formats times with a per-second cache, and keeps each node's
entry, rebuilding it only when the node's assessment is a different object (the scorer
hands back the same :class:`~mco_py.model.NodeAssessment` while nothing about the node
changed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from mco_py.model import (
    NO_DIMENSIONS,
    ROUND_LIMIT,
    ROUNDER,
    DimensionScore,
    Level,
    NodeAssessment,
    Report,
    dimensions_to_dict,
    format_time,
    round_to,
)

_LEVEL_KEY = {level.value: level.value.lower() for level in Level}
"""Summary key by level text. (Hot loops read ``level._value_``: hashing an enum member runs Python code.)"""
_MAX_CACHED_SECOND = 253402300799  # 9999-12-31T23:59:59Z


_SECONDS: dict[int, str] = {}
"""Formatted whole seconds; cleared when it grows past a few hours' worth."""


def _second(whole: int) -> str:
    text = _SECONDS.get(whole)
    if text is None:
        if len(_SECONDS) >= 16384:
            _SECONDS.clear()
        text = _SECONDS[whole] = datetime.fromtimestamp(whole, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return text


_new = object.__new__
_FIELDS = ("name", "level", "score", "signals", "last_sample_time", "reasons", "dominant", "dimensions")
_set_name, _set_level, _set_score, _set_signals, _set_time, _set_reasons, _set_dominant, _set_dimensions = (
    NodeAssessment.__dict__[f].__set__ for f in _FIELDS
)


def new_assessment(
    name: str,
    level: Level,
    score: float,
    *,
    signals: Mapping[str, float] | None = None,
    last_sample_time: float | None = None,
    reasons: tuple[str, ...] = (),
    dominant: str = "",
    dimensions: Mapping[str, DimensionScore] = NO_DIMENSIONS,
) -> NodeAssessment:
    """``NodeAssessment(...)`` without the frozen-dataclass ``__init__`` (half the cost: the report
    makes one per fresh node)."""
    item: NodeAssessment = _new(NodeAssessment)
    _set_name(item, name)
    _set_level(item, level)
    _set_score(item, score)
    _set_signals(item, {} if signals is None else signals)
    _set_time(item, last_sample_time)
    _set_reasons(item, reasons)
    _set_dominant(item, dominant)
    _set_dimensions(item, dimensions)
    return item


_MILLIS = tuple(f".{ms:03d}Z" for ms in range(1000))


def fast_format_time(ts: float) -> str:
    """Same as :func:`mco_py.model.format_time` (datetime rounds to microseconds half-even, then truncates to ms)."""
    if not 0 <= ts < _MAX_CACHED_SECOND:
        return format_time(ts)
    whole = int(ts)
    micros = int((ts - whole) * 1e6 + ROUNDER - ROUNDER)  # round() half to even; ts - whole is exact for 0 <= ts
    if micros >= 1_000_000:
        whole += 1
        micros -= 1_000_000
    return (_SECONDS.get(whole) or _second(whole)) + _MILLIS[micros // 1000]


_SCALED_LIMIT = ROUND_LIMIT / 1e4


def rounded_signals(signals: Mapping[str, float]) -> dict[str, float]:
    """``{name: round_to(value, 1e4)}`` without the non-finite values; inlined for the common all-finite case."""
    # every |value| * 1e4 below ROUND_LIMIT (a sum of magnitudes bounds each; NaN and inf fail it)
    if sum(map(abs, signals.values())) < _SCALED_LIMIT:
        return {k: (v * 1e4 + ROUNDER - ROUNDER) / 1e4 for k, v in signals.items()}
    isfinite = math.isfinite
    return {k: round_to(v, 1e4) for k, v in signals.items() if isfinite(v)}


def new_entry(item: NodeAssessment, signals: dict[str, float] | None, *, bare: bool = False) -> dict[str, Any]:
    """``assessment_to_dict(item)``, given ``signals = rounded_signals(item.signals)`` (None when
    ``item.signals`` is empty); ``bare``: without the detail (dimensions, signals and reasons), as
    :func:`bare_entry`. The result may be shared between reports: never mutate it."""
    score = item.score * 100.0
    out: dict[str, Any] = {
        "name": item.name,
        "level": item.level._value_,
        # round_to(item.score, 100.0), without the call in the usual case
        "score": (score + ROUNDER - ROUNDER) / 100.0
        if -ROUND_LIMIT < score < ROUND_LIMIT
        else round_to(item.score, 100.0),
    }
    if item.dominant:
        out["dominant"] = item.dominant
    if item.dimensions and not bare:
        out["dimensions"] = dimensions_to_dict(item.dimensions)
    if signals is not None:
        out["signals"] = signals
    if item.last_sample_time is not None:
        out["lastSampleTime"] = fast_format_time(item.last_sample_time)
    out["reasons"] = [] if bare else list(item.reasons)
    return out


def bare_entry(item: NodeAssessment) -> dict[str, Any]:
    """The entry of ``item`` without its detail, dimensions, signals and reasons (the size fit's
    stripped entry; the full entry when ``item`` has no detail; ``dominant`` stays). May be shared
    between reports: never mutate it."""
    return new_entry(item, None, bare=True)


def has_detail(item: NodeAssessment) -> bool:
    """True when the entry of ``item`` has dimensions, signals or reasons to strip (signals read
    before the reasons: they may be formatted on read)."""
    return bool(item.dimensions or item.signals or item.reasons)


Rounded = Callable[[NodeAssessment], dict[str, float] | None]
"""Gives ``rounded_signals(item.signals)`` when it has it at hand, else None."""


class Cached:
    """One node's full entry built from ``item`` on demand, and its detail size (for the size fitting)."""

    __slots__ = ("_detail", "_entry", "_rounded", "_signals", "has_detail", "item")

    def __init__(
        self, item: NodeAssessment, rounded: Rounded | None = None, signals: dict[str, float] | None = None
    ) -> None:
        self.item = item
        self._rounded = rounded
        """Asked for ``rounded_signals(item.signals)`` when the entry is built (see :class:`StatusCache`)."""
        self._signals = signals
        """``rounded_signals(item.signals)`` when known beforehand, else None."""
        self._entry: dict[str, Any] | None = None
        self._detail = -1
        self.has_detail = has_detail(item)
        """True when the entry has signals or reasons to strip."""

    @property
    def entry(self) -> dict[str, Any]:
        """The full entry; shared between reports: never mutate it (copy first)."""
        if self._entry is None:
            item = self.item
            signals = None
            if item.signals:
                signals = self._signals
                if signals is None and self._rounded is not None:
                    signals = self._rounded(item)
                if signals is None:
                    signals = rounded_signals(item.signals)
            self._entry = new_entry(item, signals)
        return self._entry

    def detail(self, encoded_size: Callable[[object], int]) -> int:
        """Encoded bytes the detail adds to the entry (0 without detail)."""
        if self._detail < 0:
            saved = 0
            if self.has_detail:
                entry = self.entry
                dimensions = entry.get("dimensions")
                if dimensions is not None:  # `"dimensions":{...},` (never the last key)
                    saved += len('"dimensions":,') + encoded_size(dimensions)
                signals = entry.get("signals")
                if signals is not None:  # `"signals":{...},` (never the last key)
                    saved += len('"signals":,') + encoded_size(signals)
                if entry["reasons"]:  # the content of `"reasons":[...]`
                    saved += encoded_size(entry["reasons"]) - len("[]")
            self._detail = saved
        return self._detail


def summary(nodes: Sequence[NodeAssessment], detail_dropped: int) -> dict[str, int]:
    """The ``summary`` of a status with ``nodes``: counts by level."""
    counts = dict.fromkeys(_LEVEL_KEY, 0)
    for item in nodes:
        counts[item.level._value_] += 1
    out = {"nodes": len(nodes), "detailDropped": detail_dropped}
    for text, key in _LEVEL_KEY.items():
        out[key] = counts[text]
    return out


def envelope(report: Report) -> dict[str, Any]:
    """The status document without its ``nodes``."""
    return {
        "lastUpdateTime": fast_format_time(report.last_update_time),
        "analyzer": {"identity": report.analyzer_identity, "rulesVersion": report.rules_version},
        "summary": summary(report.nodes, report.detail_dropped),
    }


class StatusCache:
    """Builds ``report_to_status(report)`` reusing the entries of unchanged assessments.

    An entry is reused when the report holds the very same assessment object as last
    time (assessments are immutable; their ``signals`` mappings must not be mutated
    either). Entries of nodes gone from the report are dropped. Not thread-safe.
    """

    def __init__(self, rounded: Rounded | None = None) -> None:
        self._rounded = rounded
        """Gives ``rounded_signals(item.signals)`` when it has it at hand, else None
        (:meth:`~mco_py.analysis.scoring.Scorer.rounded_signals`)."""
        self._by_name: dict[str, Cached] = {}
        self._used: dict[str, Cached] = {}
        self.rebuilt = 0
        """Records made anew (not reused) by the last :meth:`records` call."""

    def record(self, item: NodeAssessment, signals: dict[str, float] | None = None) -> Cached:
        """The record of ``item``, reused when it was kept for the very same assessment; kept for
        the next round only if asked for in this one (see :meth:`end_round`). ``signals``: as for
        :class:`Cached`. Call at most once per item and round."""
        rec = self._by_name.get(item.name)
        if rec is None or rec.item is not item:
            rec = Cached(item, self._rounded, signals)
        self._used[item.name] = rec
        return rec

    def end_round(self) -> None:
        """Keep the records asked for by :meth:`record` since the last call; forget the others."""
        self._by_name, self._used = self._used, {}

    def records(self, report: Report, rounded: Sequence[dict[str, float] | None] | None = None) -> list[Cached]:
        """One record per ``report.nodes`` item, in order; entries are built only when asked for.

        ``rounded``, when given, holds ``rounded_signals(item.signals)`` (or None: not known) per
        item of ``report.nodes``, in order (:meth:`~mco_py.analysis.scoring.Scorer.assess` fills it).
        """
        old = self._by_name
        hint = self._rounded
        by_name: dict[str, Cached] = {}
        records: list[Cached] = []
        rebuilt = 0
        for item, signals in zip(report.nodes, [None] * len(report.nodes) if rounded is None else rounded, strict=True):
            rec = old.get(item.name)
            if rec is None or rec.item is not item:
                rec = Cached(item, hint, signals)
                rebuilt += 1
            by_name[item.name] = rec
            records.append(rec)
        self._by_name = by_name
        self.rebuilt = rebuilt
        return records

    def build(self, report: Report, rounded: Sequence[dict[str, float] | None] | None = None) -> dict[str, Any]:
        """``report_to_status(report)``; the entries may be shared with earlier and later results.
        ``rounded``: as for :meth:`records`."""
        status = envelope(report)
        entries = [rec._entry or rec.entry for rec in self.records(report, rounded)]
        status["nodes"] = entries
        return status
