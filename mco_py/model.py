"""Shared plain-data types: signals, samples, levels, assessments and the report.

Everything here is pure (no I/O). The report as a document (the ``status`` of the
``NodeInterferenceReport`` CR, the standalone report file) is :mod:`mco_py.report.document`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import msgspec

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
        level = cls._value2member_map_.get(text) if isinstance(text, str) else None
        if level is not None:
            return level  # type: ignore[return-value]
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
    """Everything one collector measured on one node at one instant, as the analyzer decodes,
    checks and scores it. Each signal name is in ``values`` or in ``absent``, never in both."""

    node: str
    """Node name (joins collector, report, Volcano NodeInfo.Name and the Kubernetes Node)."""
    timestamp: float
    """Sample time, seconds since the Unix epoch."""
    values: Mapping[str, float] = field(default_factory=dict)
    """The value of each present signal, by signal key."""
    events: Mapping[str, int] = field(default_factory=dict)
    """Events behind a present value in its window (block I/Os for a P99), where the collector counted them."""
    absent: Mapping[str, str] = field(default_factory=dict)
    """Why each absent signal is absent (``"unsupported: no PMU"``; may be empty), by signal key."""

    @classmethod
    def of(cls, node: str, timestamp: float, readings: Iterable[SignalReading]) -> Sample:
        """The sample of ``readings`` (one per signal name; a later one replaces an earlier one)."""
        values: dict[str, float] = {}
        events: dict[str, int] = {}
        absent: dict[str, str] = {}
        for r in readings:
            values.pop(r.name, None)
            events.pop(r.name, None)
            absent.pop(r.name, None)
            if r.value is None:
                absent[r.name] = r.reason
                continue
            values[r.name] = r.value
            if r.events is not None:
                events[r.name] = r.events
        return cls(node, timestamp, values, events, absent)


@dataclass(frozen=True, slots=True)
class DimensionScore:
    """One resource dimension of one node: its score and the level that score maps to."""

    level: Level
    """None, Low, Medium or High by the rules' cut-offs."""
    score: float
    """0-100: the highest (capped) sub-score among the dimension's signals."""


NO_DIMENSIONS: Mapping[str, DimensionScore] = {}
"""The dimensions of a calm node (every dimension scored 0): shared by every such assessment, never mutated."""


class NodeAssessment(msgspec.Struct, frozen=True):
    """The analyzer's judgement of one node, as it appears in the report. A msgspec Struct: the
    scorer builds one per node and sample, and its constructor is much cheaper than a frozen
    dataclass's."""

    name: str
    """Node name."""
    level: Level
    """Interference level (Unknown when the data is stale)."""
    score: float
    """0-100, higher means more interference."""
    signals: Mapping[str, float] = msgspec.field(default_factory=dict)
    """Smoothed signal values the score used, as the report shows them: finite, rounded to 4 decimals
    (:func:`round_to` with ``1e4``; the scorer rounds them); absent signals are left out."""
    last_sample_time: float | None = None
    """Time of the newest sample, seconds since the epoch."""
    reasons: Sequence[str] = ()
    """Human-readable reasons naming the signals and values behind the level (a tuple, or a
    sequence equal to one)."""
    dominant: str = ""
    """The dimension with the highest score now; empty when every dimension scores 0."""
    dimensions: Mapping[str, DimensionScore] = msgspec.field(default_factory=dict)
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


_MAX_CACHED_SECOND = 253402300799  # 9999-12-31T23:59:59Z
_SECONDS: dict[int, str] = {}
"""Formatted whole seconds; cleared when it grows past a few hours' worth."""
_MILLIS = tuple(f".{ms:03d}Z" for ms in range(1000))


def _second(whole: int) -> str:
    text = _SECONDS.get(whole)
    if text is None:
        if len(_SECONDS) >= 16384:
            _SECONDS.clear()
        text = _SECONDS[whole] = datetime.fromtimestamp(whole, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return text


def format_time(ts: float) -> str:
    """RFC 3339 UTC with millisecond precision, e.g. ``2026-11-29T22:00:00.123Z``.

    The report formats one time per node and report: whole seconds come from a cache, the
    milliseconds from a table. Equal to ``datetime.fromtimestamp(ts, UTC).isoformat(timespec=
    "milliseconds")`` (microseconds rounded half to even, then truncated; a property test
    holds the two equal).
    """
    if not 0 <= ts < _MAX_CACHED_SECOND:
        return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    whole = int(ts)
    micros = int((ts - whole) * 1e6 + ROUNDER - ROUNDER)  # round() half to even; ts - whole is exact for 0 <= ts
    if micros >= 1_000_000:
        whole += 1
        micros -= 1_000_000
    return (_SECONDS.get(whole) or _second(whole)) + _MILLIS[micros // 1000]


def parse_time(text: str) -> float:
    """Parse an RFC 3339 timestamp into seconds since the epoch."""
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except (ValueError, AttributeError) as exc:
        raise ReportError(f"invalid RFC 3339 time {text!r}") from exc
    if parsed.tzinfo is None:
        raise ReportError(f"time {text!r} has no time zone; use RFC 3339 with Z or an offset")
    return parsed.timestamp()
