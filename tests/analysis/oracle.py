"""Plain reference implementations of the scoring rules, for property tests only.

The scorer computes the same figures in one pass while it smooths; these say the
rules the slow, obvious way so the two can be held equal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from mco_py.analysis.rules import DetectionRules, LevelCutoffs, SignalRule
from mco_py.model import Level


def sub_score(value: float, rule: SignalRule) -> float:
    """0 at or below warn, 100 at or above critical, linear between; then capped at maxScore."""
    if value <= rule.warn:
        raw = 0.0
    elif value >= rule.critical:
        raw = 100.0
    else:
        raw = 100.0 * (value - rule.warn) / (rule.critical - rule.warn)
    return min(raw, rule.max_score)


def dimension_scores(values: Mapping[str, float], rules: DetectionRules) -> dict[str, float]:
    """Every dimension's score: the highest sub-score of its present, scored signals (0 if none)."""
    out: dict[str, float] = {}
    for dim in rules.dimensions:
        subs = [sub_score(values[name], rule) for name, rule in dim.signals.items() if name in values]
        out[dim.name] = max(subs, default=0.0)
    return out


def combine(scores: Sequence[float], cutoffs: LevelCutoffs, *, compound: bool) -> float:
    """The worst dimension; with compound, two or more at or above low combine as independent chances."""
    worst = max(scores, default=0.0)
    elevated = [s for s in scores if s >= cutoffs.low]
    if not compound or len(elevated) < 2:
        return worst
    return max(worst, 100.0 * (1.0 - math.prod(1.0 - s / 100.0 for s in elevated)))


def scorable(values: Mapping[str, float], rules: DetectionRules) -> bool:
    """True when some present signal has a rule that scores."""
    return any(name in values and rule.max_score > 0 for name, rule in rules.signals.items())


def node_score(values: Mapping[str, float], rules: DetectionRules) -> float | None:
    """The node score of (already smoothed) ``values``; None when nothing can be scored."""
    if not scorable(values, rules):
        return None
    return combine(list(dimension_scores(values, rules).values()), rules.levels, compound=rules.combine == "compound")


def level_of(score: float, cutoffs: LevelCutoffs) -> Level:
    """The raw level of a score by the cut-offs."""
    if score >= cutoffs.high:
        return Level.HIGH
    if score >= cutoffs.medium:
        return Level.MEDIUM
    if score >= cutoffs.low:
        return Level.LOW
    return Level.NONE


def reason_line(name: str, value: float, rule: SignalRule, dimension: str) -> str:
    """The reason line of one signal above warn."""
    capped = f", capped at {rule.max_score:g}" if rule.max_score < 100 else ""
    if value >= rule.critical:
        return f"{name}={value:.4g} ≥ critical {rule.critical:g} ({dimension} sub-score 100{capped})"
    raw = 100.0 * (value - rule.warn) / (rule.critical - rule.warn)
    return (
        f"{name}={value:.4g} > warn {rule.warn:g}, < critical {rule.critical:g} "
        f"({dimension} sub-score {raw:.0f}{capped})"
    )


def reason_lines(values: Mapping[str, float], rules: DetectionRules) -> list[str]:
    """Lines of the scored signals above warn, the highest capped sub-score first (stable)."""
    hot = [
        (sub_score(value, rules.signals[name]), reason_line(name, value, rules.signals[name], rules.dimension_of[name]))
        for name, value in values.items()
        if name in rules.signals and rules.signals[name].max_score > 0 and value > rules.signals[name].warn
    ]
    hot.sort(key=lambda item: item[0], reverse=True)
    return [line for _, line in hot]
