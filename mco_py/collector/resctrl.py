"""Intel RDT / AMD PQoS monitoring through resctrl (extra signals, only where mounted).

Reads the root group's ``mon_data/mon_L3_*/{llc_occupancy,mbm_total_bytes}``
under ``<sys>/fs/resctrl``: LLC occupancy (bytes, summed over cache domains)
and memory bandwidth (bytes/s from the change of mbm_total_bytes).
"""

from __future__ import annotations

import logging
from pathlib import Path

from mco_py.collector.procfs import read_text
from mco_py.collector.signals import Absence, Reading, Total, Unavailable
from mco_py.collector.source import ProblemLog

log = logging.getLogger(__name__)

OCCUPANCY = "llcOccupancyBytes"
BANDWIDTH = "memBandwidthBytesPerSecond"
BACKEND = "resctrl"


def _has_resctrl_fs(proc_root: Path) -> bool:
    try:
        return any(line.split()[-1] == "resctrl" for line in read_text(proc_root / "filesystems").splitlines() if line)
    except Unavailable:
        return False


class ResctrlSource:
    """LLC occupancy and memory bandwidth of the whole host (root resctrl group)."""

    group = "resctrl"

    def __init__(self, proc_root: Path, sys_root: Path, *, problems: ProblemLog | None = None) -> None:
        self._problems = problems or ProblemLog(log)
        self._mon = sys_root / "fs/resctrl/mon_data"
        self._why: Unavailable | None = None
        self._last: tuple[float, int] | None = None
        if not (sys_root / "fs/resctrl/info").is_dir():
            fs = "kernel supports resctrl" if _has_resctrl_fs(proc_root) else "kernel/CPU without resctrl"
            self._why = Unavailable(f"{sys_root / 'fs/resctrl'} not mounted ({fs})", Absence.UNSUPPORTED)
        elif not self._mon.is_dir():
            self._why = Unavailable("resctrl mounted without monitoring (no mon_data)", Absence.UNSUPPORTED)
        self.backend = "none" if self._why else BACKEND

    def _sum(self, name: str) -> int | None:
        total, found = 0, False
        for domain in sorted(self._mon.glob("mon_L3_*")):
            path = domain / name
            if not path.exists():
                continue
            text = read_text(path).strip()
            if text == "Unavailable":
                continue
            try:
                total += int(text)
            except ValueError as exc:
                raise Unavailable(f"{path}: bad number {text[:40]!r}", Absence.READ_ERROR) from exc
            found = True
        return total if found else None

    def read(self, now: float) -> list[Reading]:
        if self._why is not None:
            return [Reading.absent(n, BACKEND, self._why.kind, self._why.reason) for n in (OCCUPANCY, BANDWIDTH)]
        try:
            occupancy = self._sum("llc_occupancy")
            traffic = self._sum("mbm_total_bytes")
        except Unavailable as exc:
            self._problems.problem("resctrl", exc.reason)
            self._last = None
            return [Reading.absent(n, BACKEND, exc.kind, exc.reason) for n in (OCCUPANCY, BANDWIDTH)]
        self._problems.ok("resctrl")
        out = [
            Reading(OCCUPANCY, float(occupancy), BACKEND)
            if occupancy is not None
            else Reading.absent(OCCUPANCY, BACKEND, Absence.UNSUPPORTED, "no llc_occupancy (CMT not supported)")
        ]
        if traffic is None:
            out.append(
                Reading.absent(BANDWIDTH, BACKEND, Absence.UNSUPPORTED, "no mbm_total_bytes (MBM not supported)")
            )
            return out
        previous, self._last = self._last, (now, traffic)
        if previous is None:
            out.append(Reading.absent(BANDWIDTH, BACKEND, Absence.WARMING_UP, "first reading; a rate needs two"))
        elif traffic < previous[1] or now <= previous[0]:
            out.append(Reading.absent(BANDWIDTH, BACKEND, Absence.READ_ERROR, "mbm_total_bytes went backwards"))
        else:
            out.append(Reading(BANDWIDTH, (traffic - previous[1]) / (now - previous[0]), BACKEND))
        return out

    def totals(self) -> list[Total]:
        """No running counts."""
        return []

    def close(self) -> None:
        """Nothing to release."""
