"""cgroups for the node guard: where a group's CPU limit and pressure files are, and a journal
that puts back every limit the guard wrote.

Three layouts exist: cgroup v2 (``cpu.max`` and ``*.pressure`` in one tree), cgroup v1 (``cpu``
controller: ``cpu.cfs_quota_us``/``cpu.cfs_period_us``; no pressure per group), and the hybrid
one this kind of host often has: v1 controllers plus a v2 tree at ``<root>/unified`` whose
cgroups carry ``cpu/io/memory.pressure`` even with no controller enabled there. Groups are
paths relative to each tree's root (``offline.slice``, ``kubepods.slice/...``); on the hybrid
layout a workload is in both trees (systemd puts it there, a test moves it).

Before the guard first changes a group's limit it records the value it found in the journal
(a JSON file, written atomically); :meth:`Journal.restore` writes those values back and removes
the file. The guard calls it when it stops, and when it starts (a journal left behind means the
last guard was killed with its limits in place).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mco_py.collector.procfs import parse_psi
from mco_py.collector.signals import Absence, Reading, Total, Unavailable
from mco_py.collector.workload_groups import WorkloadGroups
from mco_py.errors import ConfigError

V1_PERIOD_US = 100_000
#: The smallest quota the kernel takes (1 ms).
MIN_QUOTA_US = 1_000


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

    def root_for(self, name: str) -> Path:
        """The tree whose groups have the file ``name`` (``cpu.max``, ``memory.high``, ``io.max``, ...)."""
        if name.startswith("memory."):
            root = self.memory_root
        elif name.startswith(("io.", "blkio.")):
            root = self.io_root
        else:
            return self.cpu_root
        if root is None:
            raise ConfigError(f"no controller for {name} is mounted")
        return root

    def check_group(self, group: str) -> str:
        """``group`` normalised (no leading or trailing ``/``); ConfigError when it escapes the tree."""
        clean = group.strip("/")
        if not clean or any(part in ("", ".", "..") for part in clean.split("/")):
            raise ConfigError(f"cgroup {group!r}: expected a path below the cgroup root, e.g. offline.slice")
        return clean


def detect_layout(root: Path = Path("/sys/fs/cgroup")) -> Layout:
    """The layout mounted at ``root``; ConfigError saying what is missing."""
    controllers = root / "cgroup.controllers"
    if controllers.is_file():
        enabled = controllers.read_text().split()
        if "cpu" not in enabled:
            raise ConfigError(f"{root}: cgroup v2 without the cpu controller (enable it in cgroup.subtree_control)")
        return Layout(root, 2, root, root if "memory" in enabled else None, root if "io" in enabled else None)
    for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        if (root / name / "cpu.cfs_quota_us").is_file():
            unified = root / "unified"
            memory = root / "memory"
            blkio = root / "blkio"
            return Layout(
                root / name,
                1,
                unified if (unified / "cgroup.procs").is_file() else None,
                memory if (memory / "memory.usage_in_bytes").is_file() else None,
                blkio if (blkio / "blkio.throttle.read_bps_device").is_file() else None,
            )
    raise ConfigError(f"{root}: neither a cgroup v2 tree with cpu nor a cgroup v1 cpu controller is mounted there")


class CpuLimits:
    """Reads and writes a group's CPU controller files in its layout's own terms: the quota
    (``cpu.cfs_quota_us`` / ``cpu.max``) and the weight (``cpu.shares`` / ``cpu.weight``)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.quota_file = "cpu.max" if layout.version == 2 else "cpu.cfs_quota_us"
        self.weight_file = "cpu.weight" if layout.version == 2 else "cpu.shares"
        self.lowest_weight = "1" if layout.version == 2 else "2"
        """The kernel's smallest weight (the kubelet gives BestEffort pods the same)."""

    def path(self, group: str, name: str = "") -> Path:
        """The file ``name`` (default: the quota) of ``group``."""
        name = name or self.quota_file
        return self.layout.root_for(name) / self.layout.check_group(group) / name

    def read_raw(self, group: str, name: str = "") -> str:
        """The file's text as the kernel shows it (``-1``, ``max 100000``, ``1024``)."""
        return self.path(group, name).read_text().strip()

    def write_raw(self, group: str, text: str, name: str = "") -> None:
        """Write ``text`` to the file."""
        with self.path(group, name).open("w") as file:  # one write(2), as the kernel wants it
            file.write(text)

    def text_for(self, group: str, cores: float | None) -> str:
        """What to write for a limit of ``cores`` CPUs (None: unlimited)."""
        if self.layout.version == 2:
            period = _v2_period(self.read_raw(group))
            return f"max {period}" if cores is None else f"{_quota(cores, period)} {period}"
        if cores is None:
            return "-1"
        period_file = self.layout.cpu_root / self.layout.check_group(group) / "cpu.cfs_period_us"
        period = int(period_file.read_text().strip() or V1_PERIOD_US)
        return str(_quota(cores, period))

    def cores(self, group: str) -> float | None:
        """The limit now, in CPUs (None: unlimited)."""
        return self.cores_of(group, self.read_raw(group))

    def cores_of(self, group: str, raw: str) -> float | None:
        """The quota text ``raw`` of ``group`` in CPUs (None: unlimited)."""
        if self.layout.version == 2:
            quota, _, period = raw.partition(" ")
            return None if quota == "max" else int(quota) / int(period or V1_PERIOD_US)
        quota_us = int(raw)
        if quota_us < 0:
            return None
        period_file = self.layout.cpu_root / self.layout.check_group(group) / "cpu.cfs_period_us"
        return quota_us / int(period_file.read_text().strip() or V1_PERIOD_US)


def _v2_period(raw: str) -> int:
    _, _, period = raw.partition(" ")
    return int(period) if period.isdigit() else V1_PERIOD_US


def _quota(cores: float, period: int) -> int:
    return max(MIN_QUOTA_US, math.floor(cores * period))


#: Files that hold one line per block device (``MAJ:MIN ...``), written a line at a time.
DEVICE_FILES = ("io.max", "blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device")
#: What a v2 ``io.max`` line takes to lift a device's bandwidth limits.
V2_DEVICE_RESET = "rbps=max wbps=max"
#: The only files a journal may name (anything else in one is ignored, never written).
JOURNALLED_FILES = (
    "cpu.max",
    "cpu.weight",
    "cpu.cfs_quota_us",
    "cpu.shares",
    "memory.high",
    "memory.soft_limit_in_bytes",
    *DEVICE_FILES,
)


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


def _write_line(path: Path, text: str) -> None:
    with path.open("w") as file:  # one write(2), as the kernel wants it
        file.write(text)


def restore_devices(path: Path, original: str, *, v2: bool) -> None:
    """Put a per-device file back as ``original`` showed it: devices limited since get their
    limit lifted, devices it listed get their line back."""
    before = device_values(original)
    for device in device_values(path.read_text()):
        if device not in before:
            _write_line(path, f"{device} {V2_DEVICE_RESET if v2 else '0'}")
    for device, value in before.items():
        _write_line(path, f"{device} {value}")


class Journal:
    """The files as they were before the guard changed them (``{"group/file": text}``), on disk.

    Entries a killed guard left are read at once, so they are never taken again as "originals"
    and stay until written back; an entry whose write-back fails stays too (retried later).
    """

    def __init__(self, path: Path, limits: CpuLimits) -> None:
        self.path = path
        self.limits = limits
        self.problems: list[str] = []
        """Why entries on disk could not be read (then the file is left alone for a person)."""
        self._saved: dict[str, str] = self._load()

    def _load(self) -> dict[str, str]:
        try:
            document = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            self.problems.append(f"{self.path}: unreadable journal ({exc}); limits it recorded may remain")
            return {}
        entries = document.get("limits") if isinstance(document, dict) else None
        if not isinstance(entries, dict):
            self.problems.append(f"{self.path}: no 'limits' mapping; limits it recorded may remain")
            return {}
        out: dict[str, str] = {}
        for key, text in entries.items():
            group, _, name = str(key).rpartition("/")
            try:
                self.limits.layout.check_group(group)
            except ConfigError:
                continue
            if name in JOURNALLED_FILES and isinstance(text, str):
                out[str(key)] = text
        return out

    def __bool__(self) -> bool:
        return bool(self._saved)

    def holds(self, name: str) -> bool:
        """True while some group's file ``name`` waits to be written back."""
        return any(key.endswith("/" + name) for key in self._saved)

    def original(self, group: str, name: str) -> str | None:
        """What ``group``'s file ``name`` held before the guard first changed it, if it did."""
        return self._saved.get(f"{self.limits.layout.check_group(group)}/{name}")

    def remember(self, group: str, name: str = "") -> None:
        """Record ``group``'s file ``name`` (default: the quota) as it is now, once, and on disk
        before anything changes it."""
        key = f"{self.limits.layout.check_group(group)}/{name or self.limits.quota_file}"
        if key in self._saved:
            return
        self._saved[key] = self.limits.read_raw(group, name)
        self._write()

    def _write(self) -> None:
        if self.problems:  # an unreadable journal is evidence: never replace it
            raise OSError(f"{self.path} is unreadable; move it away once its limits are checked")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        document = {"cpuRoot": str(self.limits.layout.cpu_root), "limits": self._saved}
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w") as file:
                json.dump(document, file)
                file.flush()
                os.fsync(file.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def restore(self, only: str = "", group: str = "") -> list[str]:
        """Write back every recorded file (this run's and those a killed guard left), or with
        ``only`` just the files of that name, with ``group`` just that group's and those of the
        groups below it (the I/O limits of a v1 pod's containers); the journal keeps
        what is left and goes when empty. Returns what could not be written back (a group gone
        is not a problem)."""
        problems = list(self.problems)
        for key, text in list(self._saved.items()):
            owner, _, name = key.rpartition("/")
            if (only and name != only) or (group and not within(owner, group)):
                continue
            try:
                if name in DEVICE_FILES:
                    restore_devices(self.limits.path(owner, name), text, v2=self.limits.layout.version == 2)
                else:
                    self.limits.write_raw(owner, text, name)
            except FileNotFoundError:
                pass  # the group is gone, and its limit with it
            except (OSError, ConfigError) as exc:
                problems.append(f"{key}: cannot restore {text!r}: {exc}")
                continue
            del self._saved[key]
        if self.problems:
            return problems
        if self._saved:
            self._write()
        else:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        return problems


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
