"""CPU steal percent (``<proc>/stat``) and OOM kills per interval (``<proc>/vmstat``)."""

from __future__ import annotations

import logging
from pathlib import Path

from mco_py.collector.procfs import parse_cpu_stat, parse_vmstat_field, read_text
from mco_py.collector.signals import Absence, Reading, Total, Unavailable
from mco_py.collector.source import ProblemLog

log = logging.getLogger(__name__)

BACKEND = "procfs"
STEAL = "cpuStealPercent"
OOM = "oomKills"


class StealSource:
    """Share of CPU time the hypervisor gave to others, over the interval."""

    group = "steal"
    backend = BACKEND

    def __init__(self, proc_root: Path, *, problems: ProblemLog | None = None) -> None:
        self._path = str(proc_root / "stat")
        self._problems = problems or ProblemLog(log)
        self._last: tuple[int, int] | None = None

    def read(self, now: float) -> list[Reading]:
        try:
            times = parse_cpu_stat(read_text(self._path), source=self._path)
        except Unavailable as exc:
            self._problems.problem(STEAL, exc.reason)
            self._last = None
            return [Reading.absent(STEAL, BACKEND, exc.kind, exc.reason)]
        self._problems.ok(STEAL)
        previous, self._last = self._last, (times.total, times.steal)
        if previous is None:
            return [Reading.absent(STEAL, BACKEND, Absence.WARMING_UP, "first reading; a rate needs two")]
        d_total, d_steal = times.total - previous[0], times.steal - previous[1]
        if d_total <= 0 or d_steal < 0:
            return [Reading.absent(STEAL, BACKEND, Absence.INSUFFICIENT_DATA, "no CPU time passed in the interval")]
        return [Reading(STEAL, 100.0 * d_steal / d_total, BACKEND)]

    def totals(self) -> list[Total]:
        """No running counts."""
        return []

    def close(self) -> None:
        """Nothing to release."""


class OomSource:
    """OOM kills in the interval, from the ``oom_kill`` counter (memory PSI hardly moves without swap)."""

    group = "oom"
    backend = BACKEND

    def __init__(self, proc_root: Path, *, problems: ProblemLog | None = None) -> None:
        self._path = str(proc_root / "vmstat")
        self._problems = problems or ProblemLog(log)
        self._last: int | None = None

    def read(self, now: float) -> list[Reading]:
        try:
            count = parse_vmstat_field(read_text(self._path), "oom_kill", source=self._path)
        except Unavailable as exc:
            self._problems.problem(OOM, exc.reason)
            self._last = None
            return [Reading.absent(OOM, BACKEND, exc.kind, exc.reason)]
        self._problems.ok(OOM)
        previous, self._last = self._last, count
        if previous is None:
            return [Reading.absent(OOM, BACKEND, Absence.WARMING_UP, "first reading; a count needs two")]
        if count < previous:
            return [Reading.absent(OOM, BACKEND, Absence.READ_ERROR, "oom_kill went backwards; restarting")]
        return [Reading(OOM, float(count - previous), BACKEND)]

    def totals(self) -> list[Total]:
        """OOM kills since boot (vmstat ``oom_kill``), once read."""
        return [] if self._last is None else [Total(OOM, float(self._last))]

    def close(self) -> None:
        """Nothing to release."""
