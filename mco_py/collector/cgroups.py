"""cgroups of the workload classes: where each controller's tree is (:class:`Layout`; the
layout mounted is found by :func:`mco_py.collector.guard.files.detect_layout`), and the share of
each interval a group's tasks stalled (:class:`PressureMeter`), which the node guard acts on and
the sampler sends per class.

Groups are paths relative to each tree's root (``offline.slice``, ``kubepods.slice/...``); on the
hybrid layout (v1 controllers plus a v2 tree at ``<root>/unified`` for the pressure files) a
workload is in both trees (systemd puts it there, a test moves it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mco_py.collector.procfs import parse_psi
from mco_py.collector.signals import Absence, Reading, Total, Unavailable
from mco_py.collector.workload_groups import WorkloadGroups
from mco_py.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Layout:
    """Where the CPU controller and the pressure files of groups are."""

    cpu_root: Path
    """v2: the cgroup2 mount; v1: the ``cpu`` controller's mount."""
    version: int
    """Of the CPU controller: 1 or 2."""
    pressure_root: Path | None
    """The cgroup2 tree with per-group ``*.pressure`` files; None when there is none."""
    memory_root: Path | None = None
    """Where the memory controller is (v2: the mount when enabled; v1: its own); None: not mounted."""
    io_root: Path | None = None
    """Where the io (v2) or blkio (v1) controller is; None: not mounted."""

    def check_group(self, group: str) -> str:
        """``group`` normalised (no leading or trailing ``/``); ConfigError when it escapes the tree."""
        clean = group.strip("/")
        if not clean or any(part in ("", ".", "..") for part in clean.split("/")):
            raise ConfigError(f"cgroup {group!r}: expected a path below the cgroup root, e.g. offline.slice")
        return clean


def within(group: str, top: str) -> bool:
    """``group`` is ``top`` or a group below it (paths relative to a cgroup root)."""
    return group == top or group.startswith(top + "/")


def device_values(text: str) -> dict[str, str]:
    """``{"254:0": "rbps=1048576 wbps=max ..."}`` of a per-device file (v1: ``{"254:0": "1048576"}``)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        device, _, rest = line.strip().partition(" ")
        if device and ":" in device:
            out[device] = rest.strip()
    return out


class PressureMeter:
    """The share of each interval a group's tasks stalled (PSI ``some``), from ``total=``."""

    def __init__(self, layout: Layout, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.layout = layout
        self._clock = clock
        self._last: dict[tuple[str, str], tuple[float, int]] = {}

    def total_seconds(self, group: str, resource: str) -> float:
        """Seconds ``group``'s tasks stalled on ``resource`` since the group exists; Unavailable
        when it has no pressure file (v1 only, or the group is not in the v2 tree)."""
        if self.layout.pressure_root is None:
            raise Unavailable("no cgroup v2 tree: no pressure per group (cgroup v1 only)")
        path = self.layout.pressure_root / self.layout.check_group(group) / f"{resource}.pressure"
        try:
            text = path.read_text()
        except OSError as exc:
            raise Unavailable(f"{path}: {exc.strerror or exc}") from exc
        return parse_psi(text, source=str(path))["some"].total_us / 1e6

    def share(self, group: str, resource: str) -> float | None:
        """Percent of the time since the last call that ``group`` stalled on ``resource``; None on
        the first call or when it cannot be read."""
        now = self._clock()
        key = (group, resource)
        try:
            total_us = round(self.total_seconds(group, resource) * 1e6)
        except (Unavailable, ValueError):
            self._last.pop(key, None)
            return None
        previous = self._last.get(key)
        self._last[key] = (now, total_us)
        if previous is None or now <= previous[0] or total_us < previous[1]:
            return None
        return min(100.0, 100.0 * (total_us - previous[1]) / 1e6 / (now - previous[0]))


CLASSES = ("online", "offline")
PRESSURE_RESOURCES = ("cpu", "io", "memory")
BACKEND = "cgroup-psi"


def class_signal(cls: str, resource: str) -> str:
    """``psiOnlineCpuSomeRate``, ``psiOfflineIoSomeRate``, ...: a workload class's stall share."""
    return f"psi{cls.capitalize()}{resource.capitalize()}SomeRate"


class WorkloadPressureSource:
    """Who suffers and who causes it: per class (online, offline) and resource, the stall share
    of the interval of its worst group (cgroup v2 ``*.pressure``), sent with the node sample."""

    group = "workload"

    def __init__(
        self,
        layout: Layout | None,
        groups: WorkloadGroups,
        *,
        problem: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._groups = groups
        self._meter = PressureMeter(layout, clock=clock) if layout is not None else None
        if not problem and layout is not None and layout.pressure_root is None:
            problem = "no cgroup v2 tree: no pressure per group (cgroup v1 only)"
        self._problem = problem
        self.backend = BACKEND if self._meter is not None and not self._problem else "none"

    def read(self, now: float) -> list[Reading]:
        out: list[Reading] = []
        for cls in CLASSES:
            for resource in PRESSURE_RESOURCES:
                name = class_signal(cls, resource)
                if self._meter is None or self._problem:
                    out.append(Reading.absent(name, self.backend, Absence.UNSUPPORTED, self._problem))
                    continue
                view = self._groups.snapshot()
                shares = [self._meter.share(g, resource) for g in (view.online if cls == "online" else view.offline)]
                known = [s for s in shares if s is not None]
                if known:
                    out.append(Reading(name, max(known), BACKEND))
                else:
                    out.append(Reading.absent(name, BACKEND, Absence.WARMING_UP, "first reading, or unreadable"))
        return out

    def totals(self) -> list[Total]:
        """No running counts (the guard exports the per-group totals)."""
        return []

    def close(self) -> None:
        """Nothing to release."""
