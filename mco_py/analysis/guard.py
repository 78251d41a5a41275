"""The node guard's decisions (pure): how much CPU the offline groups may use, from how much the
online groups stall.

Every interval the guard measures the online groups' pressure (the share of the interval their
tasks stalled, from the cgroups' PSI ``total=``) and calls :func:`decide`:

- pressure at or above ``throttle_above``: the offline limit is cut to ``step_down`` of what it
  was (from the node's whole CPU the first time), never below ``floor`` of the node's CPUs;
- pressure at or below ``release_below`` (or unknown) for ``calm_intervals`` intervals in a row:
  the limit grows by ``step_up`` of the node's CPUs; once it reaches the whole node it is lifted;
- in between: the limit holds (hysteresis), and the calm count starts over.

The limit is a share of the node's CPUs (1.0 = every CPU), applied to each offline group; online
groups are never limited: :func:`decide` only ever returns a limit for the offline class.

I/O has its own law, :func:`decide_io`, a setpoint loop: an online service's tail latency grows
long before its I/O stall share reaches the CPU law's threshold (one fsync waiting behind a batch
writer's queue is a few percent of an interval), and the latency it gets back falls smoothly with
the batch's bandwidth (docs/benchmarks.md), so a fixed cut to a floor either misses or starves.
The offline I/O limit (a share of the offline groups' rate when first limited) is steered so that
the worst online group's I/O stall stays near ``io_target``:

- stall above ``io_target`` * :data:`IO_CUT_ABOVE`: the limit is multiplied by ``io_target`` /
  stall (a proportional step: the further off, the deeper the cut), at most halved
  (``step_down``), never below ``io_floor``;
- stall at or below ``io_target`` * :data:`IO_GROW_BELOW` (or unknown) for ``calm_intervals``
  intervals in a row: the limit grows by :data:`IO_GROWTH`; it is lifted once it reaches 1;
- in between (the dead band): the limit holds, so a settled loop does not oscillate.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from mco_py.errors import ConfigError


class Action(enum.Enum):
    """What one decision did (a bounded metric label)."""

    THROTTLE = "throttle"
    """The limit went down."""
    RELAX = "relax"
    """The limit went up, still a limit."""
    RELEASE = "release"
    """The limit was lifted."""
    HOLD = "hold"
    """Nothing changed."""


@dataclass(frozen=True, slots=True)
class GuardRules:
    """When and how far the guard limits offline CPU (``guard.rules`` in collector.yaml)."""

    throttle_above: float = 20.0
    """Online stall share of the interval, percent (PSI some, the worst online group), that cuts the limit."""
    release_below: float = 2.0
    """At or below this the interval counts as calm."""
    calm_intervals: int = 3
    """Calm intervals in a row before one step up."""
    step_down: float = 0.5
    """Each cut multiplies the limit by this (0 < step_down < 1)."""
    step_up: float = 0.1
    """Each step up adds this share of the node's CPUs (0 < step_up <= 1)."""
    floor: float = 0.1
    """The limit never goes below this share of the node's CPUs (0 lets offline work stop)."""
    io_target: float = 5.0
    """Online I/O stall share, percent, that the offline I/O limit is steered to (:func:`decide_io`)."""
    io_floor: float = 0.02
    """The I/O limit never goes below this share of the offline groups' rate when first limited."""

    def __post_init__(self) -> None:
        problems = list(rule_problems(self))
        if problems:
            raise ConfigError("; ".join(problems))


def rule_problems(rules: GuardRules) -> list[str]:
    """What is wrong with ``rules`` (empty: nothing), naming the fields as both documents that hold
    them do (camelCase: collector.yaml's ``guard.rules``, the detection rules' ``guard``)."""
    out = []
    values = (
        rules.throttle_above,
        rules.release_below,
        rules.step_down,
        rules.step_up,
        rules.floor,
        rules.io_target,
        rules.io_floor,
    )
    if not all(math.isfinite(v) for v in values):
        return ["every value must be a finite number"]
    if not 0 <= rules.release_below < rules.throttle_above <= 100:
        out.append(
            f"need 0 <= releaseBelow ({rules.release_below:g}) < throttleAbove ({rules.throttle_above:g}) <= 100"
        )
    if rules.calm_intervals < 1:
        out.append(f"calmIntervals ({rules.calm_intervals}) must be at least 1")
    if not 0 < rules.step_down < 1:
        out.append(f"stepDown ({rules.step_down:g}) must be between 0 and 1 (exclusive)")
    if not 0 < rules.step_up <= 1:
        out.append(f"stepUp ({rules.step_up:g}) must be above 0 and at most 1")
    if not 0 <= rules.floor < 1:
        out.append(f"floor ({rules.floor:g}) must be at least 0 and below 1")
    if not 0 < rules.io_target <= 100:
        out.append(f"ioTarget ({rules.io_target:g}) must be above 0 and at most 100 (percent)")
    if not 0 <= rules.io_floor < 1:
        out.append(f"ioFloor ({rules.io_floor:g}) must be at least 0 and below 1")
    return out


@dataclass(frozen=True, slots=True)
class GuardState:
    """The offline limit now (None: unlimited) and how many calm intervals in a row were seen."""

    limit: float | None = None
    calm: int = 0


def decide(state: GuardState, pressure: float | None, rules: GuardRules) -> tuple[GuardState, Action]:
    """The next state for one interval's online ``pressure`` (percent; None: not measurable)."""
    if pressure is not None and pressure >= rules.throttle_above:
        current = 1.0 if state.limit is None else state.limit
        cut = max(rules.floor, current * rules.step_down)
        return GuardState(min(cut, current), 0), Action.THROTTLE if cut < current else Action.HOLD
    if state.limit is None or (pressure is not None and pressure > rules.release_below):
        return GuardState(state.limit, 0), Action.HOLD
    # calm, or unknown: offline work is never held back without evidence
    return _calm_step(state, rules)


def _calm_step(state: GuardState, rules: GuardRules, raised: float | None = None) -> tuple[GuardState, Action]:
    """One calm interval: after ``calm_intervals`` of them the limit becomes ``raised`` (default:
    ``step_up`` more), and is lifted once that reaches 1."""
    assert state.limit is not None
    calm = state.calm + 1
    if calm < rules.calm_intervals:
        return GuardState(state.limit, calm), Action.HOLD
    if raised is None:
        raised = state.limit + rules.step_up
    if raised >= 1.0:
        return GuardState(None, 0), Action.RELEASE
    return GuardState(raised, 0), Action.RELAX


#: The I/O dead band: a stall above ``io_target`` times this cuts the limit ...
IO_CUT_ABOVE = 1.25
#: ... and one at or below ``io_target`` times this counts as calm.
IO_GROW_BELOW = 0.5
#: Each calm step multiplies the I/O limit by this (from the 0.02 floor to lifted: 22 steps).
IO_GROWTH = 1.2


def decide_io(state: GuardState, pressure: float | None, rules: GuardRules) -> tuple[GuardState, Action]:
    """The next I/O state for one interval's online I/O stall ``pressure`` (percent; None: not
    measurable): steered towards ``io_target`` (module docstring)."""
    target = rules.io_target
    if pressure is not None and pressure > target * IO_CUT_ABOVE:
        current = 1.0 if state.limit is None else state.limit
        cut = max(rules.io_floor, current * max(rules.step_down, target / pressure))
        return GuardState(min(cut, current), 0), Action.THROTTLE if cut < current else Action.HOLD
    if state.limit is None or (pressure is not None and pressure > target * IO_GROW_BELOW):
        return GuardState(state.limit, 0), Action.HOLD
    return _calm_step(state, rules, state.limit * IO_GROWTH)


@dataclass(frozen=True, slots=True)
class GuardChange:
    """One change of the offline CPU limit on a node (a metric, a log line, a Kubernetes Event)."""

    node: str
    time: float
    """Unix seconds."""
    action: Action
    limit_before: float | None
    """Share of the node's CPUs; None: unlimited."""
    limit: float | None
    pressure: float | None
    """The worst online group's CPU stall share, percent; None: unknown."""
    cpus: int
    dry_run: bool = False
    resource: str = "cpu"
    """cpu, memory or io: what was limited (and whose online pressure moved it)."""


RESOURCES = ("cpu", "memory", "io")
_RESOURCE_NAMES = {"cpu": "CPU", "memory": "Memory", "io": "IO"}
_ACTION_NAMES = {Action.THROTTLE: "Throttled", Action.RELAX: "Relaxed", Action.RELEASE: "Released"}


def event_reason(resource: str, action: Action) -> str:
    """The Kubernetes Event reason: ``OfflineCPUThrottled``, ``OfflineIORelaxed``, ``OfflineMemoryReleased``."""
    return f"Offline{_RESOURCE_NAMES.get(resource, 'CPU')}{_ACTION_NAMES.get(action, 'Changed')}"


def _limit(change: GuardChange, limit: float | None) -> str:
    if limit is None:
        return "unlimited"
    if change.resource == "cpu":
        return f"{limit * change.cpus:.2f} of {change.cpus} CPUs"
    return f"{limit * 100:.0f} % of their {'memory use' if change.resource == 'memory' else 'I/O rate'} then"


def change_text(change: GuardChange) -> tuple[str, str]:
    """(Event reason, message) for ``change``, e.g. ``OfflineCPUThrottled``, "offline workloads'
    CPU limited to 1.00 of 2 CPUs (was unlimited): online CPU pressure 34.0 %"."""
    verb = {Action.THROTTLE: "limited to", Action.RELAX: "allowed", Action.RELEASE: "allowed"}.get(
        change.action, "kept at"
    )
    what = {"memory": "memory", "io": "I/O"}.get(change.resource, "CPU")
    pressure = "unknown" if change.pressure is None else f"{change.pressure:.1f} %"
    text = (
        f"{'dry-run, nothing changed: would have ' if change.dry_run else ''}offline workloads' {what} {verb} "
        f"{_limit(change, change.limit)} (was {_limit(change, change.limit_before)}): "
        f"online {what} pressure {pressure}"
    )
    return event_reason(change.resource, change.action), text
