"""The cgroup files the node guard reads and writes: one table, resource -> its file on cgroup v1
(in which controller's tree) and on cgroup v2, after koordlet's registry of cgroup resources.
Every v1 or v2 file name the guard uses comes from here, and so do the files that tell which
layout is mounted (:func:`detect_layout`).

Three layouts exist (:class:`~mco_py.collector.cgroups.Layout`): cgroup v2 (every controller in
one tree), cgroup v1 (a tree per controller: ``cpu``, ``memory``, ``blkio``), and the hybrid one
this kind of host often has: v1 controllers plus a v2 tree at ``<root>/unified`` whose cgroups
carry ``cpu/io/memory.pressure`` even with no controller enabled there.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mco_py.collector.cgroups import Layout
from mco_py.errors import ConfigError


@dataclass(frozen=True, slots=True)
class CgroupFile:
    """One resource's file in each cgroup version."""

    controller: str
    """The controller whose tree has it: cpu, memory or io (blkio on v1)."""
    v1: str
    """Its name on cgroup v1."""
    v2: str
    """Its name on cgroup v2 ("" where v2 has none: the v1 period is part of ``cpu.max``)."""
    limit: bool = False
    """A limit the guard writes (journalled first, and only such files are ever restored)."""
    per_device: bool = False
    """One line per block device (``MAJ:MIN ...``), written a line at a time."""

    def name(self, version: int) -> str:
        """The file's name on cgroup ``version`` (1 or 2)."""
        return self.v2 if version == 2 else self.v1


class CgroupResource(enum.StrEnum):
    """What the guard reads or limits in a group."""

    CPU_QUOTA = "cpu quota"
    CPU_PERIOD = "cpu period"
    CPU_WEIGHT = "cpu weight"
    MEMORY_LIMIT = "memory limit"
    MEMORY_USAGE = "memory usage"
    IO_READ_LIMIT = "io read limit"
    IO_WRITE_LIMIT = "io write limit"
    IO_BYTES = "io bytes"


#: The table: every cgroup file the guard reads or writes.
FILES: Mapping[CgroupResource, CgroupFile] = {
    CgroupResource.CPU_QUOTA: CgroupFile("cpu", "cpu.cfs_quota_us", "cpu.max", limit=True),
    CgroupResource.CPU_PERIOD: CgroupFile("cpu", "cpu.cfs_period_us", ""),
    CgroupResource.CPU_WEIGHT: CgroupFile("cpu", "cpu.shares", "cpu.weight", limit=True),
    # v2: over memory.high the kernel reclaims and slows the group, never OOM-kills; v1: a group
    # over its soft limit is reclaimed first when memory runs short
    CgroupResource.MEMORY_LIMIT: CgroupFile("memory", "memory.soft_limit_in_bytes", "memory.high", limit=True),
    CgroupResource.MEMORY_USAGE: CgroupFile("memory", "memory.usage_in_bytes", "memory.current"),
    CgroupResource.IO_READ_LIMIT: CgroupFile(
        "io", "blkio.throttle.read_bps_device", "io.max", limit=True, per_device=True
    ),
    CgroupResource.IO_WRITE_LIMIT: CgroupFile(
        "io", "blkio.throttle.write_bps_device", "io.max", limit=True, per_device=True
    ),
    CgroupResource.IO_BYTES: CgroupFile("io", "blkio.throttle.io_service_bytes", "io.stat"),
}

#: Where each controller's v1 tree is mounted below the cgroup root (the first of these names).
V1_MOUNTS: Mapping[str, tuple[str, ...]] = {
    "cpu": ("cpu", "cpu,cpuacct", "cpuacct,cpu"),
    "memory": ("memory",),
    "io": ("blkio",),
}

_BY_NAME = {n: file for file in FILES.values() for n in (file.v1, file.v2) if n}

#: The only files a journal may name (anything else in one is ignored, never written).
JOURNALLED_FILES = tuple(dict.fromkeys(n for f in FILES.values() if f.limit for n in (f.v2, f.v1)))
#: Files that hold one line per block device, written a line at a time.
DEVICE_FILES = tuple(dict.fromkeys(n for f in FILES.values() if f.per_device for n in (f.v2, f.v1)))


def file_name(resource: CgroupResource, version: int) -> str:
    """The name of ``resource``'s file on cgroup ``version``."""
    return FILES[resource].name(version)


def root_for(layout: Layout, file: str) -> Path:
    """The tree whose groups have the file ``file`` (``cpu.max``, ``memory.high``, ``io.max``, ...)."""
    entry = _BY_NAME.get(file)
    if entry is None:
        raise ConfigError(f"{file} is not a cgroup file of the guard's")
    root = {"cpu": layout.cpu_root, "memory": layout.memory_root, "io": layout.io_root}[entry.controller]
    if root is None:
        raise ConfigError(f"no controller for {file} is mounted")
    return root


def path(layout: Layout, group: str, file: str) -> Path:
    """``group``'s file ``file``; ConfigError when the group escapes the tree."""
    return root_for(layout, file) / layout.check_group(group) / file


def read(layout: Layout, group: str, file: str) -> str:
    """The file's text as the kernel shows it (``-1``, ``max 100000``, ``1024``)."""
    return path(layout, group, file).read_text().strip()


def detect_layout(root: Path = Path("/sys/fs/cgroup")) -> Layout:
    """The layout mounted at ``root``; ConfigError saying what is missing."""
    controllers = root / "cgroup.controllers"
    if controllers.is_file():
        enabled = controllers.read_text().split()
        if "cpu" not in enabled:
            raise ConfigError(f"{root}: cgroup v2 without the cpu controller (enable it in cgroup.subtree_control)")
        return Layout(root, 2, root, root if "memory" in enabled else None, root if "io" in enabled else None)
    cpu = _v1_mount(root, CgroupResource.CPU_QUOTA)
    if cpu is None:
        raise ConfigError(f"{root}: neither a cgroup v2 tree with cpu nor a cgroup v1 cpu controller is mounted there")
    unified = root / "unified"
    return Layout(
        cpu,
        1,
        unified if (unified / "cgroup.procs").is_file() else None,
        _v1_mount(root, CgroupResource.MEMORY_USAGE),
        _v1_mount(root, CgroupResource.IO_READ_LIMIT),
    )


def _v1_mount(root: Path, resource: CgroupResource) -> Path | None:
    """Where the v1 controller of ``resource`` is mounted: the first of its mounts with the file."""
    file = FILES[resource]
    return next((root / mount for mount in V1_MOUNTS[file.controller] if (root / mount / file.v1).is_file()), None)
