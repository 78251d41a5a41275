"""Detection rules: the typed document, its validating loader and the format-1 migration.

:func:`parse_rules` turns YAML text into :class:`DetectionRules` or raises
:class:`~mco_py.errors.RulesError` listing every problem, each naming the field
(dotted path) and the fix. It never does I/O: callers read the file or the
ConfigMap and pass the text.

Format 2 (``format: 2``) groups signals into resource dimensions; a dimension is as
bad as its worst signal and the node as its worst dimension. Format 1 (a flat
``signals:`` map with weights, no ``format`` key) is still read: each signal goes to
its default dimension (:data:`~mco_py.model.DEFAULT_DIMENSIONS`) and the weights are
dropped, with :attr:`DetectionRules.migration_notes` saying so. ``mco rules migrate``
prints the converted document (:func:`rules_to_yaml`).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

from mco_py.analysis.guard import GuardRules
from mco_py.analysis.workloads import QOS_CLASSES, WorkloadPolicy
from mco_py.errors import ConfigError, RulesError
from mco_py.model import DEFAULT_DIMENSIONS, SIGNAL_NAMES, Level

#: The rules format this version writes.
RULES_FORMAT = 2
SMOOTHING_METHODS = ("ewma", "window")
COMBINE_METHODS = ("compound", "worst")
#: Most dimensions one document may define (each is a metric label value per node).
MAX_DIMENSIONS = 8
_DIMENSION_NAME = re.compile(r"[a-z][a-zA-Z0-9]{0,31}")


@dataclass(frozen=True, slots=True)
class Smoothing:
    """Per-signal smoothing before scoring."""

    method: str = "ewma"
    """``ewma`` or ``window``."""
    alpha: float = 0.3
    """EWMA weight of the newest sample, 0 < alpha <= 1 (1: no smoothing)."""
    window: int = 5
    """Samples in the moving mean when ``method`` is ``window``."""


@dataclass(frozen=True, slots=True)
class SignalRule:
    """How one signal turns into a 0-100 sub-score."""

    warn: float
    """Value at which the sub-score starts rising from 0."""
    critical: float
    """Value at which the sub-score reaches 100."""
    max_score: float = 100.0
    """Highest sub-score this signal alone can give its dimension (0: shown, never scored)."""
    min_events: int = 0
    """Judge the signal only when its window had at least this many events (block I/O)."""
    smoothing: Smoothing | None = None
    """This signal's smoothing when it differs from the document's."""


@dataclass(frozen=True, slots=True)
class Dimension:
    """One resource (cpu, memory, io, cache, ...) and the signals that show its contention."""

    name: str
    signals: Mapping[str, SignalRule]
    """Rules by signal key, in document order."""


#: Ordered levels; the index is a level's rank (what hysteresis compares).
RANKED_LEVELS: tuple[Level, ...] = (Level.NONE, Level.LOW, Level.MEDIUM, Level.HIGH)


@dataclass(frozen=True, slots=True)
class LevelCutoffs:
    """Score cut-offs: None < low <= Low < medium <= Medium < high <= High."""

    low: float = 25.0
    medium: float = 50.0
    high: float = 75.0

    def rank(self, score: float) -> int:
        """The raw level of ``score`` as its index in :data:`RANKED_LEVELS`."""
        if score >= self.high:
            return 3
        if score >= self.medium:
            return 2
        if score >= self.low:
            return 1
        return 0

    def held(self, score: float, rank: int) -> float:
        """The score a node held at level ``rank`` is reported with: its raw ``score``, never below the
        level's cut-off (a held level and the score schedulers read never disagree)."""
        if rank <= 0:
            return score
        return max(score, self.high if rank >= 3 else self.medium if rank == 2 else self.low)


_RAISE_AFTER = 8
_LOWER_AFTER = 10


@dataclass(frozen=True, slots=True)
class Hysteresis:
    """Consecutive assessments needed before a level moves (one assessment per sample)."""

    raise_after: int = _RAISE_AFTER
    """Assessments in a row above None before the level may rise. It rises to the raw level that all but
    one of the newest ``raise_after - 1`` reached: the first of a run usually covers a partial interval,
    and one more odd assessment is tolerated."""
    lower_after: int = _LOWER_AFTER
    """Assessments below the current level before it falls, to the highest of them."""


@dataclass(frozen=True, slots=True)
class Staleness:
    """When a silent node becomes Unknown, and when it leaves the report."""

    stale_after_seconds: float = 30.0
    """No sample for this long: level Unknown."""
    forget_after_seconds: float = 600.0
    """No sample for this long: the node leaves the report."""


@dataclass(frozen=True, slots=True)
class DetectionRules:
    """A complete, validated detection-rules document."""

    version: str
    """Free-form version string; shown in the report as ``rulesVersion``."""
    dimensions: tuple[Dimension, ...] = ()
    """The dimensions in document order (report and metrics order)."""
    levels: LevelCutoffs = LevelCutoffs()
    combine: str = "compound"
    """``compound``: several elevated dimensions add up; ``worst``: the worst dimension alone."""
    smoothing: Smoothing = Smoothing()
    hysteresis: Hysteresis = Hysteresis()
    staleness: Staleness = Staleness()
    format: int = RULES_FORMAT
    """The format the document was written in (1 is read converted: :attr:`migration_notes`)."""
    migration_notes: tuple[str, ...] = ()
    """For a format-1 document: what the conversion changed (empty otherwise)."""
    guard: GuardRules | None = None
    """The node guard's rules (``guard:``); None: the document has none, collectors keep their own."""
    workloads: WorkloadPolicy = field(default_factory=WorkloadPolicy)
    """Which unlabelled pods are offline (``guard.offlineQosClasses``/``offlineRuntimeClasses``)."""
    signals: Mapping[str, SignalRule] = field(init=False, compare=False, repr=False)
    """Every signal rule by key (derived from ``dimensions``)."""
    dimension_of: Mapping[str, str] = field(init=False, compare=False, repr=False)
    """The dimension of each signal with a rule (derived from ``dimensions``)."""

    def __post_init__(self) -> None:
        signals = {name: rule for dim in self.dimensions for name, rule in dim.signals.items()}
        object.__setattr__(self, "signals", signals)
        object.__setattr__(self, "dimension_of", {name: dim.name for dim in self.dimensions for name in dim.signals})

    def smoothing_of(self, signal: str) -> Smoothing:
        """The smoothing ``signal`` uses (its own, else the document's)."""
        rule = self.signals.get(signal)
        return rule.smoothing if rule is not None and rule.smoothing is not None else self.smoothing


_V2_TOP = ("format", "version", "dimensions", "levels", "combine", "smoothing", "hysteresis", "staleness", "guard")
#: ``guard:`` keys (the node guard's rules, :class:`GuardRules`, camelCase as the rest of the document)
_GUARD_NUMBERS = {
    "throttleAbove": "throttle_above",
    "releaseBelow": "release_below",
    "calmIntervals": "calm_intervals",
    "stepDown": "step_down",
    "stepUp": "step_up",
    "floor": "floor",
    "ioTarget": "io_target",
    "ioFloor": "io_floor",
}
_GUARD_KEYS = (*_GUARD_NUMBERS, "offlineQosClasses", "offlineRuntimeClasses")
_V1_TOP = ("version", "signals", "levels", "smoothing", "hysteresis", "staleness")
_V2_SIGNAL_KEYS = ("warn", "critical", "maxScore", "minEvents", "smoothing")
_V1_SIGNAL_KEYS = ("warn", "critical", "weight", "minEvents")
_DIMENSION_KEYS = ("signals",)
_LEVEL_KEYS = ("low", "medium", "high")
_SMOOTHING_KEYS = ("method", "alpha", "window")
_HYSTERESIS_KEYS = ("raiseAfter", "lowerAfter")
_STALENESS_KEYS = ("staleAfterSeconds", "forgetAfterSeconds")


class _Checker:
    """Collects problems while reading a document; never stops at the first."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def problem(self, path: str, text: str) -> None:
        self.problems.append(f"{path}: {text}")

    def mapping(self, value: object, path: str, allowed: tuple[str, ...] | None) -> Mapping[str, Any]:
        """``value`` as a mapping (``{}`` when absent or not one); with ``allowed``, unknown keys are problems."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problem(path, f"expected a mapping, got {_type_name(value)}")
            return {}
        for key in value:
            if allowed is not None and (not isinstance(key, str) or key not in allowed):
                hint = difflib.get_close_matches(str(key), allowed, n=1)
                fix = f"did you mean {hint[0]!r}?" if hint else f"allowed keys: {', '.join(allowed)}"
                self.problem(f"{path}.{key}" if path else str(key), f"unknown key; {fix}")
        return value

    def number(
        self,
        data: Mapping[str, Any],
        key: str,
        path: str,
        default: float | None,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        exclusive_minimum: bool = False,
    ) -> float:
        where = f"{path}.{key}" if path else key
        if key not in data:
            if default is None:
                self.problem(where, "is required; add a number")
                return math.nan
            return default
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.problem(where, f"expected a number, got {_type_name(value)} {value!r}")
            return math.nan
        number = float(value)
        if not math.isfinite(number):
            self.problem(where, f"must be a finite number, got {value!r}")
            return math.nan
        if minimum is not None and (number <= minimum if exclusive_minimum else number < minimum):
            bound = "greater than" if exclusive_minimum else "at least"
            self.problem(where, f"must be {bound} {minimum:g}, got {number:g}")
        if maximum is not None and number > maximum:
            self.problem(where, f"must be at most {maximum:g}, got {number:g}")
        return number

    def integer(self, data: Mapping[str, Any], key: str, path: str, default: int, minimum: int) -> int:
        where = f"{path}.{key}"
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(where, f"expected a whole number, got {_type_name(value)} {value!r}")
            return default
        if value < minimum:
            self.problem(where, f"must be at least {minimum}, got {value}")
        return value

    def choice(self, data: Mapping[str, Any], key: str, path: str, default: str, choices: tuple[str, ...]) -> str:
        value = data.get(key, default)
        if value not in choices:
            where = f"{path}.{key}" if path else key
            self.problem(where, f"must be one of {', '.join(choices)}, got {value!r}")
            return default
        return str(value)


def _type_name(value: object) -> str:
    names = {str: "a string", list: "a list", dict: "a mapping", bool: "a boolean", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _warn_critical(check: _Checker, body: Mapping[str, Any], path: str) -> tuple[float, float]:
    warn = check.number(body, "warn", path, None, minimum=0)
    critical = check.number(body, "critical", path, None, minimum=0)
    if math.isfinite(warn) and math.isfinite(critical) and critical <= warn:
        check.problem(path, f"critical ({critical:g}) must be greater than warn ({warn:g})")
    return warn, critical


def _smoothing(check: _Checker, raw: object, path: str = "smoothing") -> Smoothing:
    data = check.mapping(raw, path, _SMOOTHING_KEYS)
    method = check.choice(data, "method", path, "ewma", SMOOTHING_METHODS)
    alpha = check.number(data, "alpha", path, 0.3, minimum=0, maximum=1, exclusive_minimum=True)
    window = check.integer(data, "window", path, 5, 1)
    return Smoothing(method=method, alpha=alpha, window=window)


def _signal_rule(check: _Checker, name: str, body: object, path: str) -> SignalRule | None:
    if name not in SIGNAL_NAMES:
        hint = difflib.get_close_matches(name, SIGNAL_NAMES, n=1)
        fix = f"did you mean {hint[0]!r}?" if hint else f"known signals: {', '.join(SIGNAL_NAMES)}"
        check.problem(path, f"unknown signal; {fix}")
        return None
    data = check.mapping(body, path, _V2_SIGNAL_KEYS)
    if not isinstance(body, Mapping):
        if body is None:
            check.problem(path, "needs warn and critical")
        return None
    warn, critical = _warn_critical(check, data, path)
    max_score = check.number(data, "maxScore", path, 100.0, minimum=0, maximum=100)
    min_events = check.integer(data, "minEvents", path, 0, 0)
    smoothing = _smoothing(check, data["smoothing"], f"{path}.smoothing") if "smoothing" in data else None
    return SignalRule(warn=warn, critical=critical, max_score=max_score, min_events=min_events, smoothing=smoothing)


def _dimensions(check: _Checker, raw: object) -> tuple[Dimension, ...]:
    data = check.mapping(raw, "dimensions", None)
    if not data:
        check.problem("dimensions", "at least one dimension with one signal rule is required, e.g. cpu: {signals: ...}")
        return ()
    if len(data) > MAX_DIMENSIONS:
        check.problem("dimensions", f"at most {MAX_DIMENSIONS} dimensions are allowed, got {len(data)}")
    placed: dict[str, str] = {}
    out: list[Dimension] = []
    for name, body in data.items():
        path = f"dimensions.{name}"
        if not isinstance(name, str) or not _DIMENSION_NAME.fullmatch(name):
            check.problem(path, "a dimension name is a letter followed by letters or digits (at most 32), e.g. cpu")
            continue
        raw_signals = check.mapping(check.mapping(body, path, _DIMENSION_KEYS).get("signals"), f"{path}.signals", None)
        if not raw_signals:
            check.problem(f"{path}.signals", "list at least one signal rule (signal: {warn: ..., critical: ...})")
        signals: dict[str, SignalRule] = {}
        for signal, signal_body in raw_signals.items():
            where = f"{path}.signals.{signal}"
            if str(signal) in placed:
                check.problem(where, f"already in dimension {placed[str(signal)]}; a signal belongs to one dimension")
                continue
            rule = _signal_rule(check, str(signal), signal_body, where)
            if rule is not None:
                placed[str(signal)] = name
                signals[str(signal)] = rule
        out.append(Dimension(name=name, signals=signals))
    if placed and not any(r.max_score > 0 for d in out for r in d.signals.values()):
        check.problem("dimensions", "every maxScore is 0; let at least one signal score")
    return tuple(out)


def _levels(check: _Checker, raw: object) -> LevelCutoffs:
    data = check.mapping(raw, "levels", _LEVEL_KEYS)
    low = check.number(data, "low", "levels", 25.0, minimum=0, maximum=100, exclusive_minimum=True)
    medium = check.number(data, "medium", "levels", 50.0, minimum=0, maximum=100)
    high = check.number(data, "high", "levels", 75.0, minimum=0, maximum=100)
    if all(math.isfinite(v) for v in (low, medium, high)) and not low < medium < high:
        check.problem("levels", f"cut-offs must rise: low ({low:g}) < medium ({medium:g}) < high ({high:g})")
    return LevelCutoffs(low=low, medium=medium, high=high)


def _hysteresis(check: _Checker, raw: object) -> Hysteresis:
    data = check.mapping(raw, "hysteresis", _HYSTERESIS_KEYS)
    return Hysteresis(
        raise_after=check.integer(data, "raiseAfter", "hysteresis", _RAISE_AFTER, 1),
        lower_after=check.integer(data, "lowerAfter", "hysteresis", _LOWER_AFTER, 1),
    )


def _staleness(check: _Checker, raw: object) -> Staleness:
    data = check.mapping(raw, "staleness", _STALENESS_KEYS)
    stale = check.number(data, "staleAfterSeconds", "staleness", 30.0, minimum=0, exclusive_minimum=True)
    forget = check.number(data, "forgetAfterSeconds", "staleness", 600.0, minimum=0, exclusive_minimum=True)
    if math.isfinite(stale) and math.isfinite(forget) and forget <= stale:
        check.problem(
            "staleness.forgetAfterSeconds",
            f"must be greater than staleAfterSeconds ({stale:g}), got {forget:g}",
        )
    return Staleness(stale_after_seconds=stale, forget_after_seconds=forget)


_DEFAULT_GUARD = GuardRules()
_DEFAULT_POLICY = WorkloadPolicy()


def _guard(check: _Checker, raw: object) -> tuple[GuardRules | None, WorkloadPolicy]:
    if raw is None:
        return None, WorkloadPolicy()
    data = check.mapping(raw, "guard", _GUARD_KEYS)
    values: dict[str, Any] = {}
    for key, field_name in _GUARD_NUMBERS.items():
        if key == "calmIntervals":
            values[field_name] = check.integer(data, key, "guard", _DEFAULT_GUARD.calm_intervals, 1)
        elif key in data:
            values[field_name] = check.number(data, key, "guard", None)
    policy = WorkloadPolicy(
        offline_qos_classes=_names(check, data, "offlineQosClasses", _DEFAULT_POLICY.offline_qos_classes, QOS_CLASSES),
        offline_runtime_classes=_names(check, data, "offlineRuntimeClasses", _DEFAULT_POLICY.offline_runtime_classes),
    )
    if any(not math.isfinite(v) for v in values.values()):
        return None, policy
    try:
        return GuardRules(**values), policy
    except ConfigError as exc:
        check.problem("guard", str(exc))
        return None, policy


def _names(
    check: _Checker, data: Mapping[str, Any], key: str, default: tuple[str, ...], choices: tuple[str, ...] = ()
) -> tuple[str, ...]:
    value = data.get(key, list(default))
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        check.problem(f"guard.{key}", f"expected a list of names, got {_type_name(value)} {value!r}")
        return default
    for name in value:
        if choices and name not in choices:
            check.problem(f"guard.{key}", f"{name!r} is not a QoS class; expected some of {', '.join(choices)}")
    return tuple(value)


MAX_VERSION_LENGTH = 128
"""Longest rules version: the report's ``analyzer.rulesVersion`` (CRD ``maxLength``)."""


def _version(check: _Checker, doc: Mapping[str, Any]) -> str:
    version = doc.get("version")
    if isinstance(version, int | float) and not isinstance(version, bool):
        version = str(version)
    if not isinstance(version, str) or not version.strip():
        check.problem("version", 'is required; set a non-empty string such as "2026.12.1"')
        return ""
    if len(version) > MAX_VERSION_LENGTH:
        check.problem(
            "version", f"is {len(version)} characters long; keep it within {MAX_VERSION_LENGTH} (reports show it)"
        )
        return ""
    return version


def _format(check: _Checker, doc: Mapping[str, Any]) -> int:
    """The document's format: ``format:`` if given, else 1 for a flat ``signals:`` map, else 2."""
    if "format" not in doc:
        return 1 if "signals" in doc and "dimensions" not in doc else RULES_FORMAT
    value = doc["format"]
    if value in (1, RULES_FORMAT) and not isinstance(value, bool):
        return int(value)
    check.problem("format", f"must be {RULES_FORMAT} (or 1 for the flat signals form), got {value!r}")
    return RULES_FORMAT


def _format1(check: _Checker, doc: Mapping[str, Any]) -> tuple[tuple[Dimension, ...], tuple[str, ...]]:
    """A format-1 ``signals:`` map placed into the default dimensions, and notes on what changed."""
    raw = check.mapping(doc.get("signals"), "signals", SIGNAL_NAMES)
    if not raw:
        check.problem("signals", f"at least one signal rule is required; known signals: {', '.join(SIGNAL_NAMES)}")
    notes = [
        "format 1 (flat signals) read as format 2: each signal now scores in its resource dimension "
        "and the node is as bad as its worst dimension; convert with `mco rules migrate`"
    ]
    grouped: dict[str, dict[str, SignalRule]] = {}
    for name, body in raw.items():
        if name not in SIGNAL_NAMES:
            continue
        path = f"signals.{name}"
        data = check.mapping(body, path, _V1_SIGNAL_KEYS)
        if not isinstance(body, Mapping):
            continue
        warn, critical = _warn_critical(check, data, path)
        weight = check.number(data, "weight", path, 1.0, minimum=0)
        min_events = check.integer(data, "minEvents", path, 0, 0)
        if weight == 0:
            notes.append(f"{path}: weight 0 switched the signal off; it is left out")
            continue
        if weight != 1:
            notes.append(f"{path}: weight {weight:g} dropped (format 2 takes each dimension's worst signal)")
        dimension = DEFAULT_DIMENSIONS[name]
        grouped.setdefault(dimension, {})[name] = SignalRule(warn=warn, critical=critical, min_events=min_events)
    order = list(dict.fromkeys(DEFAULT_DIMENSIONS.values()))
    dims = tuple(Dimension(name, grouped[name]) for name in order if name in grouped)
    if raw and not dims:
        check.problem("signals", "every weight is 0; give at least one signal a positive weight")
    return dims, tuple(notes)


def parse_rules(text: str, *, source: str = "rules.yaml") -> DetectionRules:
    """Parse and validate a rules document (format 2, or format 1 converted).

    Raises :class:`RulesError` with every problem found, each naming the field.
    """
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RulesError([f"not valid YAML: {exc}"], source=source) from exc
    return rules_from_mapping(doc, source=source)


def rules_from_mapping(doc: object, *, source: str = "rules") -> DetectionRules:
    """Validate an already-decoded rules document (for Ansible variables rendered as JSON)."""
    check = _Checker()
    if not isinstance(doc, Mapping):
        raise RulesError(
            [f"the document must be a mapping with keys {', '.join(_V2_TOP)}; got {_type_name(doc)}"],
            source=source,
        )
    fmt = _format(check, doc)
    notes: tuple[str, ...] = ()
    guard, workloads = _guard(check, doc.get("guard")) if fmt != 1 else (None, WorkloadPolicy())
    if fmt == 1:
        check.mapping(doc, "", _V1_TOP)
        dimensions, notes = _format1(check, doc)
        combine = "compound"
    else:
        check.mapping(doc, "", _V2_TOP)
        dimensions = _dimensions(check, doc.get("dimensions"))
        combine = check.choice(doc, "combine", "", "compound", COMBINE_METHODS)
    rules = DetectionRules(
        version=_version(check, doc),
        dimensions=dimensions,
        levels=_levels(check, doc.get("levels")),
        combine=combine,
        smoothing=_smoothing(check, doc.get("smoothing")),
        hysteresis=_hysteresis(check, doc.get("hysteresis")),
        staleness=_staleness(check, doc.get("staleness")),
        format=fmt,
        migration_notes=notes,
        guard=guard,
        workloads=workloads,
    )
    if check.problems:
        raise RulesError(check.problems, source=source)
    return rules


def _smoothing_doc(smoothing: Smoothing) -> dict[str, Any]:
    out: dict[str, Any] = {"method": smoothing.method, "alpha": smoothing.alpha}
    if smoothing.method == "window":
        out["window"] = smoothing.window
    return out


def _signal_doc(rule: SignalRule) -> dict[str, Any]:
    out: dict[str, Any] = {"warn": rule.warn, "critical": rule.critical}
    if rule.max_score != 100.0:
        out["maxScore"] = rule.max_score
    if rule.min_events:
        out["minEvents"] = rule.min_events
    if rule.smoothing is not None:
        out["smoothing"] = _smoothing_doc(rule.smoothing)
    return out


def rules_to_mapping(rules: DetectionRules) -> dict[str, Any]:
    """``rules`` as a format-2 document (numbers as floats; parses back to equal rules)."""
    out: dict[str, Any] = {
        "format": RULES_FORMAT,
        "version": rules.version,
        "dimensions": {
            dim.name: {"signals": {name: _signal_doc(rule) for name, rule in dim.signals.items()}}
            for dim in rules.dimensions
        },
        "levels": {"low": rules.levels.low, "medium": rules.levels.medium, "high": rules.levels.high},
        "combine": rules.combine,
        "smoothing": _smoothing_doc(rules.smoothing),
        "hysteresis": {"raiseAfter": rules.hysteresis.raise_after, "lowerAfter": rules.hysteresis.lower_after},
        "staleness": {
            "staleAfterSeconds": rules.staleness.stale_after_seconds,
            "forgetAfterSeconds": rules.staleness.forget_after_seconds,
        },
    }
    if rules.guard is not None:
        guard: dict[str, Any] = {key: getattr(rules.guard, name) for key, name in _GUARD_NUMBERS.items()}
        guard["offlineQosClasses"] = list(rules.workloads.offline_qos_classes)
        guard["offlineRuntimeClasses"] = list(rules.workloads.offline_runtime_classes)
        out["guard"] = guard
    return out


def rules_to_yaml(rules: DetectionRules, *, source: str = "rules.yaml") -> str:
    """``rules`` as a format-2 YAML document (``mco rules migrate``); :attr:`DetectionRules.migration_notes`
    say what converting a format-1 document changed."""
    body = yaml.safe_dump(rules_to_mapping(rules), sort_keys=False, default_flow_style=False)
    return f"---\n# converted by `mco rules migrate` from {source} (format {rules.format})\n{body}"


def default_rules_text() -> str:
    """The documented default rules shipped with the package."""
    return resources.files("mco_py").joinpath("data/rules.yaml").read_text(encoding="utf-8")


def default_rules() -> DetectionRules:
    """The default rules, parsed."""
    return parse_rules(default_rules_text(), source="default rules.yaml")
