"""The node guard's status and its metric families (rendered with the collector's, on /metrics)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mco_py.analysis.guard import Action
from mco_py.collector.exporter import Family
from mco_py.collector.guard.writer import WriteCounts
from mco_py.collector.workload_groups import Groups


@dataclass(slots=True)
class GuardStatus:
    """What the last interval saw and did, for /metrics."""

    mode: str
    pressure: float | None = None
    limit: float | None = None
    actions: dict[str, int] = field(default_factory=lambda: {a.value: 0 for a in Action if a is not Action.HOLD})
    failing: bool = False
    """The last interval's writes or restores failed."""
    stalled: dict[tuple[str, str, str], float] = field(default_factory=dict)
    """(class, group, resource) -> seconds stalled since the group exists."""
    rules_from: str = "config"
    """Where the rules in force come from: config (collector.yaml) or analyzer (the detection rules)."""
    groups: Groups = field(default_factory=Groups)
    changes_dropped: int = 0
    """Changes no stream took before :data:`~.loop.MAX_PENDING_CHANGES` newer ones came."""
    knob_limits: dict[str, float | None] = field(default_factory=dict)
    """memory, io -> the offline limit as a share of the groups' use when the guard first acted."""
    knob_actions: dict[tuple[str, str], int] = field(default_factory=dict)
    """(resource, action) -> changes of the memory and I/O limits."""


def families(st: GuardStatus, counts: WriteCounts) -> list[Family]:
    """The guard's metric families from its status and its writer's counts."""
    limit = 1.0 if st.limit is None else st.limit
    out = [
        Family(
            "mco_guard_mode",
            "The guard's mode (1): dry-run only reports",
            "gauge",
            ("mode",),
            [((st.mode,), 1.0)],
        ),
        Family(
            "mco_guard_offline_cpu_limit_ratio",
            "CPU the offline groups may use, share of the node's CPUs (1: unlimited)",
            "gauge",
            (),
            [((), limit)],
        ),
        Family(
            "mco_guard_actions",
            "Changes of the offline CPU limit by action (dry-run: the ones it would make)",
            "counter",
            ("action",),
            [((a,), float(n)) for a, n in sorted(st.actions.items())],
        ),
        Family(
            "mco_guard_limit_reasserted",
            "Times another writer (the kubelet) had replaced a limit the guard set",
            "counter",
            (),
            [((), float(counts.reasserted))],
        ),
        Family(
            "mco_guard_write_errors",
            "Limit writes or restores that failed",
            "counter",
            (),
            [((), float(counts.failures))],
        ),
        Family(
            "mco_guard_failing",
            "1 while the last interval's cgroup writes or restores failed (the log says which)",
            "gauge",
            (),
            [((), 1.0 if st.failing else 0.0)],
        ),
        Family(
            "mco_guard_offline_limit_ratio",
            "Memory or I/O the offline groups may use, share of their use when first limited (1: unlimited)",
            "gauge",
            ("resource",),
            [((r,), 1.0 if v is None else v) for r, v in sorted(st.knob_limits.items())],
        ),
        Family(
            "mco_guard_resource_actions",
            "Changes of the offline memory and I/O limits by action (dry-run: the ones it would make)",
            "counter",
            ("resource", "action"),
            [(key, float(n)) for key, n in sorted(st.knob_actions.items())],
        ),
        Family(
            "mco_guard_rules_source",
            "Where the guard's rules come from (1): config (collector.yaml) or analyzer (detection rules)",
            "gauge",
            ("source",),
            [((st.rules_from,), 1.0)],
        ),
        Family(
            "mco_guard_groups",
            "Groups the guard watches (online) and may limit (offline), by where they come from",
            "gauge",
            ("class", "from"),
            [
                ((cls, origin), float(sum((g in st.groups.from_pods) == (origin == "pods") for g in groups)))
                for cls, groups in (("online", st.groups.online), ("offline", st.groups.offline))
                for origin in ("config", "pods")
            ],
        ),
        Family(
            "mco_guard_group_conflicts",
            "Pod groups left out because they hold or sit inside a group of the other class",
            "gauge",
            (),
            [((), float(st.groups.conflicts))],
        ),
        Family(
            "mco_guard_changes_dropped",
            "Limit changes that no analyzer stream took in time (no Event was posted for them)",
            "counter",
            (),
            [((), float(st.changes_dropped))],
        ),
        Family(
            "mco_workload_pressure_seconds",
            "Seconds the group's tasks stalled on the resource (PSI some total=, per cgroup)",
            "counter",
            ("class", "group", "resource"),
            [(key, value) for key, value in sorted(st.stalled.items())],
        ),
    ]
    if st.pressure is not None:
        out.insert(
            1,
            Family(
                "mco_guard_online_cpu_pressure_percent",
                "CPU stall share of the last interval of the worst online group, percent",
                "gauge",
                (),
                [((), st.pressure)],
            ),
        )
    return out
