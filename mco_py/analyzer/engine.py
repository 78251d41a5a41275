"""The analyzer's state: accepts samples from any number of streams, builds reports.

Thread-safe: the gRPC loop, the report loop and the rules watcher share one engine.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mco_py.analysis.rules import DetectionRules
from mco_py.analysis.samples import InvalidSample, check_sample
from mco_py.analysis.scoring import LevelChange, Scorer
from mco_py.analyzer.metrics import AnalyzerMetrics
from mco_py.obs.process import gc_paused
from mco_py.report.builder import ReportBuilder
from mco_py.report.shards import ShardPlanner
from mco_py.report.size import Fitted
from mco_py.rpc import codec
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb

log = logging.getLogger(__name__)

#: Distinct rejection messages returned in one ack.
MAX_ACK_REASONS = 8


@dataclass(slots=True)
class Outcome:
    """What became of one batch."""

    accepted: int = 0
    rejected: int = 0
    reasons: dict[str, str] = field(default_factory=dict)
    """First message per rejection reason code."""
    counts: dict[str, int] = field(default_factory=dict)
    """Rejections per reason code."""

    def reject(self, exc: InvalidSample, count: int = 1) -> None:
        self.rejected += count
        self.counts[exc.reason] = self.counts.get(exc.reason, 0) + count
        if exc.reason not in self.reasons and len(self.reasons) < MAX_ACK_REASONS:
            self.reasons[exc.reason] = f"{exc.reason}: {exc}"[:512]

    def merge(self, later: Outcome) -> None:
        """Add ``later``'s rejections as if they had come after this outcome's (its acceptances are not added)."""
        self.rejected += later.rejected
        for reason, n in later.counts.items():
            self.counts[reason] = self.counts.get(reason, 0) + n
        for reason, message in later.reasons.items():
            if reason not in self.reasons and len(self.reasons) < MAX_ACK_REASONS:
                self.reasons[reason] = message


class Engine:
    """Scoring state for every node plus the bookkeeping around it."""

    def __init__(
        self,
        rules: DetectionRules,
        *,
        metrics: AnalyzerMetrics,
        identity: str,
        clock: Callable[[], float] = time.time,
        max_future_seconds: float = 10.0,
        max_age_seconds: float = 300.0,
        status_budget: int | None = None,
        shard_refresh_seconds: float | None = None,
        max_nodes: int = 65536,
    ) -> None:
        self._scorer = Scorer(rules)
        self._lock = threading.Lock()
        self._last_time: dict[str, float] = {}
        self.metrics = metrics
        self.identity = identity
        self.clock = clock
        self.max_future = max_future_seconds
        self.max_age = max_age_seconds
        self.status_budget = status_budget or None
        """Bytes the encoded report status may take (None: no limit)."""
        self.max_nodes = max_nodes
        self._next_room_scan = -math.inf
        shards = (
            ShardPlanner(self.status_budget, refresh_seconds=shard_refresh_seconds)
            if shard_refresh_seconds is not None and self.status_budget is not None
            else None
        )
        self._builder = ReportBuilder(self.status_budget, shards=shards)
        """Used only by :meth:`build_report` (one report thread)."""
        self.level_changed = threading.Event()
        """Set when a sample changed a node's level (the report loop writes early then)."""
        self.rules_generation = 0
        """Counts rules changes (streams re-send :meth:`send_early_thresholds` when it moves)."""
        self._thresholds = send_early_thresholds(rules)
        metrics.rules.info({"version": rules.version})

    @property
    def rules(self) -> DetectionRules:
        return self._scorer.rules

    def set_rules(self, rules: DetectionRules) -> None:
        with self._lock:
            self._scorer.set_rules(rules)
            self._thresholds = send_early_thresholds(rules)
            self.rules_generation += 1
        self.metrics.rules.info({"version": rules.version})

    def send_early_thresholds(self) -> tuple[int, dict[str, float]]:
        """The rules generation and the signal values above which collectors send at once."""
        with self._lock:
            return self.rules_generation, self._thresholds

    def accept_messages(
        self, messages: Iterable[pb.Sample], outcome: Outcome, *, allowed_nodes: frozenset[str] | None = None
    ) -> Outcome:
        """Decode, check and score ``messages`` one at a time, as they arrive; each rejected sample is
        counted in ``outcome`` by reason (decode errors listed before the others). Nothing outlives
        its message, so the garbage collector does not promote a batch's worth of objects."""
        now = self.clock()
        changes: list[LevelChange] = []
        late = Outcome()  # rejections after decoding: listed after the decode errors
        with self._lock:
            observe = self._scorer.observe
            last_time = self._last_time
            max_future, max_age = self.max_future, self.max_age
            for msg in messages:
                try:
                    sample = codec.sample_from_proto(msg)
                except InvalidSample as exc:
                    outcome.reject(exc)
                    continue
                try:
                    check_sample(sample, now=now, max_future=max_future, max_age=max_age)
                    self._admit(sample.node, sample.timestamp, allowed_nodes)
                except InvalidSample as exc:
                    late.reject(exc)
                    continue
                last_time[sample.node] = sample.timestamp
                change = observe(sample, now)
                outcome.accepted += 1
                if change is not None:
                    changes.append(change)
        outcome.merge(late)
        self._finish(outcome, changes)
        return outcome

    def _admit(self, node: str, timestamp: float, allowed_nodes: frozenset[str] | None) -> None:
        """The checks against the engine's state, after :func:`check_sample`: raises :class:`InvalidSample`."""
        if allowed_nodes is not None and node not in allowed_nodes:
            raise InvalidSample(
                "unauthorized_node",
                f"node {node}: the client certificate allows only {', '.join(sorted(allowed_nodes)) or 'no node'}",
            )
        prev = self._last_time.get(node)
        if prev is None and len(self._last_time) >= self.max_nodes and not self._make_room():
            raise InvalidSample(
                "too_many_nodes",
                f"node {node}: the analyzer already tracks {self.max_nodes} nodes (the report's limit) and "
                "none has been silent for staleAfterSeconds; raise --max-nodes or shard",
            )
        if prev is not None and timestamp <= prev:
            raise InvalidSample(
                "out_of_order",
                f"node {node}: sample time is not after the previous sample's (duplicate or reordered)",
            )

    def _make_room(self) -> bool:
        """With the node table full: forget the nodes silent for longer than ``staleAfterSeconds``.

        The flood policy: names sent once (a typo, a renamed node, a flood of made-up names)
        hold their place only until they go stale, not for ``forgetAfterSeconds``; a node that
        keeps reporting is never displaced. The scan runs at most once a second, so a flood
        costs one pass over the table per second. True when there is room now.
        """
        now = self.clock()
        if now < self._next_room_scan:
            return False
        self._next_room_scan = now + 1.0
        evicted = self._scorer.forget_silent(now, self.rules.staleness.stale_after_seconds)
        for name in evicted:
            self._last_time.pop(name, None)
        if evicted:
            self.metrics.nodes_evicted.inc(len(evicted))
            log.warning(
                "node table full (%d): forgot %d nodes silent for over %gs to admit new ones",
                self.max_nodes,
                len(evicted),
                self.rules.staleness.stale_after_seconds,
            )
        return len(self._last_time) < self.max_nodes

    def _finish(self, outcome: Outcome, changes: list[LevelChange]) -> None:
        self.count(outcome)
        if changes:
            self.level_changed.set()
        for change in changes:
            log.info(
                "node %s: level %s -> %s",
                change.node,
                change.old.value if change.old else "(new)",
                change.new.value,
                extra={
                    "node": change.node,
                    "score": round(change.score, 1),
                    "dominant": change.dominant,
                    "reasons": "; ".join(change.reasons),
                },
            )

    def count(self, outcome: Outcome) -> None:
        """Add ``outcome`` to the sample counters (once per batch: :meth:`accept_messages`, or the
        servicer for a batch it drops whole)."""
        if outcome.accepted:
            self.metrics.samples.labels("accepted", "none").inc(outcome.accepted)
        for reason, n in outcome.counts.items():
            self.metrics.samples.labels("rejected", reason).inc(n)

    def report_not_written(self, min_generation: int = 0) -> None:
        """The last built report was not written (failed, or this replica is not the leader): the next
        one is written whole (a sharded report starts a new generation, ``min_generation`` or above)."""
        self._builder.reset(min_generation)

    def build_report(self, *, write: bool = True) -> Fitted:
        """Assess every node now, publish the per-node metrics, and fit the report to the size budget
        (``write=False``: the envelope only, for a replica that will not write it)."""
        started = time.perf_counter()
        now = self.clock()
        # The build allocates tens of thousands of acyclic containers (entries, signal maps,
        # reason tuples); with the cyclic GC on, they trigger repeated collections that each
        # walk the whole scorer state (a large share of the build at 10,000 nodes). Nothing
        # built here forms a cycle, so collecting is postponed until the build is done.
        with gc_paused():
            with self._lock:
                # with a budget most nodes lose their detail: reasons formatted only for those keeping it
                report, forgotten = self._scorer.report(
                    now, identity=self.identity, lazy_reasons=self.status_budget is not None
                )
                for name in forgotten:
                    self._last_time.pop(name, None)
            fitted = self._builder.build(report, write=write)
        self.metrics.generation.observe(time.perf_counter() - started)
        self.metrics.publish_nodes(report.nodes, [dim.name for dim in self.rules.dimensions])
        self.metrics.detail_dropped.set(fitted.detail_dropped)
        self.metrics.nodes_dropped.set(len(fitted.nodes_dropped))
        self.metrics.shards.set(fitted.shards.index.count if fitted.shards else 0)
        if fitted.size:
            self.metrics.report_bytes.set(fitted.size)
        if forgotten:
            log.info("forgot %d silent node(s)", len(forgotten), extra={"nodes": ", ".join(forgotten[:20])})
        if fitted.nodes_dropped:
            log.warning(
                "report over the size budget even without detail: %d node(s) left out",
                len(fitted.nodes_dropped),
                extra={"budget_bytes": self.status_budget},
            )
        return fitted


def send_early_thresholds(rules: DetectionRules) -> dict[str, float]:
    """Each scored signal's warn value: above it a sample may change a level, so it is worth sending at once."""
    return {name: rule.warn for name, rule in rules.signals.items() if rule.max_score > 0}
