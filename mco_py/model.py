"""Shared plain-data types: signals, samples, levels, assessments and the report.

Everything here is pure (no I/O). The report document built by
:func:`report_to_status` is the ``status`` of the ``NodeInterferenceReport`` CR
and, in standalone mode, the body of the report file; its shape is fixed by the
CRD schema in ``mco_py/data/crds/nodeinterferencereports.yaml``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mco_py.errors import ReportError

#: Report signal keys (camelCase, as in the CRD), in display order. ``psi*Avg10`` are the kernel's
#: 10 s averages (context, and the extender's hard constraints); ``psi*Rate`` are the share of the
#: collector's sample interval that tasks stalled (from the ``total=`` counter: settles within a
#: second or two, which is why the default rules score them).
SIGNAL_NAMES: tuple[str, ...] = (
    "psiCpuSomeAvg10",
    "psiMemorySomeAvg10",
    "psiMemoryFullAvg10",
    "psiIoSomeAvg10",
    "psiIoFullAvg10",
    "psiCpuSomeRate",
    "psiMemorySomeRate",
    "psiMemoryFullRate",
    "psiIoSomeRate",
    "psiIoFullRate",
    "llcMissRate",
    "bioLatencyP99Ms",
    "cpuStealPercent",
    "oomKills",
    *(f"psi{cls}{res}SomeRate" for cls in ("Online", "Offline") for res in ("Cpu", "Io", "Memory")),
)
#: The stall share of the interval of the worst online or offline group (collectors with workload
#: classes): who suffers and who causes it. In :data:`SIGNAL_NAMES`.
CLASS_SIGNALS: tuple[str, ...] = SIGNAL_NAMES[-6:]

#: The resource dimension each known signal belongs to unless the rules say otherwise
#: (``mco rules migrate`` places format-1 rules by it).
DEFAULT_DIMENSIONS: dict[str, str] = {
    "psiCpuSomeAvg10": "cpu",
    "psiCpuSomeRate": "cpu",
    "cpuStealPercent": "cpu",
    "psiMemorySomeAvg10": "memory",
    "psiMemoryFullAvg10": "memory",
    "psiMemorySomeRate": "memory",
    "psiMemoryFullRate": "memory",
    "oomKills": "memory",
    "psiIoSomeAvg10": "io",
    "psiIoFullAvg10": "io",
    "psiIoSomeRate": "io",
    "psiIoFullRate": "io",
    "bioLatencyP99Ms": "io",
    "llcMissRate": "cache",
    **{f"psi{cls}{res.capitalize()}SomeRate": res for cls in ("Online", "Offline") for res in ("cpu", "io", "memory")},
}

#: Report API identity.
GROUP = "mco.many-core.io"
VERSION = "v1alpha1"
KIND = "NodeInterferenceReport"
PLURAL = "nodeinterferencereports"


class Level(enum.Enum):
    """Interference level of one node. ``Unknown`` means its data is stale."""

    NONE = "None"
    LOW = "Low"
    MEDIUM = "Medium"
    HIGH = "High"
    UNKNOWN = "Unknown"

    @property
    def code(self) -> int:
        """Numeric encoding for metrics: None=0, Low=1, Medium=2, High=3, Unknown=-1."""
        return _LEVEL_CODES[self]

    @classmethod
    def parse(cls, text: str) -> Level:
        """Level from its report spelling; raises ``ValueError`` for anything else."""
        for level in cls:
            if level.value == text:
                return level
        raise ValueError(f"unknown level {text!r}; expected one of {[lv.value for lv in cls]}")


_LEVEL_CODES = {Level.NONE: 0, Level.LOW: 1, Level.MEDIUM: 2, Level.HIGH: 3, Level.UNKNOWN: -1}


@dataclass(frozen=True, slots=True)
class SignalReading:
    """One signal of one sample: a value, or the reason it is absent."""

    name: str
    """Signal key, e.g. ``psiIoSomeAvg10``."""
    value: float | None
    """Measured value; ``None`` when the signal is absent (never 0 for "unknown")."""
    backend: str = ""
    """What produced it (``procfs``, ``libbpf``, ``tracefs``, ``diskstats-average``, ...)."""
    reason: str = ""
    """Why the value is absent; empty when present."""
    events: int | None = None
    """Events behind the value in its window (block I/Os for a P99); None when not meaningful."""

    @property
    def present(self) -> bool:
        """True when the signal carries a value."""
        return self.value is not None


@dataclass(frozen=True, slots=True)
class Sample:
    """Everything one collector measured on one node at one instant."""

    node: str
    """Node name (joins collector, report, Volcano NodeInfo.Name and the Kubernetes Node)."""
    timestamp: float
    """Sample time, seconds since the Unix epoch."""
    signals: Mapping[str, SignalReading] = field(default_factory=dict)
    """Readings by signal key."""


@dataclass(frozen=True, slots=True)
class DimensionScore:
    """One resource dimension of one node: its score and the level that score maps to."""

    level: Level
    """None, Low, Medium or High by the rules' cut-offs."""
    score: float
    """0-100: the highest (capped) sub-score among the dimension's signals."""


NO_DIMENSIONS: Mapping[str, DimensionScore] = {}
"""The dimensions of a calm node (every dimension scored 0): shared by every such assessment, never mutated."""


@dataclass(frozen=True, slots=True)
class NodeAssessment:
    """The analyzer's judgement of one node, as it appears in the report."""

    name: str
    """Node name."""
    level: Level
    """Interference level (Unknown when the data is stale)."""
    score: float
    """0-100, higher means more interference."""
    signals: Mapping[str, float] = field(default_factory=dict)
    """Smoothed signal values the score used; absent signals are left out."""
    last_sample_time: float | None = None
    """Time of the newest sample, seconds since the epoch."""
    reasons: tuple[str, ...] = ()
    """Human-readable reasons naming the signals and values behind the level."""
    dominant: str = ""
    """The dimension with the highest score now; empty when every dimension scores 0."""
    dimensions: Mapping[str, DimensionScore] = field(default_factory=dict)
    """Dimensions scoring above 0 now (a dimension left out scores 0), in the rules' order."""


@dataclass(frozen=True, slots=True)
class Report:
    """The whole report: one document for every node."""

    last_update_time: float
    """When the analyzer wrote it, seconds since the epoch (liveness for the scheduler's TTL)."""
    analyzer_identity: str
    """Which analyzer wrote it (host name / pod name)."""
    rules_version: str
    """Version of the detection rules in force."""
    nodes: tuple[NodeAssessment, ...] = ()
    """One assessment per node, sorted by name."""
    detail_dropped: int = 0
    """Nodes whose dimensions, signals and reasons were left out to stay under the API size limit."""

    def node(self, name: str) -> NodeAssessment | None:
        """The assessment of ``name``, or None."""
        for item in self.nodes:
            if item.name == name:
                return item
        return None


def format_time(ts: float) -> str:
    """RFC 3339 UTC with millisecond precision, e.g. ``2026-11-29T22:00:00.123Z``."""
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str) -> float:
    """Parse an RFC 3339 timestamp into seconds since the epoch."""
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except (ValueError, AttributeError) as exc:
        raise ReportError(f"invalid RFC 3339 time {text!r}") from exc
    if parsed.tzinfo is None:
        raise ReportError(f"time {text!r} has no time zone; use RFC 3339 with Z or an offset")
    return parsed.timestamp()


ROUNDER = 6755399441055744.0
"""1.5 * 2**52: ``(x + ROUNDER) - ROUNDER`` is ``x`` rounded to an integer, half to even (as
``round(x)``), for ``|x| < ROUND_LIMIT``: the sum lies in [2**52, 2**53), where doubles are
the integers, and ``ROUNDER`` is even. Plain float arithmetic, no call: the report's hot path."""
ROUND_LIMIT = 2.0**51


def round_to(value: float, scale: float) -> float:
    """``value`` rounded to a multiple of ``1 / scale`` (``scale=1e4``: four decimal places).

    Equal to ``round(value * scale) / scale`` (half to even on the scaled double), which
    differs from ``round(value, 4)`` only within an ulp of a tie; the quotient of an integer
    by a power of ten is the double nearest that decimal, so it prints short. Non-finite and
    huge values come back as they are.
    """
    scaled = value * scale
    if -ROUND_LIMIT < scaled < ROUND_LIMIT:  # NaN fails too
        return (scaled + ROUNDER - ROUNDER) / scale
    try:
        return round(scaled) / scale
    except (OverflowError, ValueError):  # inf, nan, or |value| near the largest double
        return value


def assessment_to_dict(item: NodeAssessment) -> dict[str, Any]:
    """One ``status.nodes[]`` entry: scores to 2 decimals, signals to 4, non-finite signals left out."""
    out: dict[str, Any] = {"name": item.name, "level": item.level.value, "score": round_to(item.score, 100.0)}
    if item.dominant:
        out["dominant"] = item.dominant
    if item.dimensions:
        out["dimensions"] = dimensions_to_dict(item.dimensions)
    if item.signals:
        out["signals"] = {k: round_to(v, 1e4) for k, v in item.signals.items() if math.isfinite(v)}
    if item.last_sample_time is not None:
        out["lastSampleTime"] = format_time(item.last_sample_time)
    out["reasons"] = list(item.reasons)
    return out


def dimensions_to_dict(dimensions: Mapping[str, DimensionScore]) -> dict[str, dict[str, Any]]:
    """``{"cpu": {"level": "High", "score": 87.5}, ...}`` (scores to 2 decimals)."""
    return {name: {"level": d.level.value, "score": round_to(d.score, 100.0)} for name, d in dimensions.items()}


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


def report_to_status(report: Report) -> dict[str, Any]:
    """The report as the CR ``status`` (and standalone file) document."""
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


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReportError(f"{where}: expected a number, got {type(value).__name__}")
    return float(value)


def report_from_status(status: Mapping[str, Any]) -> Report:
    """Decode a ``status`` document; raises :class:`ReportError` naming the bad field."""
    if not isinstance(status, Mapping):
        raise ReportError("status: expected an object")
    try:
        updated = parse_time(status["lastUpdateTime"])
        analyzer = status.get("analyzer") or {}
        nodes_raw = status.get("nodes") or []
    except KeyError as exc:
        raise ReportError(f"status.{exc.args[0]} is required") from exc
    if not isinstance(nodes_raw, Sequence) or isinstance(nodes_raw, str | bytes):
        raise ReportError("status.nodes: expected a list")
    nodes: list[NodeAssessment] = []
    for i, raw in enumerate(nodes_raw):
        where = f"status.nodes[{i}]"
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
        signals = {str(k): _number(v, f"{where}.signals.{k}") for k, v in signals_raw.items()}
        sample_time = raw.get("lastSampleTime")
        nodes.append(
            NodeAssessment(
                name=name,
                level=level,
                score=_number(raw.get("score", 0.0), f"{where}.score"),
                signals=signals,
                last_sample_time=parse_time(sample_time) if sample_time else None,
                reasons=tuple(str(r) for r in raw.get("reasons") or ()),
                dominant=str(raw.get("dominant") or ""),
                dimensions=_dimensions(raw.get("dimensions"), f"{where}.dimensions"),
            )
        )
    return Report(
        last_update_time=updated,
        analyzer_identity=str(analyzer.get("identity", "")) if isinstance(analyzer, Mapping) else "",
        rules_version=str(analyzer.get("rulesVersion", "")) if isinstance(analyzer, Mapping) else "",
        nodes=tuple(nodes),
        detail_dropped=int(
            _number((status.get("summary") or {}).get("detailDropped", 0), "status.summary.detailDropped")
        ),
    )
