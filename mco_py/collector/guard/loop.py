"""The node guard in the collector: every ``guard.interval`` it measures the online groups'
CPU, memory and I/O pressure, decides (:mod:`mco_py.analysis.guard`) and limits the offline
groups' CPU, memory and I/O (:mod:`.knobs`), or in ``dry-run`` only says what it would do. While
it is on, the offline groups also keep the lowest CPU weight, so online work that wakes up runs
first.

Every limit goes through its writer (:mod:`.writer`): journalled first and restored when it
stops, when the limit is lifted, and when it starts after a guard was killed with limits in
place. Only the configured offline groups are ever written.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from mco_py.analysis.guard import Action, GuardChange, GuardRules, GuardState, change_text, decide, decide_io
from mco_py.collector.cgroups import Layout, PressureMeter, within
from mco_py.collector.exporter import Family
from mco_py.collector.guard.journal import Journal
from mco_py.collector.guard.knobs import CpuLimits, IoKnob, MemoryKnob, Write
from mco_py.collector.guard.metrics import GuardStatus, families
from mco_py.collector.guard.writer import LimitWriter
from mco_py.collector.signals import Unavailable
from mco_py.collector.workload_groups import Groups, WorkloadGroups
from mco_py.errors import ConfigError

log = logging.getLogger(__name__)

#: Steps failing in a row before the guard lifts the quota it set.
FAIL_SAFE_AFTER = 3
RESOURCES = ("cpu", "io", "memory")
#: What the guard may limit, besides CPU (``guard.resources``).
KNOB_RESOURCES = ("memory", "io")
#: Changes kept for the analyzer's Events while no stream takes them (the oldest go first).
MAX_PENDING_CHANGES = 64
#: The log line of limits lifted (why) that did not all go back (the problems).
NOT_ALL_BACK = "offline CPU limits %s, but not all written back: %s"


class NodeGuard:
    """One feedback loop over the configured groups."""

    def __init__(
        self,
        layout: Layout,
        *,
        online: Sequence[str] = (),
        offline: Sequence[str] = (),
        groups: WorkloadGroups | None = None,
        rules: GuardRules,
        mode: str,
        journal_path: os.PathLike[str] | str,
        node: str = "",
        cpus: int | None = None,
        resources: Sequence[str] = ("cpu", "memory", "io"),
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if mode not in ("dry-run", "on"):
            raise ConfigError(f"guard: {mode!r}; expected dry-run or on")
        if groups is None:
            if not online or not offline:
                raise ConfigError(
                    "guard: needs online_cgroups (whose pressure it watches) and offline_cgroups (it limits)"
                )
            groups = WorkloadGroups(
                [layout.check_group(g) for g in online], [layout.check_group(g) for g in offline], driver=None
            )
        self.groups = groups
        self.node = node
        self._wall_clock = wall_clock
        self._changes: collections.deque[GuardChange] = collections.deque()
        self._limited: tuple[str, ...] = ()
        """The offline groups of the last step (one that leaves the class gets its limits back)."""
        self.rules = rules
        self.mode = mode
        self.limits = CpuLimits(layout)
        self.writer = LimitWriter(layout, Journal(Path(journal_path), layout))
        self.meter = PressureMeter(layout, clock=clock)
        self.cpus = cpus or len(os.sched_getaffinity(0))
        self.state = GuardState()
        self.status = GuardStatus(mode)
        self._lock = threading.Lock()
        self._closed = False
        self.online: list[str] = []
        self.offline: list[str] = []
        self._from_pods: frozenset[str] = frozenset()
        self.cpu_on = "cpu" in resources
        """Whether the guard limits CPU (weight and quota); memory and I/O: :attr:`knobs`."""
        self.knobs: dict[str, MemoryKnob | IoKnob] = {}
        """The memory and I/O limits this host's controllers allow (``resources``)."""
        for resource in KNOB_RESOURCES:
            if resource not in resources:
                continue
            try:
                self.knobs[resource] = MemoryKnob(layout) if resource == "memory" else IoKnob(layout, clock=clock)
            except Unavailable as exc:
                log.warning("the guard will not limit offline %s: %s", resource, exc)
        self.states: dict[str, GuardState] = {r: GuardState() for r in self.knobs}
        self._knob_limited: set[str] = set()
        """Resources whose limits were written since they were last lifted."""
        self._baselines: dict[tuple[str, str], object] = {}
        """(resource, group) -> its use when the guard first limited it (limits are shares of it)."""

    def recover(self) -> None:
        """Undo limits a killed guard left behind (its journal), before the first step."""
        journal = self.writer.journal
        if not journal and not journal.problems:
            return
        if self._restore("cannot restore the CPU limits a killed guard left (journal %s): %s", journal.path):
            log.warning("restored the CPU limits a killed guard left (journal %s)", journal.path)

    def step(self) -> Action:
        """One interval: measure, decide, apply (or, in dry-run, only report)."""
        view = self.groups.snapshot()
        self.online, self.offline = list(view.online), list(view.offline)
        self._from_pods = view.from_pods
        with self._lock:
            rules = self.rules
        pressure, action = None, Action.HOLD
        if self.cpu_on:
            self.state, action, pressure = self._decide("cpu", self.state, rules)
        knob_actions = []
        for resource in self.knobs:
            self.states[resource], knob_action, _ = self._decide(resource, self.states[resource], rules)
            knob_actions.append(knob_action)
        errors = self.writer.counts().failures
        if self.mode == "on":
            self._release_left(view)
            if self.cpu_on:
                self._apply()
            for resource in self.knobs:
                self._apply_knob(resource)
        stalled = self._stalled()
        with self._lock:
            self.status.groups = view
            self.status.pressure = pressure
            self.status.limit = self.state.limit
            self.status.stalled = stalled
            self.status.failing = self.writer.counts().failures > errors
            if action is not Action.HOLD:
                self.status.actions[action.value] += 1
            for resource, knob_action in zip(self.knobs, knob_actions, strict=True):
                self.status.knob_limits[resource] = self.states[resource].limit
                if knob_action is not Action.HOLD:
                    key = (resource, knob_action.value)
                    self.status.knob_actions[key] = self.status.knob_actions.get(key, 0) + 1
        return action

    def _decide(self, resource: str, state: GuardState, rules: GuardRules) -> tuple[GuardState, Action, float | None]:
        """One resource's next state from the worst online group's stall share on it (I/O: its
        setpoint law); a change is recorded (for the analyzer's Event) and logged in the Event's words."""
        known = [p for g in self.online if (p := self.meter.share(g, resource)) is not None]
        pressure = max(known) if known else None
        new, action = (decide_io if resource == "io" else decide)(state, pressure, rules)
        if action is not Action.HOLD:
            change = GuardChange(self.node, self._wall_clock(), action, state.limit, new.limit, pressure, self.cpus,
                                 self.mode == "dry-run", resource)  # fmt: skip
            self._record(change)
            log.info("%s", change_text(change)[1],
                     extra={"action": action.value, "resource": resource, "limit_before": state.limit,
                            "limit": new.limit})  # fmt: skip
        return new, action, pressure

    def _apply_knob(self, resource: str) -> None:
        """Limit (or give back) every offline group's memory or I/O to the state's share of its baseline."""
        if self._closed:
            return
        knob = self.knobs[resource]
        targets = self._knob_targets(knob)
        if isinstance(knob, IoKnob):  # rates over the last interval, for a baseline when one is needed
            self._observe_io(knob, targets)
        share = self.states[resource].limit
        if share is None:
            self._baselines = {k: v for k, v in self._baselines.items() if k[0] != resource}
            if resource in self._knob_limited:
                self._knob_limited.discard(resource)
                for name in knob.files:
                    if self.writer.journal.holds(name):
                        self._restore(NOT_ALL_BACK, f"{resource} lifted", only=name)
            return
        self._knob_limited.add(resource)
        for group in targets:
            with self._attempt(group, resource):
                self._limit_group(knob, group, share)

    def _knob_targets(self, knob: MemoryKnob | IoKnob) -> list[str]:
        """The groups whose files the knob writes for the offline groups (I/O on v1: each group
        under them as well, :meth:`IoKnob.targets`)."""
        if not isinstance(knob, IoKnob):
            return list(self.offline)
        return [target for group in self.offline for target in knob.targets(group)]

    def _observe_io(self, knob: IoKnob, targets: list[str]) -> None:
        for group in targets:
            with self._attempt(group, "io"):
                for write in knob.accounting_writes(group):
                    self._write(knob, group, write)
                knob.observe(group)
        knob.forget(set(targets))

    def _limit_group(self, knob: MemoryKnob | IoKnob, group: str, share: float) -> None:
        baseline = self._baselines.get((knob.resource, group))
        if baseline is None:
            baseline = knob.baseline(group)
            if baseline is None:
                return  # no use to limit
            self._baselines[knob.resource, group] = baseline
        for write in knob.writes(group, share, baseline):  # type: ignore[arg-type]
            self._write(knob, group, write)

    def _write(self, knob: MemoryKnob | IoKnob, group: str, write: Write) -> None:
        if not knob.holds(group, write):
            self.writer.write(group, write.name, write.line)

    def set_rules(self, rules: GuardRules, source: str = "analyzer") -> None:
        """Use ``rules`` from the next interval on (the analyzer's, hot-reloaded with its rules)."""
        with self._lock:
            changed = rules != self.rules
            self.rules = rules
            self.status.rules_from = source
        if changed:
            log.info("guard rules from the %s: %s", source, rules)

    def _record(self, change: GuardChange) -> None:
        with self._lock:
            if len(self._changes) >= MAX_PENDING_CHANGES:
                self._changes.popleft()
                self.status.changes_dropped += 1
            self._changes.append(change)

    def take_changes(self) -> list[GuardChange]:
        """The changes since the last call (the stream sends them for the analyzer's Events)."""
        with self._lock:
            out = list(self._changes)
            self._changes.clear()
        return out

    def _release_left(self, view: Groups) -> None:
        """Give back the limits of groups that are no longer offline (a pod relabelled online, or gone)."""
        for group in self._limited:
            if group not in view.offline:
                self._baselines = {k: v for k, v in self._baselines.items() if not within(k[1], group)}
                self._restore("group %s left the offline class; not all limits written back: %s", group, under=group)
        self._limited = view.offline

    def _apply(self) -> None:
        if self._closed:
            return
        # the lowest weight, all the time: offline work still uses every idle CPU, but online
        # work that wakes up runs first (the kubelet gives BestEffort pods the same)
        weight, quota = self.limits.weight_file, self.limits.quota_file
        for group in self.offline:
            with self._attempt(group, weight):
                self.writer.ensure(group, weight, self.limits.lowest_weight)
        if self.state.limit is None:
            if self.writer.journal.holds(quota):  # also retries a write-back that failed
                self._restore(NOT_ALL_BACK, "lifted", only=quota)
            return
        cores = self.state.limit * self.cpus
        for group in self.offline:
            with self._attempt(group, quota):
                self.writer.ensure(group, quota, self.limits.text_for(group, self._capped(group, cores)))

    def _capped(self, group: str, cores: float) -> float:
        """``cores``, but never more than the group's own limit from before the guard (a tighter
        limit of its own is kept: the guard only ever takes CPU away)."""
        quota = self.limits.quota_file
        original = self.writer.journal.original(group, quota)
        own = self.limits.cores_of(group, original if original is not None else self.writer.read(group, quota))
        return cores if own is None else min(cores, own)

    @contextlib.contextmanager
    def _attempt(self, group: str, what: str) -> Iterator[None]:
        """Writes to ``group``'s file or resource ``what``: one that fails is counted and logged;
        a pod's cgroup (or one of its containers') that is not there (yet, or any more) is no failure."""
        try:
            yield
        except (OSError, ValueError, Unavailable) as exc:
            if not (isinstance(exc, FileNotFoundError) and any(within(group, pod) for pod in self._from_pods)):
                self.writer.failed(group, what, exc)

    def _restore(self, problem: str, *args: object, only: str = "", under: str = "") -> bool:
        """Write limits back (:meth:`LimitWriter.restore`); what could not be written back is
        logged as ``problem`` % (``args``, the problems). True when all went back."""
        problems = self.writer.restore(only=only, under=under)
        if problems:
            with self._lock:
                self.status.failing = True
            log.error(problem, *args, "; ".join(problems))
        return not problems

    def close(self) -> None:
        """Put every limit back as it was (also done by :meth:`recover` after a crash)."""
        self._closed = True
        if self.writer.journal:
            self._restore(NOT_ALL_BACK, "restored on exit")

    def fail_safe(self) -> None:
        """After steps keep failing: lift the quota and the memory and I/O limits (offline work is
        never held back blind)."""
        self.state = GuardState()
        self.states = {r: GuardState() for r in self.knobs}
        self._baselines.clear()
        if self.mode != "on":
            return
        for name in (self.limits.quota_file, *(n for knob in self.knobs.values() for n in knob.files)):
            if self.writer.journal.holds(name):
                self._restore(NOT_ALL_BACK, "lifted after failing steps", only=name)

    def _stalled(self) -> dict[tuple[str, str, str], float]:
        out: dict[tuple[str, str, str], float] = {}
        for cls, groups in (("online", self.online), ("offline", self.offline)):
            for group in groups:
                for resource in RESOURCES:
                    try:
                        out[cls, group, resource] = self.meter.total_seconds(group, resource)
                    except Unavailable:
                        continue
        return out

    def families(self) -> list[Family]:
        """The guard's metric families (rendered with the collector's)."""
        with self._lock:
            return families(self.status, self.writer.counts())


class GuardLoop:
    """Runs :meth:`NodeGuard.step` every ``interval`` seconds in a daemon thread."""

    def __init__(self, guard: NodeGuard, interval: float) -> None:
        self.guard = guard
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.guard.recover()

        def run() -> None:
            failures = 0
            while not self._stop.wait(self.interval):
                try:
                    self.guard.step()
                    failures = 0
                except Exception:  # never let a bug leave limits in place without a word
                    failures += 1
                    log.exception("guard step failed (%d in a row)", failures)
                    if failures == FAIL_SAFE_AFTER:
                        self.guard.fail_safe()

        self._thread = threading.Thread(target=run, name="guard", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.guard.close()
