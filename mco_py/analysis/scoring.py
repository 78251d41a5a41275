"""Interference scoring: samples in, per-node levels out. Pure: no I/O, no clock of its own.

How a node is judged (the numbers come from :class:`~mco_py.analysis.rules.DetectionRules`):

1. Each signal present in a sample is smoothed per node (EWMA or a moving window, the
   signal's own smoothing or the document's). A signal whose window had fewer events than
   its rule's ``minEvents`` is not judged for that sample (it counts as absent).
2. Each smoothed signal with a rule gets a sub-score: 0 at ``warn``, rising linearly to
   100 at ``critical``, clamped to 0-100 and capped at the rule's ``maxScore``.
3. Each dimension scores its worst signal (the highest sub-score); absent signals drop
   out, so a missing signal never raises anything.
4. The node score combines the dimensions (:func:`combine_dimensions`): the worst one, and
   with ``combine: compound`` the dimensions at or above ``levels.low`` add up as
   ``100 * (1 - prod(1 - score / 100))`` (two at 50 make 75). It maps to a raw level by
   the cut-offs (None < low <= Low < medium <= Medium < high <= High).
5. Hysteresis, one assessment per accepted sample: the level rises once the last
   ``raiseAfter`` raw levels are all above None, to the level that all but one of the
   newest ``raiseAfter - 1`` reached, when that is above it (the first assessment of a
   run usually covers part of an interval, so it counts for the run's length, not its
   height; one more odd assessment, a load building up or a dip, is tolerated); it falls
   to the highest raw level of the last ``lowerAfter`` assessments when that is below it.
   A worse input never gives a lower level.
   A node starts at None (also after being stale). A sample with no signal that can be
   scored counts as None for the hysteresis.
   The score a node is reported with never reads below the cut-off of the level it holds
   (:meth:`~mco_py.analysis.rules.LevelCutoffs.held`): a node held at High while its raw score
   falls reports ``levels.high`` until the level falls, so schedulers, which score by it,
   keep away from it as long as its level says it is hot. The reasons give the raw score.
6. A node with no sample for ``staleAfterSeconds`` (analyzer clock) is Unknown; after
   ``forgetAfterSeconds`` it leaves the report. A node whose newest sample has no signal
   that can be scored is Unknown too.

Time is always passed in (``now``, seconds since the epoch), so results are deterministic.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import NamedTuple

from mco_py.analysis.reasons import LazyReasons, NodeFacts, reasons_of, rule_texts
from mco_py.analysis.rules import RANKED_LEVELS, DetectionRules, LevelCutoffs
from mco_py.model import (
    NO_DIMENSIONS,
    SIGNAL_NAMES,
    DimensionScore,
    Level,
    NodeAssessment,
    Report,
    Sample,
    round_to,
)

KNOWN_SIGNALS = frozenset(SIGNAL_NAMES)


def combine_dimensions(scores: Sequence[float], cutoffs: LevelCutoffs, *, compound: bool) -> float:
    """The node score of its dimension scores (each 0-100).

    ``compound=False``: the worst dimension. ``compound=True``: the dimensions at or above
    ``cutoffs.low`` also add up, ``100 * (1 - prod(1 - s / 100))``, never below the worst one
    (one dimension alone keeps its score; two at 50 make 75). Monotone in every dimension, and
    leaving a dimension out never raises it.
    """
    worst = max(scores, default=0.0)
    if not compound or worst < cutoffs.low:
        return worst
    calm = 1.0
    elevated = 0
    for score in scores:
        if score >= cutoffs.low:
            calm *= 1.0 - score / 100.0
            elevated += 1
    if elevated < 2:
        return worst
    return min(100.0, max(worst, 100.0 * (1.0 - calm)))


def rise_level(ranks: Sequence[int]) -> int:
    """The level a run rises to, from the ranks of its newest ``raiseAfter - 1`` assessments: the level
    all of them reached but one (all of them when there are fewer than three). One odd assessment, a
    load still building up or a dip, neither holds the rise back nor splits it in two."""
    ordered = sorted(ranks)
    return ordered[1] if len(ordered) >= 3 else ordered[0]


def _capped_sub_score(value: float, warn: float, critical: float, span: float, cap: float) -> float:
    """The sub-score of ``value`` above ``warn``: linear to 100 at ``critical``, at most ``cap``."""
    return min(cap, 100.0 if value >= critical else 100.0 * (value - warn) / span)


class _Spec(NamedTuple):
    """A known signal's rule as the hot loop reads it (a tuple: it unpacks in one step)."""

    min_events: int
    warn: float
    critical: float
    span: float
    """critical - warn"""
    cap: float
    """maxScore; 0: unscored"""
    dimension: int
    """The dimension's index; -1: none"""
    alpha: float
    """EWMA alpha; 0: a moving window"""
    window: int


def _signal_specs(rules: DetectionRules) -> dict[str, _Spec]:
    """Every known signal's :data:`_Spec` (a signal without a rule is smoothed, never judged nor scored)."""
    index = {dim.name: i for i, dim in enumerate(rules.dimensions)}
    out: dict[str, _Spec] = {}
    for name in SIGNAL_NAMES:
        smoothing = rules.smoothing_of(name)
        alpha = smoothing.alpha if smoothing.method == "ewma" else 0.0
        rule = rules.signals.get(name)
        if rule is None:
            out[name] = _Spec(0, 0.0, 0.0, 0.0, 0.0, -1, alpha, smoothing.window)
        else:
            dim = index[rules.dimension_of[name]]
            span = rule.critical - rule.warn
            out[name] = _Spec(
                rule.min_events, rule.warn, rule.critical, span, rule.max_score, dim, alpha, smoothing.window
            )
    return out


def _window_mean(node: _Node, name: str, value: float, size: int) -> float:
    """The mean of the node's last ``size`` values of ``name``, ``value`` included."""
    window = node.windows.get(name)
    if window is None:
        window = node.windows[name] = deque(maxlen=size)
    window.append(value)
    return sum(window) / len(window)


@dataclass(frozen=True, slots=True)
class LevelChange:
    """A node's level moved; returned by :meth:`Scorer.observe` for logging."""

    node: str
    old: Level | None
    """None for a node seen for the first time (or again after it was stale)."""
    new: Level
    score: float
    reasons: tuple[str, ...]
    dominant: str = ""
    """The worst dimension now (empty when every dimension scores 0)."""


class _Node:
    """Mutable per-node state; private to :class:`Scorer`."""

    __slots__ = (
        "absent",
        "assessment",
        "changed_at",
        "changed_how",
        "dimensions",
        "dominant",
        "ewma",
        "history",
        "hot",
        "last_sample_time",
        "last_seen",
        "rank",
        "scorable",
        "score",
        "unjudged",
        "values",
        "windows",
    )

    def __init__(self, history_len: int) -> None:
        self.ewma: dict[str, float] = {}
        self.windows: dict[str, deque[float]] = {}
        self.values: dict[str, float] = {}
        """The newest smoothed values, rounded to 4 decimals as the report shows them (never mutated: replaced;
        the report's entries share it)."""
        self.hot: Sequence[tuple[str, float]] = ()
        """The scored values above warn in the newest sample, unrounded, in the sample's order: what the
        reasons quote (they must agree with the sub-scores, judged unrounded)."""
        self.dimensions: Mapping[str, DimensionScore] = NO_DIMENSIONS
        """The dimensions scoring above 0 in the newest sample (never mutated: replaced)."""
        self.dominant = ""
        """The worst of ``dimensions``; empty when there is none."""
        self.absent: Sequence[tuple[str, str]] = ()
        """The known signals absent from the newest sample, and why."""
        self.unjudged: Sequence[tuple[str, int]] = ()
        """The signals of the newest sample not judged for too few events, and their event counts."""
        self.history: deque[int] = deque(maxlen=history_len)
        self.rank = -1
        self.score = 0.0
        self.scorable = False
        self.last_sample_time = 0.0
        self.last_seen = 0.0
        self.changed_at = 0.0
        self.changed_how = ""
        self.assessment: NodeAssessment | None = None
        """The fresh (not stale) assessment, kept until the next sample or rules change."""


class Scorer:
    """Per-node smoothing, scoring, hysteresis and staleness. Not thread-safe: callers lock."""

    def __init__(self, rules: DetectionRules) -> None:
        self._rules = rules
        self._compile()
        self._nodes: dict[str, _Node] = {}
        self._order: list[tuple[str, _Node]] | None = None
        """Nodes sorted by name; None after a node came, went or was replaced (resumed after stale)."""

    def _compile(self) -> None:
        """What the hot loop reads of the rules in force."""
        rules = self._rules
        self._texts = rule_texts(rules)
        self._specs = _signal_specs(rules)
        self._dim_names = tuple(dim.name for dim in rules.dimensions)
        self._compound = rules.combine == "compound"

    @property
    def rules(self) -> DetectionRules:
        """The rules in force."""
        return self._rules

    def set_rules(self, rules: DetectionRules) -> None:
        """Switch rules; smoothing restarts where its settings changed, hysteresis keeps its history."""
        old = self._rules
        self._rules = rules
        self._compile()
        changed = [name for name in SIGNAL_NAMES if old.smoothing_of(name) != rules.smoothing_of(name)]
        history_len = self._history_len()
        self.drop_kept_assessments()  # reasons quote the rules
        for node in self._nodes.values():
            for name in changed:
                node.ewma.pop(name, None)
                node.windows.pop(name, None)
            if node.history.maxlen != history_len:
                node.history = deque(node.history, maxlen=history_len)

    def drop_kept_assessments(self) -> None:
        """Forget the assessments kept for unchanged nodes: the next :meth:`assess` builds every one anew."""
        for node in self._nodes.values():
            node.assessment = None

    def _history_len(self) -> int:
        return max(self._rules.hysteresis.raise_after, self._rules.hysteresis.lower_after)

    def __len__(self) -> int:
        return len(self._nodes)

    def forget_silent(self, now: float, silent_for: float) -> list[str]:
        """Forget every node without a sample for more than ``silent_for`` seconds; returns their names."""
        gone = [name for name, node in self._nodes.items() if now - node.last_seen > silent_for]
        for name in gone:
            del self._nodes[name]
        if gone:
            self._order = None
        return gone

    def observe(self, sample: Sample, now: float) -> LevelChange | None:
        """Take one accepted sample (received at ``now``); returns the level change it caused, if any.
        Signals whose name is unknown (a newer collector's) are ignored."""
        name = sample.node
        rules = self._rules
        node = self._nodes.get(name)
        resumed = node is not None and now - node.last_seen > rules.staleness.stale_after_seconds
        old_level = None
        if node is None or resumed:
            self._order = None
            node = _Node(self._history_len())
            self._nodes[name] = node
        else:
            old_level = self._level_of(node)
        node.last_seen = now
        node.assessment = None
        node.last_sample_time = max(node.last_sample_time, sample.timestamp)
        score = self._smooth(node, sample)
        node.scorable = score is not None
        if score is None:
            raw = 0  # nothing to judge: no evidence of interference (the level shows Unknown meanwhile)
        else:
            node.score = score
            raw = rules.levels.rank(score)
        node.history.append(raw)
        if node.rank < 0:  # a node starts at None and rises by the same rule as later
            node.rank = 0
            node.changed_how = "first assessment after the node was stale" if resumed else "first assessment"
            node.changed_at = now
        if raw != node.rank:  # an assessment at the current level moves nothing
            self._move(node, now)
        return self._change(name, node, old_level)

    def _smooth(self, node: _Node, sample: Sample) -> float | None:
        """Update the node's smoothed values and dimensions; note absent and unjudged signals; return
        the node score (None when no signal could be scored).

        The sub-scores and dimensions are the plain rules' (``tests/analysis/oracle.py``; a property
        test holds the two equal), computed here while each value is at hand. The values kept for the
        report are rounded here too, once per sample: cheaper than a copy per report of every node
        (the report's largest cost at 10,000 nodes: docs/benchmarks.md, "Report build and serialize").
        """
        specs = self._specs
        ewma = node.ewma
        events = sample.events
        smoothed: dict[str, float] = {}
        unjudged: list[tuple[str, int]] | None = None
        dims: list[float] | None = None  # made for the first signal above warn
        hot: list[tuple[str, float]] = []
        scored = False
        for name, sent in sample.values.items():
            spec = specs.get(name)
            if spec is None:
                continue  # a newer collector's signal: not stored, not scored
            min_events, warn, critical, span, cap, dim, alpha, window = spec
            if min_events and events:
                count = events.get(name)
                if count is not None and count < min_events:
                    unjudged = [*(unjudged or ()), (name, count)]
                    continue
            if alpha:
                prev = ewma.get(name)
                value = sent if prev is None else prev + alpha * (sent - prev)
                ewma[name] = value
            else:
                value = _window_mean(node, name, sent, window)
            smoothed[name] = round_to(value, 1e4)  # as the report shows it; the judgement below uses value
            if cap > 0:
                scored = True
                if value > warn:  # rare: most signals of most nodes are calm
                    if dims is None:
                        dims = [0.0] * len(self._dim_names)
                    hot.append((name, value))
                    dims[dim] = max(dims[dim], _capped_sub_score(value, warn, critical, span, cap))
        node.values = smoothed
        node.hot = hot or ()
        absent = sample.absent
        node.absent = [(n, why) for n, why in absent.items() if n in KNOWN_SIGNALS] if absent else ()
        node.unjudged = unjudged or ()
        return self._judge(node, dims) if scored else None

    def _judge(self, node: _Node, dims: Sequence[float] | None) -> float:
        """Set the node's dimensions from their scores (None: all 0) and return the node score."""
        if dims is None:  # the common calm node
            node.dimensions, node.dominant = NO_DIMENSIONS, ""
            return 0.0
        node.dimensions, node.dominant = self._dimension_scores(dims)
        return combine_dimensions(dims, self._rules.levels, compound=self._compound)

    def _dimension_scores(self, dims: Sequence[float]) -> tuple[Mapping[str, DimensionScore], str]:
        """The dimensions scoring above 0 (in rules order) and the worst of them (the first on ties)."""
        levels = self._rules.levels
        out: dict[str, DimensionScore] = {}
        worst, dominant = 0.0, ""
        for name, score in zip(self._dim_names, dims, strict=True):
            if score > 0.0:
                out[name] = DimensionScore(RANKED_LEVELS[levels.rank(score)], score)
                if score > worst:
                    worst, dominant = score, name
        return (out or NO_DIMENSIONS), dominant

    def _move(self, node: _Node, now: float) -> None:
        """Hysteresis (see the module doc): rise after raiseAfter assessments above None to the level of
        the newest raiseAfter - 1 (:func:`rise_level`); fall to the highest of the last lowerAfter."""
        hyst = self._rules.hysteresis
        hist = node.history
        n = len(hist)
        up_n, down_n = hyst.raise_after, hyst.lower_after
        up = -1
        if n >= up_n and min(itertools.islice(hist, n - up_n, n)) > 0:
            up = rise_level(list(itertools.islice(hist, n - max(1, up_n - 1), n)))
        if up > node.rank:
            node.rank = up
            node.changed_how = (
                f"raised after {up_n} assessment(s) above None, most of the newest {max(1, up_n - 1)} "
                f"at or above {RANKED_LEVELS[up].value}"
            )
            node.changed_at = now
            return
        if n < down_n:
            return
        down = max(itertools.islice(hist, n - down_n, n))
        if down < node.rank:
            node.rank = down
            node.changed_how = f"lowered after {down_n} assessment(s) at or below {RANKED_LEVELS[down].value}"
            node.changed_at = now

    def _change(self, name: str, node: _Node, old: Level | None) -> LevelChange | None:
        new = self._level_of(node)
        if new is old:
            return None
        score = self._rules.levels.held(node.score, node.rank)
        return LevelChange(name, old, new, score, self._reasons(node, headline=True), node.dominant)

    def _level_of(self, node: _Node) -> Level:
        if not node.scorable or node.rank < 0:
            return Level.UNKNOWN
        return RANKED_LEVELS[node.rank]

    def _reasons(self, node: _Node, *, headline: bool = False) -> tuple[str, ...]:
        """Why the node is where it is. None nodes list only signals above warn (keeps the report small)."""
        return reasons_of(self._facts(node), headline=headline)

    def _facts(self, node: _Node) -> NodeFacts:
        """What :func:`reasons_of` reads about ``node`` now (none of it is mutated later: see :class:`_Node`)."""
        return NodeFacts(
            rules=self._rules,
            texts=self._texts,
            scorable=node.scorable,
            rank=node.rank,
            score=node.score,
            values=node.values,
            hot=node.hot,
            unjudged=node.unjudged,
            absent=node.absent,
            changed_at=node.changed_at,
            changed_how=node.changed_how,
            dimensions=node.dimensions,
        )

    def _stale(self, name: str, node: _Node, silent: float) -> NodeAssessment:
        """The assessment of a node silent for ``silent`` seconds, past staleAfterSeconds."""
        stale_after = self._rules.staleness.stale_after_seconds
        last = self._level_of(node).value
        return NodeAssessment(
            name=name,
            level=Level.UNKNOWN,
            score=node.score,
            signals=node.values,
            last_sample_time=node.last_sample_time,
            reasons=(f"no sample for {silent:.0f}s (staleAfterSeconds {stale_after:g}); last level {last}",),
            dominant=node.dominant,
            dimensions=node.dimensions,
        )

    def assess(self, now: float, *, lazy_reasons: bool = False) -> tuple[list[NodeAssessment], list[str]]:
        """Every node's assessment at ``now`` (sorted by name), and the names forgotten just now.

        A node with no sample since the last call gets the very same assessment object
        back (callers may cache what they derive from it by identity); stale nodes get a
        new one each time (their reason quotes how long they have been silent).

        ``lazy_reasons``: the reasons of fresh assessments are formatted when first read
        (from the node's state now), not here — for callers that read few of them.
        """
        staleness = self._rules.staleness
        stale_after, forget_after = staleness.stale_after_seconds, staleness.forget_after_seconds
        quiet = min(stale_after, forget_after)  # one comparison for the usual fresh node
        out: list[NodeAssessment] = []
        forgotten: list[str] = []
        if self._order is None:
            self._order = sorted(self._nodes.items(), key=itemgetter(0))
        for name, node in self._order:
            silent = now - node.last_seen
            if silent > quiet:
                if silent > forget_after:
                    forgotten.append(name)
                    continue
                if silent > stale_after:
                    out.append(self._stale(name, node, silent))
                    continue
            out.append(node.assessment or self._renew(name, node, lazy_reasons))
        for name in forgotten:
            del self._nodes[name]
        if forgotten:
            self._order = None
        return out, forgotten

    def _renew(self, name: str, node: _Node, lazy_reasons: bool) -> NodeAssessment:
        """The fresh assessment of ``node`` after a sample or a rules change; kept on the node (for :meth:`assess`)."""
        score = node.score
        if node.scorable and node.rank >= 0:
            level = RANKED_LEVELS[node.rank]
            # the common calm node (nothing above warn, nothing unjudged) has nothing to say
            calm = node.rank == 0 and score <= 0 and not node.unjudged
            score = self._rules.levels.held(score, node.rank)
        else:
            level, calm = Level.UNKNOWN, False
        reasons: Sequence[str]
        if calm:
            reasons = ()
        elif lazy_reasons:
            reasons = LazyReasons(self._facts(node))
        else:
            reasons = self._reasons(node)
        item = NodeAssessment(
            name=name,
            level=level,
            score=score,
            signals=node.values,
            last_sample_time=node.last_sample_time,
            reasons=reasons,
            dominant=node.dominant,
            dimensions=node.dimensions,
        )
        node.assessment = item
        return item

    def report(self, now: float, *, identity: str, lazy_reasons: bool = False) -> tuple[Report, list[str]]:
        """The report at ``now`` and the names forgotten while building it (``lazy_reasons``: as for
        :meth:`assess`)."""
        nodes, forgotten = self.assess(now, lazy_reasons=lazy_reasons)
        return Report(
            last_update_time=now,
            analyzer_identity=identity,
            rules_version=self._rules.version,
            nodes=tuple(nodes),
        ), forgotten


def reversals(levels: Iterable[Level]) -> int:
    """How often a sequence of ranked levels changed direction (for tests and diagnostics)."""
    last_dir = 0
    prev: int | None = None
    count = 0
    for level in levels:
        if level is Level.UNKNOWN:
            continue
        rank = RANKED_LEVELS.index(level)
        if prev is not None and rank != prev:
            direction = 1 if rank > prev else -1
            if last_dir and direction != last_dir:
                count += 1
            last_dir = direction
        prev = rank
    return count
