"""Detection rules: the typed document and its validating loader.

:func:`parse_rules` turns YAML text into :class:`DetectionRules` or raises
:class:`~mco_py.errors.RulesError` listing every problem, each naming the field
(dotted path) and the fix. It never does I/O: callers read the file or the
ConfigMap and pass the text.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

from mco_py.errors import RulesError
from mco_py.model import SIGNAL_NAMES

SMOOTHING_METHODS = ("ewma", "window")


@dataclass(frozen=True, slots=True)
class SignalRule:
    """How one signal turns into a 0-100 sub-score."""

    warn: float
    """Value at which the sub-score starts rising from 0."""
    critical: float
    """Value at which the sub-score reaches 100."""
    weight: float = 1.0
    """Weight in the node score; 0 switches the signal off."""
    min_events: int = 0
    """Judge the signal only when its window had at least this many events (block I/O)."""


@dataclass(frozen=True, slots=True)
class LevelCutoffs:
    """Score cut-offs: None < low <= Low < medium <= Medium < high <= High."""

    low: float = 25.0
    medium: float = 50.0
    high: float = 75.0


@dataclass(frozen=True, slots=True)
class Smoothing:
    """Per-signal smoothing before scoring."""

    method: str = "ewma"
    """``ewma`` or ``window``."""
    alpha: float = 0.3
    """EWMA weight of the newest sample, 0 < alpha <= 1."""
    window: int = 5
    """Samples in the moving mean when ``method`` is ``window``."""


@dataclass(frozen=True, slots=True)
class Hysteresis:
    """Consecutive assessments needed before a level moves."""

    raise_after: int = 2
    """Assessments above the current level before it goes up."""
    lower_after: int = 5
    """Assessments below the current level before it goes down."""


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
    signals: Mapping[str, SignalRule] = field(default_factory=dict)
    """Rules by signal key; signals not listed are not scored."""
    levels: LevelCutoffs = LevelCutoffs()
    smoothing: Smoothing = Smoothing()
    hysteresis: Hysteresis = Hysteresis()
    staleness: Staleness = Staleness()


_TOP_KEYS = ("version", "signals", "levels", "smoothing", "hysteresis", "staleness")
_SIGNAL_KEYS = ("warn", "critical", "weight", "minEvents")
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

    def mapping(self, value: object, path: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problem(path, f"expected a mapping, got {_type_name(value)}")
            return {}
        for key in value:
            if not isinstance(key, str) or key not in allowed:
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


def _type_name(value: object) -> str:
    names = {str: "a string", list: "a list", dict: "a mapping", bool: "a boolean", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _signal_rules(check: _Checker, raw: object) -> dict[str, SignalRule]:
    signals: dict[str, SignalRule] = {}
    raw_signals = check.mapping(raw, "signals", SIGNAL_NAMES)
    if not raw_signals:
        check.problem("signals", f"at least one signal rule is required; known signals: {', '.join(SIGNAL_NAMES)}")
    for name, body in raw_signals.items():
        if name not in SIGNAL_NAMES:
            continue
        path = f"signals.{name}"
        if not isinstance(body, Mapping):
            check.mapping(body, path, _SIGNAL_KEYS)
            continue
        check.mapping(body, path, _SIGNAL_KEYS)
        warn = check.number(body, "warn", path, None, minimum=0)
        critical = check.number(body, "critical", path, None, minimum=0)
        weight = check.number(body, "weight", path, 1.0, minimum=0)
        min_events = check.integer(body, "minEvents", path, 0, 0)
        if math.isfinite(warn) and math.isfinite(critical) and critical <= warn:
            check.problem(path, f"critical ({critical:g}) must be greater than warn ({warn:g})")
        signals[name] = SignalRule(warn=warn, critical=critical, weight=weight, min_events=min_events)
    if signals and all(rule.weight == 0 for rule in signals.values()):
        check.problem("signals", "every weight is 0; give at least one signal a positive weight")
    return signals


def _levels(check: _Checker, raw: object) -> LevelCutoffs:
    data = check.mapping(raw, "levels", _LEVEL_KEYS)
    low = check.number(data, "low", "levels", 25.0, minimum=0, maximum=100, exclusive_minimum=True)
    medium = check.number(data, "medium", "levels", 50.0, minimum=0, maximum=100)
    high = check.number(data, "high", "levels", 75.0, minimum=0, maximum=100)
    if all(math.isfinite(v) for v in (low, medium, high)) and not low < medium < high:
        check.problem("levels", f"cut-offs must rise: low ({low:g}) < medium ({medium:g}) < high ({high:g})")
    return LevelCutoffs(low=low, medium=medium, high=high)


def _smoothing(check: _Checker, raw: object) -> Smoothing:
    data = check.mapping(raw, "smoothing", _SMOOTHING_KEYS)
    method = data.get("method", "ewma")
    if method not in SMOOTHING_METHODS:
        check.problem("smoothing.method", f"must be one of {', '.join(SMOOTHING_METHODS)}, got {method!r}")
    alpha = check.number(data, "alpha", "smoothing", 0.3, minimum=0, maximum=1, exclusive_minimum=True)
    window = check.integer(data, "window", "smoothing", 5, 1)
    return Smoothing(method=str(method), alpha=alpha, window=window)


def _hysteresis(check: _Checker, raw: object) -> Hysteresis:
    data = check.mapping(raw, "hysteresis", _HYSTERESIS_KEYS)
    return Hysteresis(
        raise_after=check.integer(data, "raiseAfter", "hysteresis", 2, 1),
        lower_after=check.integer(data, "lowerAfter", "hysteresis", 5, 1),
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


def parse_rules(text: str, *, source: str = "rules.yaml") -> DetectionRules:
    """Parse and validate a rules document.

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
            [f"the document must be a mapping with keys {', '.join(_TOP_KEYS)}; got {_type_name(doc)}"],
            source=source,
        )
    check.mapping(doc, "", _TOP_KEYS)

    version = doc.get("version")
    if isinstance(version, int | float) and not isinstance(version, bool):
        version = str(version)
    if not isinstance(version, str) or not version.strip():
        check.problem("version", 'is required; set a non-empty string such as "2026.11.1"')
        version = ""
    rules = DetectionRules(
        version=str(version),
        signals=_signal_rules(check, doc.get("signals")),
        levels=_levels(check, doc.get("levels")),
        smoothing=_smoothing(check, doc.get("smoothing")),
        hysteresis=_hysteresis(check, doc.get("hysteresis")),
        staleness=_staleness(check, doc.get("staleness")),
    )
    if check.problems:
        raise RulesError(check.problems, source=source)
    return rules


def default_rules_text() -> str:
    """The documented default rules shipped with the package."""
    return resources.files("mco_py").joinpath("data/rules.yaml").read_text(encoding="utf-8")


def default_rules() -> DetectionRules:
    """The default rules, parsed."""
    return parse_rules(default_rules_text(), source="default rules.yaml")
