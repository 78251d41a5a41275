"""Scheduler policy: filter and score nodes from the interference report.

The scheduler plugins (``scheduler/policy``, Go) make the same decision; the two are held
equal by the committed vectors in ``scheduler/policy/testdata/vectors.json`` (written by
``python -m tests.analysis.policy_vectors``), which both test suites run.

Pure: no I/O, no clock. Callers pass the report (or None), the current time,
the settings, the pod's ``runtimeClassName`` and the node's name and labels.

- **Report state** (:func:`report_state`): the report is *fresh* when it exists,
  was decoded, is at most ``ttl_seconds`` old and not dated more than
  ``max_clock_skew_seconds`` in the future. Otherwise the extender runs in
  *basic mode* (fallback): every node passes except for the Kata rule, and every
  node gets the same (neutral) score. With ``fallback_when_outdated=False`` an old
  report keeps being used (the state says so, so a metric can warn).
- **Filter** (:func:`filter_node`): the Kata rule first (needs no report), then
  the hard constraints on the node's report ``signals``. Nodes that are Unknown
  or absent from the report, and signals that are absent, pass (no data → pass).
- **Score** (:func:`node_score`, scaled by :func:`volcano_score` and :func:`kube_score`):
  ``100 - score`` (lower interference → higher score), scaled for Volcano (0-100 times weight)
  or kube-scheduler's extender (0..10 integers). Unknown or absent nodes, and every node in
  basic mode, get the neutral ``unknown_score``. A pod that names the dimensions it
  is sensitive to (:class:`Sensitivity`, from the ``mco.many-core.io/sensitive-to``
  annotation) is scored by those dimensions instead of the node score:
  ``100 - max(weight * dimension score)``.
"""

from __future__ import annotations

import enum
import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from mco_py.model import SIGNAL_NAMES, Level, NodeAssessment, Report

#: Node label that marks a node able to run Kata Containers pods.
KATA_LABEL = "katacontainers.io/kata-runtime"
KATA_LABEL_VALUE = "true"

#: kube-scheduler's MaxExtenderPriority.
KUBE_MAX_SCORE = 10


@dataclass(frozen=True, slots=True)
class PolicySettings:
    """What the extender policy needs from its configuration."""

    ttl_seconds: float = 30.0
    """A report older than this is outdated (``crStatusTTLSeconds``)."""
    hard_constraints: Mapping[str, float] = field(
        default_factory=lambda: {"psiMemoryFullAvg10": 0.0, "psiIoSomeAvg10": 20.0}
    )
    """Report signal name → threshold; a node whose fresh value is above it is rejected. Checked in
    this order, which the config puts in :data:`~mco_py.model.SIGNAL_NAMES` order (as the Go plugin
    checks them: the first one broken names the reason)."""
    fallback_when_outdated: bool = True
    """True: an outdated report switches to basic mode. False: keep using it (with a warning)."""
    kata_runtime_class_prefixes: tuple[str, ...] = ("kata",)
    """A pod whose ``runtimeClassName`` starts with one of these needs a Kata node."""
    score_weight: float = 1.0
    """Multiplier for Volcano scores (Volcano adds the raw float to its other plugins' scores)."""
    unknown_score: float = 50.0
    """Neutral 0-100 score for Unknown/absent nodes and for every node in basic mode."""
    max_clock_skew_seconds: float = 5.0
    """A report dated further than this in the future is treated as unusable (clock problem)."""

    def __post_init__(self) -> None:
        for name in self.hard_constraints:
            if name not in SIGNAL_NAMES:
                raise ValueError(f"hard constraint on unknown signal {name!r}; known: {', '.join(SIGNAL_NAMES)}")


class Fallback(enum.Enum):
    """Why the extender runs in basic mode (bounded metric label values)."""

    NONE = "none"
    MISSING = "missing"
    UNREADABLE = "unreadable"
    STALE = "stale"
    FUTURE = "future"


@dataclass(frozen=True, slots=True)
class IndexedReport:
    """A report with its nodes indexed by name (build once per report, not per request)."""

    report: Report
    """The report; a sharded one's ``nodes`` are empty here (they are in ``by_name`` only)."""
    by_name: Mapping[str, NodeAssessment]


def index_report(report: Report) -> IndexedReport:
    """Index ``report`` by node name (the last entry wins on duplicates)."""
    return IndexedReport(report=report, by_name={n.name: n for n in report.nodes})


@dataclass(frozen=True, slots=True)
class ReportState:
    """The report as the policy sees it at one instant."""

    report: IndexedReport | None
    """The report to use, or None in basic mode."""
    fallback: Fallback
    """Why basic mode is on (``NONE`` when the report is used)."""
    detail: str
    """Human-readable explanation (for logs and reasons)."""
    age_seconds: float | None
    """Age of the report (None when there is none)."""
    outdated_in_use: bool = False
    """True when an outdated report is used because ``fallback_when_outdated`` is off."""

    @property
    def basic_mode(self) -> bool:
        return self.report is None


def report_state(  # noqa: PLR0911 - one return per state, read top to bottom
    report: IndexedReport | None,
    *,
    now: float,
    settings: PolicySettings,
    problem: str | None = None,
    unreadable: bool = False,
) -> ReportState:
    """Decide whether ``report`` can be used at ``now``.

    ``problem`` explains why there is no report (or why the latest document was
    rejected); ``unreadable=True`` means the latest document could not be read or
    decoded, which forces basic mode even when an older report is at hand.
    """
    if unreadable:
        return ReportState(None, Fallback.UNREADABLE, problem or "report unreadable", None)
    if report is None:
        return ReportState(None, Fallback.MISSING, problem or "no report", None)
    age = now - report.report.last_update_time
    if not math.isfinite(age):
        return ReportState(None, Fallback.UNREADABLE, "report time is not a number", None)
    if age < -settings.max_clock_skew_seconds:
        return ReportState(
            None,
            Fallback.FUTURE,
            f"report is dated {-age:.0f}s in the future (allowed skew {settings.max_clock_skew_seconds:g}s)",
            age,
        )
    if age > settings.ttl_seconds:
        if settings.fallback_when_outdated:
            return ReportState(None, Fallback.STALE, f"report is {age:.0f}s old (TTL {settings.ttl_seconds:g}s)", age)
        return ReportState(report, Fallback.NONE, f"outdated report ({age:.0f}s old) in use", age, True)
    return ReportState(report, Fallback.NONE, "report fresh", age)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Filter result for one node."""

    passed: bool
    reason: str
    """Why it was rejected (shown in ``kubectl describe pod``); empty when it passed."""
    rule: str
    """Bounded label: ``ok``, ``kata``, ``constraint``, ``fallback``, ``no-data``, ``labels-unknown``."""


_PASS_OK = Verdict(True, "", "ok")
_PASS_FALLBACK = Verdict(True, "", "fallback")
_PASS_NO_DATA = Verdict(True, "", "no-data")
_PASS_LABELS_UNKNOWN = Verdict(True, "", "labels-unknown")


def needs_kata(runtime_class: str | None, settings: PolicySettings) -> bool:
    """True when a pod with ``runtime_class`` must run on a Kata node."""
    if not runtime_class:
        return False
    return any(runtime_class.startswith(p) for p in settings.kata_runtime_class_prefixes if p)


def _age_text(state: ReportState) -> str:
    return f"report {state.age_seconds:.0f}s old" if state.age_seconds is not None else "no report"


def filter_node(
    state: ReportState,
    *,
    node: str,
    labels: Mapping[str, str] | None,
    runtime_class: str | None,
    settings: PolicySettings,
) -> Verdict:
    """Pass or reject ``node`` for a pod with ``runtime_class``.

    ``labels=None`` means the node's labels are not known: the Kata rule cannot be
    checked and the node passes (fail open).
    """
    kata_unchecked = False
    if needs_kata(runtime_class, settings):
        if labels is None:
            kata_unchecked = True  # fail open on the Kata rule, still apply the report
        elif labels.get(KATA_LABEL) != KATA_LABEL_VALUE:
            return Verdict(
                False,
                f"mco: node {node} has no label {KATA_LABEL}={KATA_LABEL_VALUE} "
                f"required by runtimeClassName {runtime_class}",
                "kata",
            )
    if state.report is None:
        return _PASS_LABELS_UNKNOWN if kata_unchecked else _PASS_FALLBACK
    assessment = state.report.by_name.get(node)
    if assessment is None or assessment.level is Level.UNKNOWN:
        return _PASS_LABELS_UNKNOWN if kata_unchecked else _PASS_NO_DATA
    for signal, threshold in settings.hard_constraints.items():
        value = assessment.signals.get(signal)
        if value is not None and value > threshold:
            return Verdict(
                False,
                f"mco: node {node} {signal}={value:g} > threshold {threshold:g} ({_age_text(state)})",
                "constraint",
            )
    return _PASS_LABELS_UNKNOWN if kata_unchecked else _PASS_OK


@dataclass(frozen=True, slots=True)
class Sensitivity:
    """The dimensions a pod's performance depends on, each with a weight in (0, 1] (the largest is 1)."""

    weights: tuple[tuple[str, float], ...]


#: Most dimensions one annotation may name, and its longest accepted text.
MAX_SENSITIVITY_ITEMS = 8
MAX_SENSITIVITY_CHARS = 256
_DIMENSION = re.compile(r"[a-z][a-zA-Z0-9]{0,31}")


@functools.lru_cache(maxsize=256)
def parse_sensitivity(text: str) -> Sensitivity:
    """``"cpu"``, ``"cpu,io"`` or ``"cpu=2,io=1"`` (relative weights); ``ValueError`` says what is wrong."""
    if len(text) > MAX_SENSITIVITY_CHARS:
        raise ValueError(f"longer than {MAX_SENSITIVITY_CHARS} characters")
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise ValueError("names no dimension; write e.g. cpu,io or cpu=2,io=1")
    if len(items) > MAX_SENSITIVITY_ITEMS:
        raise ValueError(f"names {len(items)} dimensions; at most {MAX_SENSITIVITY_ITEMS}")
    weights: dict[str, float] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not _DIMENSION.fullmatch(name):
            raise ValueError(f"{name[:40]!r} is not a dimension name (e.g. cpu, memory, io, cache)")
        weight = 1.0
        if sep:
            try:
                weight = float(raw)
            except ValueError:
                raise ValueError(f"weight of {name} is not a number: {raw[:20]!r}") from None
            if not math.isfinite(weight) or weight <= 0:
                raise ValueError(f"weight of {name} must be a positive number, got {raw[:20]!r}")
        weights[name] = weight
    top = max(weights.values())
    return Sensitivity(tuple((name, w / top) for name, w in weights.items()))


def pod_interference(item: NodeAssessment, sensitivity: Sensitivity) -> float:
    """The node's interference for a pod with ``sensitivity``: the worst weighted dimension it names.

    A node entry without dimensions scores 0 in each when its score is 0; otherwise the report
    came from an analyzer that writes no dimensions, and the node score stands in for each.
    """
    dims = item.dimensions
    if not dims:
        return item.score if item.score > 0 else 0.0
    worst = 0.0
    for name, weight in sensitivity.weights:
        found = dims.get(name)
        if found is not None and weight * found.score > worst:
            worst = weight * found.score
    return worst


def node_score(
    state: ReportState, node: str, settings: PolicySettings, sensitivity: Sensitivity | None = None
) -> float:
    """0-100, higher is better for the pod: what every scheduler's score is scaled from."""
    if state.report is None:
        return settings.unknown_score
    assessment = state.report.by_name.get(node)
    if assessment is None or assessment.level is Level.UNKNOWN or not math.isfinite(assessment.score):
        return settings.unknown_score
    interference = assessment.score if sensitivity is None else pod_interference(assessment, sensitivity)
    return min(100.0, max(0.0, 100.0 - interference))


def volcano_score(
    state: ReportState, node: str, settings: PolicySettings, sensitivity: Sensitivity | None = None
) -> float:
    """Score for Volcano: 0-100 times ``score_weight``, never negative, never NaN."""
    value = node_score(state, node, settings, sensitivity) * settings.score_weight
    return value if math.isfinite(value) and value > 0.0 else 0.0


def kube_score(state: ReportState, node: str, settings: PolicySettings, sensitivity: Sensitivity | None = None) -> int:
    """Score for kube-scheduler: an integer 0..10 (kube-scheduler applies its own weight)."""
    return min(KUBE_MAX_SCORE, max(0, round(node_score(state, node, settings, sensitivity) / 10.0)))
