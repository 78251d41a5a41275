"""What the node guard writes to limit a resource of the offline groups, in each layout's own
files (named by :mod:`.files`); the writer (:mod:`.writer`) writes it.

- CPU (:class:`CpuLimits`): the lowest weight while the guard is on, and a quota of the
  node's CPUs while the online groups stall on CPU.

The memory and I/O limits are a share of what the offline group used when the guard first had to
act (its *baseline*), so one feedback loop serves CPU, memory and I/O alike:

- memory: ``memory.high`` (v2: over it the kernel reclaims and slows the group, never OOM-kills)
  or ``memory.soft_limit_in_bytes`` (v1: the group is reclaimed first when memory runs short),
  at share * the group's usage then;
- I/O: per device, ``io.max`` ``rbps=``/``wbps=`` (v2) or ``blkio.throttle.read_bps_device`` /
  ``write_bps_device`` (v1), at share * the group's bytes per second on that device over the
  interval before (a device it did not use is left alone). v1 throttles only direct I/O and
  reads; buffered writes escape it (a kernel limit of v1). On v1 the kernel counts a group's
  I/O only on devices where it has a rule, so the guard first gives offline groups a rule that
  limits nothing on each disk. v1's throttling is flat, too: a rule limits the tasks of its own
  group only, not those of groups below it (a pod's containers), so on v1 the I/O knob works on
  each group under an offline group as well (:meth:`IoKnob.targets`), each at the share of its
  own rate.

Lines of the per-device files are written one per ``write(2)``, as the kernel wants them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mco_py.collector.cgroups import Layout, device_values
from mco_py.collector.guard import files
from mco_py.collector.guard.files import CgroupResource, file_name
from mco_py.collector.signals import Unavailable

V1_PERIOD_US = 100_000
#: The smallest quota the kernel takes (1 ms).
MIN_QUOTA_US = 1_000
PAGE = 4096
#: The least memory a limit leaves a group (a floor of 0 still lets it run, slowly).
MIN_MEMORY = 16 * 1024 * 1024
#: The least I/O rate a limit leaves a group on a device.
MIN_BPS = 1024 * 1024
#: A v1 throttle rule that limits nothing (the kernel's "no rule" is 2**64 - 1, and 0 deletes one).
NO_LIMIT_RULE = str(2**64 - 2)


@dataclass(frozen=True, slots=True)
class Write:
    """One write of a limit file: ``text`` into ``name``; ``device`` for per-device lines."""

    name: str
    text: str
    device: str = ""

    @property
    def line(self) -> str:
        """What goes into the file: ``text``, after the device for per-device lines."""
        return f"{self.device} {self.text}" if self.device else self.text


class CpuLimits:
    """A group's CPU limits in its layout's own terms: the quota (``cpu.cfs_quota_us`` /
    ``cpu.max``) and the weight (``cpu.shares`` / ``cpu.weight``)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.quota_file = file_name(CgroupResource.CPU_QUOTA, layout.version)
        self.weight_file = file_name(CgroupResource.CPU_WEIGHT, layout.version)
        self.lowest_weight = "1" if layout.version == 2 else "2"
        """The kernel's smallest weight (the kubelet gives BestEffort pods the same)."""

    def text_for(self, group: str, cores: float | None) -> str:
        """What to write for a limit of ``cores`` CPUs (None: unlimited)."""
        if self.layout.version == 2:
            period = _v2_period(files.read(self.layout, group, self.quota_file))
            return f"max {period}" if cores is None else f"{_quota(cores, period)} {period}"
        if cores is None:
            return "-1"
        return str(_quota(cores, self._v1_period(group)))

    def cores(self, group: str) -> float | None:
        """The limit now, in CPUs (None: unlimited)."""
        return self.cores_of(group, files.read(self.layout, group, self.quota_file))

    def cores_of(self, group: str, raw: str) -> float | None:
        """The quota text ``raw`` of ``group`` in CPUs (None: unlimited)."""
        if self.layout.version == 2:
            quota, _, period = raw.partition(" ")
            return None if quota == "max" else int(quota) / int(period or V1_PERIOD_US)
        quota_us = int(raw)
        if quota_us < 0:
            return None
        return quota_us / self._v1_period(group)

    def _v1_period(self, group: str) -> int:
        return int(files.read(self.layout, group, file_name(CgroupResource.CPU_PERIOD, 1)) or V1_PERIOD_US)


def _v2_period(raw: str) -> int:
    _, _, period = raw.partition(" ")
    return int(period) if period.isdigit() else V1_PERIOD_US


def _quota(cores: float, period: int) -> int:
    return max(MIN_QUOTA_US, math.floor(cores * period))


class MemoryKnob:
    """``memory.high`` (v2) or ``memory.soft_limit_in_bytes`` (v1) of offline groups."""

    resource = "memory"

    def __init__(self, layout: Layout) -> None:
        if layout.memory_root is None:
            raise Unavailable("no memory controller mounted")
        self.root = layout.memory_root
        self.v2 = layout.version == 2
        self.file = file_name(CgroupResource.MEMORY_LIMIT, layout.version)
        self.files = (self.file,)
        self._usage = file_name(CgroupResource.MEMORY_USAGE, layout.version)

    def baseline(self, group: str) -> float | None:
        """The group's memory use now, bytes (None: it has none to limit)."""
        used = int((self.root / group / self._usage).read_text().strip())
        return float(used) if used > 0 else None

    def writes(self, group: str, share: float, baseline: float) -> list[Write]:
        limit = max(MIN_MEMORY, int(share * baseline) // PAGE * PAGE)
        return [Write(self.file, str(limit))]

    def holds(self, group: str, write: Write) -> bool:
        """True when the file already says what ``write`` would."""
        current = (self.root / group / write.name).read_text().strip()
        return current == write.text


class IoKnob:
    """Per-device read and write bandwidth of offline groups."""

    resource = "io"

    def __init__(self, layout: Layout, *, clock: Callable[[], float], sys_root: Path = Path("/sys")) -> None:
        if layout.io_root is None:
            raise Unavailable("no io (v2) or blkio (v1) controller mounted")
        self.root = layout.io_root
        self._sys_block = sys_root / "block"
        self.v2 = layout.version == 2
        self._read_file = file_name(CgroupResource.IO_READ_LIMIT, layout.version)
        self._write_file = file_name(CgroupResource.IO_WRITE_LIMIT, layout.version)
        self.files = tuple(dict.fromkeys((self._read_file, self._write_file)))
        """v2: ``io.max`` (both directions on one line); v1: a file each."""
        self._stat_file = file_name(CgroupResource.IO_BYTES, layout.version)
        self._clock = clock
        self._last: dict[str, tuple[float, dict[str, tuple[int, int]]]] = {}
        self._rates: dict[str, dict[str, tuple[float, float]]] = {}

    def targets(self, group: str) -> list[str]:
        """The groups whose files limit ``group``'s I/O: itself on v2 (the kernel limits a group
        with everything below it); on v1 itself and every group below it (a rule limits only its
        own group's tasks), parents first. A group that is not there is returned alone (its
        writes then fail as for any group that went)."""
        if self.v2:
            return [group]
        top = self.root / group
        out = [group]
        for parent, dirs, _ in os.walk(top):
            dirs.sort()
            rel = Path(parent).relative_to(self.root)
            out += [str(rel / d) for d in dirs]
        return out

    def accounting_writes(self, group: str) -> list[Write]:
        """v1 only: the kernel counts a group's I/O on a device only while the group has a
        throttle rule there, so every disk without one gets a rule that limits nothing (the
        largest value the kernel keeps as a rule); journalled and removed like any limit."""
        if self.v2:
            return []
        out = []
        for name in self.files:
            have = device_values((self.root / group / name).read_text())
            out += [Write(name, NO_LIMIT_RULE, device) for device in self._disks() if device not in have]
        return out

    def _disks(self) -> list[str]:
        """``MAJ:MIN`` of every disk (block devices with a device behind them: not loop, ram, zram)."""
        try:
            entries = list(self._sys_block.iterdir())
        except OSError:
            return []
        out = []
        for entry in entries:
            try:
                if (entry / "device").exists():
                    out.append((entry / "dev").read_text().strip())
            except OSError:
                continue
        return sorted(out)

    def _bytes(self, group: str) -> dict[str, tuple[int, int]]:
        """Per device (read bytes, written bytes) since the group exists."""
        out: dict[str, tuple[int, int]] = {}
        if self.v2:
            for line in (self.root / group / self._stat_file).read_text().splitlines():
                device, _, rest = line.partition(" ")
                fields = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
                out[device] = (int(fields.get("rbytes", 0)), int(fields.get("wbytes", 0)))
            return out
        for line in (self.root / group / self._stat_file).read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in ("Read", "Write"):
                read, written = out.get(parts[0], (0, 0))
                value = int(parts[2])
                out[parts[0]] = (value, written) if parts[1] == "Read" else (read, value)
        return out

    def observe(self, group: str) -> None:
        """Measure the group's rates over the interval before (call every interval)."""
        now = self._clock()
        current = self._bytes(group)
        last = self._last.get(group)
        self._last[group] = (now, current)
        if last is None or now <= last[0]:
            return
        span = now - last[0]
        rates = {}
        for device, (read, written) in current.items():
            # a device missing before had no I/O of the group yet: io.stat (v2) lists a device
            # only from the group's first I/O there, counting from 0
            read_before, written_before = last[1].get(device, (0, 0))
            rates[device] = (max(0, read - read_before) / span, max(0, written - written_before) / span)
        self._rates[group] = rates

    def forget(self, keep: set[str]) -> None:
        """Drop the measurements of groups not in ``keep`` (gone, or no longer offline)."""
        for table in (self._last, self._rates):
            for group in [g for g in table if g not in keep]:
                del table[group]

    def baseline(self, group: str) -> Mapping[str, tuple[float, float]] | None:
        """Per device (read, write) bytes per second of the last interval (None: no I/O to limit)."""
        rates = {d: rw for d, rw in self._rates.get(group, {}).items() if rw[0] > 0 or rw[1] > 0}
        return rates or None

    def writes(self, group: str, share: float, baseline: Mapping[str, tuple[float, float]]) -> list[Write]:
        out = []
        for device, (read, written) in sorted(baseline.items()):
            rbps = max(MIN_BPS, int(share * read))
            wbps = max(MIN_BPS, int(share * written))
            if self.v2:
                out.append(Write(self._read_file, f"rbps={rbps} wbps={wbps}", device))
            else:
                out.append(Write(self._read_file, str(rbps), device))
                out.append(Write(self._write_file, str(wbps), device))
        return out

    def holds(self, group: str, write: Write) -> bool:
        values = device_values((self.root / group / write.name).read_text())
        current = values.get(write.device, "")
        if self.v2:  # the kernel shows riops/wiops too
            return current.split()[:2] == write.text.split()
        return current == write.text
