"""The online and offline cgroups of this node: the configured ones (bare metal: slices), and
the pods the analyzer says are bound here, found where the kubelet puts them.

The guard reads :meth:`WorkloadGroups.snapshot` every interval, and the per-class pressure
signals come from the same groups. A pod group that would hold, or sit inside, a group of the
other class is left out (a limit on it would reach online work): it is counted and logged once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mco_py.analysis.workloads import DRIVERS, WorkloadPod, pod_group
from mco_py.errors import ConfigError
from mco_py.obs.logging import OnceFilter

log = logging.getLogger(__name__)


def _nested(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def detect_driver(cpu_root: Path, configured: str = "auto") -> str | None:
    """The kubelet's cgroup driver: ``configured`` unless ``auto``; then ``systemd`` when
    ``kubepods.slice`` exists under ``cpu_root``, ``cgroupfs`` for ``kubepods``, else None (no
    kubelet here)."""
    if configured != "auto":
        if configured not in DRIVERS:
            raise ConfigError(f"kubelet_cgroup_driver: {configured!r}; expected auto, {', '.join(DRIVERS)}")
        return configured
    if (cpu_root / "kubepods.slice").is_dir():
        return "systemd"
    if (cpu_root / "kubepods").is_dir():
        return "cgroupfs"
    return None


@dataclass(frozen=True, slots=True)
class Groups:
    """One consistent view: the groups of each class, and which of them came from pods."""

    online: tuple[str, ...] = ()
    offline: tuple[str, ...] = ()
    from_pods: frozenset[str] = field(default_factory=frozenset)
    """Pod groups: they may not exist yet (pod starting) or any more (pod gone)."""
    pods: int = 0
    """Pods known for this node (the analyzer's last word)."""
    conflicts: int = 0
    """Pod groups left out because they nest with a group of the other class."""


class WorkloadGroups:
    """Thread-safe: the stream's thread sets pods, the guard and the sampler read."""

    def __init__(
        self,
        online: Sequence[str],
        offline: Sequence[str],
        *,
        driver: str | None,
    ) -> None:
        self._online = tuple(online)
        self._offline = tuple(offline)
        for on in self._online:
            for off in self._offline:
                if _nested(on, off):
                    raise ConfigError(
                        f"guard: online {on} and offline {off} are the same group or one holds the other; a limit "
                        "on an offline group would reach online work, and a group's pressure includes its children's"
                    )
        self.driver = driver
        self._lock = threading.Lock()
        self._once = OnceFilter()
        self._groups = Groups(self._online, self._offline)

    def snapshot(self) -> Groups:
        """The groups now."""
        with self._lock:
            return self._groups

    def set_pods(self, pods: Iterable[WorkloadPod]) -> Groups:
        """Replace the pod groups with those of ``pods``; returns the new view."""
        pods = list(pods)
        online, offline = list(self._online), list(self._offline)
        from_pods: set[str] = set()
        conflicts = 0
        if self.driver is not None:
            wanted = [(pod, pod_group(pod.uid, pod.qos, self.driver)) for pod in pods]
            offline_pods = [g for pod, g in wanted if pod.cls == "offline"]
            online_pods = [g for pod, g in wanted if pod.cls == "online"]
            for group in online_pods:
                if any(_nested(group, off) for off in self._offline):
                    conflicts += 1
                    self._say(f"online pod group {group} is inside or holds offline group(s) {self._offline}")
                    continue
                online.append(group)
                from_pods.add(group)
            for group in offline_pods:
                if any(_nested(group, on) for on in online):
                    conflicts += 1
                    self._say(f"offline pod group {group} nests with an online group; it is not limited")
                    continue
                offline.append(group)
                from_pods.add(group)
        elif pods:
            self._say("the analyzer named pods, but no kubelet cgroups (kubepods) are here; set kubelet_cgroup_driver")
        view = Groups(tuple(online), tuple(offline), frozenset(from_pods), len(pods), conflicts)
        with self._lock:
            self._groups = view
        return view

    def _say(self, message: str) -> None:
        if self._once.first(message):
            log.warning("%s", message)
