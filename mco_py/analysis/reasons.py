"""Why a node is where it is: the report's reason lines, from the scorer's facts about one node.

Pure. The scorer hands over a :class:`NodeFacts` (nothing in it is mutated later), and the lines are
formatted from it at once or, for reports that drop most nodes' detail, when first read
(:class:`LazyReasons`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import overload

import msgspec

from mco_py.analysis.rules import RANKED_LEVELS, DetectionRules, SignalRule
from mco_py.model import ROUNDER, DimensionScore, format_time

MAX_REASONS = 32
MAX_REASON_CHARS = 512

_RANK_TEXT = tuple(level.value for level in RANKED_LEVELS)
_PERCENTS = tuple(str(i) for i in range(101))


def whole(x: float) -> str:
    """``f"{x:.0f}"``, from a table for 0 <= x <= 100 (sub-scores, dimension scores): both round half to even.
    A negative zero, which the table also takes, prints as ``0``."""
    return _PERCENTS[int(x + ROUNDER - ROUNDER)] if 0.0 <= x <= 100.0 else f"{x:.0f}"


class RuleTexts:
    """The parts of a reason that depend only on the rule (formatted once per rules version)."""

    __slots__ = ("between_line", "cap", "critical_tail", "critical_value", "span", "tail", "warn")

    def __init__(self, rule: SignalRule, dimension: str) -> None:
        # a reason line: f"{name}={value:.4g}{critical_tail}" or f"{name}={value:.4g}{between_line}{sub}{tail}"
        capped = f", capped at {rule.max_score:g}" if rule.max_score < 100 else ""
        self.tail = f"{capped})"
        self.between_line = f" > warn {rule.warn:g}, < critical {rule.critical:g} ({dimension} sub-score "
        self.critical_tail = f" ≥ critical {rule.critical:g} ({dimension} sub-score 100{self.tail}"
        self.warn = rule.warn
        self.critical_value = rule.critical
        self.span = rule.critical - rule.warn
        self.cap = rule.max_score


def rule_texts(rules: DetectionRules) -> dict[str, RuleTexts]:
    """Texts of every rule that scores (positive ``maxScore``), by signal name."""
    return {
        name: RuleTexts(rule, rules.dimension_of[name]) for name, rule in rules.signals.items() if rule.max_score > 0
    }


def hot_reasons(values: Iterable[tuple[str, float]], texts: Mapping[str, RuleTexts]) -> list[str]:
    """One line per scored signal above warn among ``values`` (name, value pairs), the highest sub-score
    first (ties in the order of ``values``), e.g. ``psiCpuSomeRate=78.5 ≥ critical 50 (cpu sub-score 100)``."""
    hot: list[tuple[float, str]] = []
    for name, value in values:
        text = texts.get(name)
        if text is None or value <= text.warn:
            continue
        if value >= text.critical_value:
            hot.append((min(100.0, text.cap), f"{name}={value:.4g}{text.critical_tail}"))
        else:
            sub = 100.0 * (value - text.warn) / text.span
            hot.append((min(sub, text.cap), f"{name}={value:.4g}{text.between_line}{whole(sub)}{text.tail}"))
    if len(hot) > 1:
        hot.sort(key=itemgetter(0), reverse=True)  # stable: ties keep the order of ``values``
    return [line for _, line in hot]


class NodeFacts(msgspec.Struct, frozen=True):
    """A node's state as its reasons read it: the rules and texts in force, then the node's own fields."""

    rules: DetectionRules
    texts: Mapping[str, RuleTexts]
    scorable: bool
    """Some signal of the newest sample could be scored."""
    rank: int
    """The held level's rank in :data:`RANKED_LEVELS`."""
    score: float
    """The raw node score of the newest sample."""
    values: Mapping[str, float]
    """The smoothed values, as shown (4 decimals)."""
    hot: Sequence[tuple[str, float]]
    """The scored values above warn, unrounded."""
    unjudged: Sequence[tuple[str, int]]
    """Signals not judged for too few events: name, events."""
    absent: Sequence[tuple[str, str]]
    """Signals absent: name, why."""
    changed_at: float
    changed_how: str
    dimensions: Mapping[str, DimensionScore]
    """The dimensions scoring above 0."""


def _unjudged(name: str, events: int, rules: DetectionRules) -> str:
    rule = rules.signals.get(name)
    need = rule.min_events if rule else 0
    return f"{name} not judged: {events} events < minEvents {need}"


def _dimensions_text(dimensions: Mapping[str, DimensionScore]) -> str:
    """``cpu High 100, io Low 31`` (worst first)."""
    ranked = sorted(dimensions.items(), key=_score_of, reverse=True)
    return ", ".join([f"{name} {d.level._value_} {whole(d.score)}" for name, d in ranked])


def _score_of(item: tuple[str, DimensionScore]) -> float:
    return item[1].score


_CLASS_PAIRS = tuple(
    (resource, f"psiOnline{resource.capitalize()}SomeRate", f"psiOffline{resource.capitalize()}SomeRate")
    for resource in ("cpu", "io", "memory")
)


def _who_line(values: Mapping[str, float]) -> str:
    """Who suffers and who causes it, from the workload classes' stall shares (collectors with
    classes), e.g. ``stalled, online / offline: cpu 34 / 61 %, io 0 / 12 %``; empty without them.
    ``values`` as the report shows them (4 decimals): the whole percents agree with the signals shown."""
    parts = []
    for resource, online, offline in _CLASS_PAIRS:
        on, off = values.get(online), values.get(offline)
        if on is None and off is None:
            continue
        parts.append(f"{resource} {'-' if on is None else f'{on:.0f}'} / {'-' if off is None else f'{off:.0f}'} %")
    return f"stalled, online / offline: {', '.join(parts)}" if parts else ""


def _headline(facts: NodeFacts) -> list[str]:
    """The level, since when and why, the raw score and the dimensions; who stalls whom."""
    levels = facts.rules.levels
    rank, score = facts.rank, facts.score
    raw = levels.rank(score)
    line = (
        f"level {_RANK_TEXT[rank]} since {format_time(facts.changed_at)} "
        f"({facts.changed_how}); score {score:.1f} now (raw level {_RANK_TEXT[raw]})"
    )
    if raw < rank:
        line += f", reported as {levels.held(score, rank):g} while the level holds"
    if facts.dimensions:
        line += f"; dimensions now: {_dimensions_text(facts.dimensions)}"
    who = _who_line(facts.values)
    return [line, who] if who else [line]


def reasons_of(facts: NodeFacts, *, headline: bool = False) -> tuple[str, ...]:
    """Why the node is where it is. None nodes list only signals above warn (keeps the report small)."""
    if facts.scorable and facts.rank == 0 and facts.score <= 0 and not facts.unjudged and not headline:
        return ()  # the common calm node: nothing above warn, nothing to say
    rules = facts.rules
    out: list[str] = []
    if not facts.scorable:
        out.append("no signal with a rule could be scored in the newest sample")
        out.extend(_unjudged(name, count, rules) for name, count in facts.unjudged)
        out.extend(f"{name} absent: {reason or 'no reason given'}" for name, reason in facts.absent)
    else:
        if facts.rank > 0 or headline:
            out += _headline(facts)
        out += hot_reasons(facts.hot, facts.texts)
        out.extend(_unjudged(name, count, rules) for name, count in facts.unjudged)
    if len(out) > MAX_REASONS:
        del out[MAX_REASONS:]
    if max(map(len, out), default=0) <= MAX_REASON_CHARS:
        return tuple(out)
    return tuple(r if len(r) <= MAX_REASON_CHARS else r[:MAX_REASON_CHARS] for r in out)


class LazyReasons(Sequence[str]):
    """A fresh assessment's reasons, formatted when first read from the node's facts as they were when
    assessed. In cluster mode the size budget drops the detail of most nodes, whose reasons would
    otherwise be formatted for nothing.

    Equal to the tuple of the same lines (either way round), and pickles and hashes as one. Two
    threads reading at once both format the same lines.
    """

    __slots__ = ("_facts", "_lines")

    def __init__(self, facts: NodeFacts) -> None:
        self._facts: NodeFacts | None = facts
        self._lines: tuple[str, ...] = ()

    def _get(self) -> tuple[str, ...]:
        facts = self._facts
        if facts is not None:
            self._lines = reasons_of(facts)
            self._facts = None  # after the lines are in place: a reader seeing None finds them
        return self._lines

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._get()[index]

    def __len__(self) -> int:
        return len(self._get())

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyReasons):
            return self._get() == other._get()
        if isinstance(other, tuple):
            return self._get() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._get())

    def __repr__(self) -> str:
        return repr(self._get())

    def __reduce__(self) -> tuple[type[tuple[str, ...]], tuple[tuple[str, ...]]]:
        return tuple, (self._get(),)
