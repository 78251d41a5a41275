"""PSI from ``<proc>/pressure/{cpu,memory,io}``: avg10/avg60/avg300 and the interval rate.

The rate is the share of the interval (percent) that tasks stalled, computed
from the change of ``total=``: it settles within 1-2 s, avg10 lags 3-10 s.
"""

from __future__ import annotations

import logging
from pathlib import Path

from mco_py.collector.procfs import PSI_KINDS, PsiLine, parse_psi, read_text
from mco_py.collector.signals import Absence, Reading, Total, Unavailable
from mco_py.collector.source import ProblemLog

log = logging.getLogger(__name__)

RESOURCES = ("cpu", "memory", "io")
WINDOWS = ("avg10", "avg60", "avg300")
BACKEND = "procfs"


def signal_name(resource: str, kind: str, what: str) -> str:
    """``psiIoSomeAvg10``, ``psiCpuFullRate``, ..."""
    return f"psi{resource.capitalize()}{kind.capitalize()}{what.capitalize()}"


def signal_names() -> list[str]:
    """Every PSI signal key, in a stable order."""
    return [signal_name(r, k, w) for r in RESOURCES for k in PSI_KINDS for w in (*WINDOWS, "rate")]


#: (resource, kind) -> the avg10, avg60, avg300 and rate signal keys
_NAMES: dict[tuple[str, str], tuple[str, ...]] = {
    (r, k): tuple(signal_name(r, k, what) for what in (*WINDOWS, "rate")) for r in RESOURCES for k in PSI_KINDS
}


class PsiSource:
    """Reads the three system-wide PSI files."""

    group = "psi"

    def __init__(self, proc_root: Path, *, problems: ProblemLog | None = None) -> None:
        self._root = proc_root / "pressure"
        self._paths = {resource: str(self._root / resource) for resource in RESOURCES}
        self._problems = problems or ProblemLog(log)
        self._last: dict[tuple[str, str], tuple[float, int]] = {}
        self.backend = BACKEND if self._root.is_dir() else "none"

    def read(self, now: float) -> list[Reading]:
        out: list[Reading] = []
        for resource in RESOURCES:
            path = self._paths[resource]
            try:
                lines = parse_psi(read_text(path), source=path)
            except Unavailable as exc:
                self._problems.problem(f"psi.{resource}", exc.reason)
                self._forget(resource)
                reason = exc.reason
                if exc.kind is Absence.UNSUPPORTED and not self._root.is_dir():
                    reason += " (kernel without PSI, or booted without psi=1)"
                for kind in PSI_KINDS:
                    for what in (*WINDOWS, "rate"):
                        out.append(Reading.absent(signal_name(resource, kind, what), BACKEND, exc.kind, reason))
                continue
            self._problems.ok(f"psi.{resource}")
            for kind in PSI_KINDS:
                out.extend(self._lines(resource, kind, lines.get(kind), now))
        return out

    def _forget(self, resource: str) -> None:
        for kind in PSI_KINDS:
            self._last.pop((resource, kind), None)

    def _lines(self, resource: str, kind: str, line: PsiLine | None, now: float) -> list[Reading]:
        if line is None:
            reason = f"{self._root / resource}: no '{kind}' line"
            return [
                Reading.absent(signal_name(resource, kind, w), BACKEND, Absence.UNSUPPORTED, reason)
                for w in (*WINDOWS, "rate")
            ]
        avg10, avg60, avg300, rate_name = _NAMES[resource, kind]
        out = [
            Reading(avg10, line.avg10, BACKEND),
            Reading(avg60, line.avg60, BACKEND),
            Reading(avg300, line.avg300, BACKEND),
        ]
        key = (resource, kind)
        previous = self._last.get(key)
        self._last[key] = (now, line.total_us)
        if previous is None:
            out.append(Reading.absent(rate_name, BACKEND, Absence.WARMING_UP, "first reading; a rate needs two"))
        elif line.total_us < previous[1] or now <= previous[0]:
            out.append(Reading.absent(rate_name, BACKEND, Absence.READ_ERROR, "total= went backwards; restarting"))
        else:
            stalled_s = (line.total_us - previous[1]) / 1e6
            out.append(Reading(rate_name, min(100.0, 100.0 * stalled_s / (now - previous[0])), BACKEND))
        return out

    def totals(self) -> list[Total]:
        """Seconds stalled since boot per resource and line (the kernel's ``total=``)."""
        return [Total(signal_name(r, k, "seconds"), total_us / 1e6) for (r, k), (_, total_us) in self._last.items()]

    def close(self) -> None:
        """Nothing to release."""
