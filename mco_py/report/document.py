"""The report document: the ``status`` of the ``NodeInterferenceReport`` CR and the body of the
standalone report file. Its shape is fixed by the CRD schema
(``mco_py/data/crds/nodeinterferencereports.yaml``); this module is the one place that writes
and reads it.

An entry (``status.nodes[]``), keys in this order, optional ones left out when empty::

    name, level, score (2 decimals), dominant?, dimensions? {name: {level, score}},
    signals? {name: value (4 decimals, finite only)}, lastSampleTime?, reasons (always; [] when none)

A *bare* entry is the same without ``dimensions``, ``signals`` and ``reasons`` (``reasons: []``):
what the size limit leaves of a node (:mod:`mco_py.report.size`).

Entries are plain dicts, shared between reports by the builder: never mutate one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from mco_py.errors import ReportError
from mco_py.model import (
    NO_DIMENSIONS,
    DimensionScore,
    Level,
    NodeAssessment,
    Report,
    format_time,
    parse_time,
    round_signals,
    round_to,
)

_LEVEL_KEY = {level.value: level.value.lower() for level in Level}
"""Summary key by level text. (Hot loops read ``level._value_``: hashing an enum member runs Python code.)"""


def entry(item: NodeAssessment, *, detail: bool = True) -> dict[str, Any]:
    """The ``status.nodes[]`` entry of ``item``; ``detail=False``: its bare entry."""
    out: dict[str, Any] = {"name": item.name, "level": item.level._value_, "score": round_to(item.score, 100.0)}
    if item.dominant:
        out["dominant"] = item.dominant
    if detail:
        if item.dimensions:
            dims = item.dimensions
            out["dimensions"] = {
                n: {"level": d.level._value_, "score": round_to(d.score, 100.0)} for n, d in dims.items()
            }
        if item.signals:
            out["signals"] = round_signals(item.signals)
    if item.last_sample_time is not None:
        out["lastSampleTime"] = format_time(item.last_sample_time)
    out["reasons"] = list(item.reasons) if detail else []
    return out


def has_detail(item: NodeAssessment) -> bool:
    """True when the entry of ``item`` has dimensions, signals or reasons to strip."""
    return bool(item.dimensions or item.signals or item.reasons)


_NON_ASCII = bytes(range(128, 256))


def encoded_size(doc: object) -> int:
    """Bytes of ``doc`` as the Kubernetes client sends it (compact JSON, non-ASCII as ``\\uXXXX``).

    Encodes with msgspec (fast) and accounts for the escapes: each non-ASCII UTF-8 byte
    costs at most 2 more bytes once escaped (3-byte char -> 6, 2-byte -> 6, 4-byte -> 12).
    """
    data = msgspec.json.encode(doc)
    return len(data) + 2 * (len(data) - len(data.translate(None, _NON_ASCII)))


def detail_bytes(full: Mapping[str, Any]) -> int:
    """Encoded bytes the detail adds to the full entry ``full`` (0 without detail)."""
    saved = 0
    dimensions = full.get("dimensions")
    if dimensions is not None:  # `"dimensions":{...},` (never the last key)
        saved += len('"dimensions":,') + encoded_size(dimensions)
    signals = full.get("signals")
    if signals is not None:  # `"signals":{...},` (never the last key)
        saved += len('"signals":,') + encoded_size(signals)
    if full["reasons"]:  # the content of `"reasons":[...]`
        saved += encoded_size(full["reasons"]) - len("[]")
    return saved


def summary(nodes: Sequence[NodeAssessment], detail_dropped: int) -> dict[str, int]:
    """``status.summary``: the node count, ``detailDropped`` and the count of each level."""
    counts = dict.fromkeys(_LEVEL_KEY, 0)
    for item in nodes:
        counts[item.level._value_] += 1
    out = {"nodes": len(nodes), "detailDropped": detail_dropped}
    for text, key in _LEVEL_KEY.items():
        out[key] = counts[text]
    return out


def envelope(report: Report) -> dict[str, Any]:
    """The status document of ``report`` without its ``nodes``."""
    return {
        "lastUpdateTime": format_time(report.last_update_time),
        "analyzer": {"identity": report.analyzer_identity, "rulesVersion": report.rules_version},
        "summary": summary(report.nodes, report.detail_dropped),
    }


def status_of(report: Report) -> dict[str, Any]:
    """The whole status document of ``report``, every entry in full (no size limit, no cache:
    the analyzer builds with :class:`~mco_py.report.builder.ReportBuilder`)."""
    status = envelope(report)
    status["nodes"] = [entry(item) for item in report.nodes]
    return status


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReportError(f"{where}: expected a number, got {type(value).__name__}")
    return float(value)


def _dimensions(raw: object, where: str) -> Mapping[str, DimensionScore]:
    if raw is None:
        return NO_DIMENSIONS
    if not isinstance(raw, Mapping):
        raise ReportError(f"{where}: expected an object of dimension name -> {{level, score}}")
    out: dict[str, DimensionScore] = {}
    for name, body in raw.items():
        if not isinstance(body, Mapping):
            raise ReportError(f"{where}.{name}: expected an object with level and score")
        try:
            level = Level.parse(str(body.get("level")))
        except ValueError as exc:
            raise ReportError(f"{where}.{name}.level: {exc}") from exc
        out[str(name)] = DimensionScore(level, _number(body.get("score", 0.0), f"{where}.{name}.score"))
    return out


def _signals(raw: Mapping[Any, Any], where: str) -> dict[str, float]:
    """The signal map, checked: in C when every value is a number (a reader decodes tens of thousands
    of entries per shard update), else key by key to name the bad one."""
    try:
        return msgspec.convert(raw, dict[str, float])
    except msgspec.ValidationError:
        return {str(k): _number(v, f"{where}.signals.{k}") for k, v in raw.items()}


def assessment_of(raw: object, where: str) -> NodeAssessment:
    """Decode one entry (``where`` names it in errors); raises :class:`~mco_py.errors.ReportError`."""
    if not isinstance(raw, Mapping):
        raise ReportError(f"{where}: expected an object")
    try:
        name = str(raw["name"])
        level = Level.parse(str(raw["level"]))
    except KeyError as exc:
        raise ReportError(f"{where}.{exc.args[0]} is required") from exc
    except ValueError as exc:
        raise ReportError(f"{where}.level: {exc}") from exc
    signals_raw = raw.get("signals") or {}
    if not isinstance(signals_raw, Mapping):
        raise ReportError(f"{where}.signals: expected an object")
    sample_time = raw.get("lastSampleTime")
    return NodeAssessment(
        name=name,
        level=level,
        score=_number(raw.get("score", 0.0), f"{where}.score"),
        signals=_signals(signals_raw, where),
        last_sample_time=parse_time(sample_time) if sample_time else None,
        reasons=tuple(str(r) for r in raw.get("reasons") or ()),
        dominant=str(raw.get("dominant") or ""),
        dimensions=_dimensions(raw.get("dimensions"), f"{where}.dimensions"),
    )


def report_of(status: Mapping[str, Any]) -> Report:
    """Decode a status document; raises :class:`~mco_py.errors.ReportError` naming the bad field."""
    if not isinstance(status, Mapping):
        raise ReportError("status: expected an object")
    try:
        updated = parse_time(status["lastUpdateTime"])
    except KeyError as exc:
        raise ReportError(f"status.{exc.args[0]} is required") from exc
    analyzer = status.get("analyzer") or {}
    nodes_raw = status.get("nodes") or []
    if not isinstance(nodes_raw, Sequence) or isinstance(nodes_raw, str | bytes):
        raise ReportError("status.nodes: expected a list")
    summary_raw = status.get("summary") or {}
    if not isinstance(summary_raw, Mapping):
        raise ReportError("status.summary: expected an object")
    return Report(
        last_update_time=updated,
        analyzer_identity=str(analyzer.get("identity", "")) if isinstance(analyzer, Mapping) else "",
        rules_version=str(analyzer.get("rulesVersion", "")) if isinstance(analyzer, Mapping) else "",
        nodes=tuple(assessment_of(raw, f"status.nodes[{i}]") for i, raw in enumerate(nodes_raw)),
        detail_dropped=int(_number(summary_raw.get("detailDropped", 0), "status.summary.detailDropped")),
    )
