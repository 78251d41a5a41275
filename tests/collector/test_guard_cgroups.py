"""The node guard against this host's real cgroups (root): cgroup v1 ``cpu`` controller for the
limits, the v2 tree at /sys/fs/cgroup/unified for the pressure. CPU hogs in an online and an
offline group make the online group stall; the collector's guard limits the offline group,
survives kill -9 without leaving the limit behind, and restores it on a clean stop."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from mco_py.collector.guard.files import detect_layout

ROOT = Path("/sys/fs/cgroup")


def _usable() -> str:
    if os.geteuid() != 0:
        return "needs root"
    try:
        layout = detect_layout(ROOT)
    except Exception as exc:
        return str(exc)
    if layout.version != 1 or layout.pressure_root is None:
        return "written for the hybrid layout (v1 cpu controller, v2 pressure tree)"
    return ""


pytestmark = [pytest.mark.root, pytest.mark.skipif(bool(_usable()), reason=_usable() or "usable")]


class Groups:
    def __init__(self, name: str) -> None:
        layout = detect_layout(ROOT)
        assert layout.pressure_root is not None
        self.cpu = layout.cpu_root / name
        self.unified = layout.pressure_root / name
        self.name = name
        for tree in (self.cpu, self.unified):
            for cls in ("online", "offline"):
                (tree / cls).mkdir(parents=True, exist_ok=True)
        self.hogs: list[subprocess.Popen[bytes]] = []

    def hog(self, cls: str, workers: int) -> None:
        """``workers`` busy loops in group ``cls`` of both trees."""
        for _ in range(workers):
            proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for tree in (self.cpu, self.unified):
                (tree / cls / "cgroup.procs").write_text(str(proc.pid))
            self.hogs.append(proc)

    def stop_hogs(self) -> None:
        for proc in self.hogs:
            proc.kill()
            proc.wait()
        self.hogs.clear()

    def quota(self) -> int:
        return int((self.cpu / "offline" / "cpu.cfs_quota_us").read_text())

    def remove(self) -> None:
        self.stop_hogs()
        for tree in (self.cpu, self.unified):
            for cls in ("online", "offline"):
                with contextlib.suppress(OSError):
                    (tree / cls).rmdir()
            with contextlib.suppress(OSError):
                tree.rmdir()


@pytest.fixture
def groups() -> Iterator[Groups]:
    made = Groups(f"mco-guard-test-{os.getpid()}")
    try:
        yield made
    finally:
        made.remove()


def collector(tmp_path: Path, groups: Groups, mode: str = "on") -> subprocess.Popen[bytes]:
    config = tmp_path / "collector.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "stream": {"enabled": False},
                "metricsHost": "127.0.0.1",
                "metricsPort": 0,
                "bioBackend": "off",
                "llc": "off",
                "resctrl": "off",
                "onlineCgroups": [f"{groups.name}/online"],
                "offlineCgroups": [f"{groups.name}/offline"],
                "guard": {
                    "mode": mode,
                    "interval": 0.5,
                    "journal": str(tmp_path / "guard-limits.json"),
                    "rules": {"throttleAbove": 10, "releaseBelow": 2, "calmIntervals": 2, "floor": 0.1},
                },
            }
        )
    )
    with (tmp_path / "collector.log").open("ab") as log:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "mco_py.cli", "collector", "--config", str(config)], stdout=log, stderr=log
        )


def until(cond: Callable[[], bool], what: str, tmp_path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            log = (tmp_path / "collector.log").read_text()[-3000:]
            raise AssertionError(f"timed out waiting for {what}; collector log:\n{log}")
        time.sleep(0.1)


@pytest.mark.timeout(180)
def test_the_guard_limits_offline_cpu_and_survives_kill_9(groups: Groups, tmp_path: Path) -> None:
    assert groups.quota() == -1
    online_quota = (groups.cpu / "online" / "cpu.cfs_quota_us").read_text()
    # more online busy loops than CPUs: the online group always waits for CPU (the offline
    # group's lowest weight cannot help), so the guard goes on to limit the offline quota
    cpus = len(os.sched_getaffinity(0))
    groups.hog("online", cpus + 1)
    groups.hog("offline", 2)
    first = collector(tmp_path, groups)
    journal = tmp_path / "guard-limits.json"
    try:
        until(lambda: groups.quota() > 0, "the offline group limited", tmp_path)
        assert json.loads(journal.read_text())["limits"] == {
            f"{groups.name}/offline/cpu.shares": "1024",
            f"{groups.name}/offline/cpu.cfs_quota_us": "-1",
        }
        assert (groups.cpu / "offline" / "cpu.shares").read_text().strip() == "2"
        assert (groups.cpu / "online" / "cpu.cfs_quota_us").read_text() == online_quota, "online never limited"
        # killed with the limit in place: the limit outlives it, the journal says what to undo
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert groups.quota() > 0
        assert journal.exists()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)
    # the batch work stops; a new collector (guard switched off meanwhile) undoes the stale limit
    groups.stop_hogs()
    second = collector(tmp_path, groups, mode="off")
    try:
        until(lambda: groups.quota() == -1, "the stale limit restored at start", tmp_path)
        until(lambda: not journal.exists(), "the journal removed", tmp_path)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(20)
    # and a clean stop while limiting puts the limit back too
    groups.hog("online", cpus + 1)
    groups.hog("offline", 2)
    third = collector(tmp_path, groups)
    try:
        until(lambda: groups.quota() > 0, "the offline group limited again", tmp_path)
        third.send_signal(signal.SIGTERM)
        assert third.wait(20) == 0
    finally:
        if third.poll() is None:
            third.kill()
            third.wait(10)
    assert groups.quota() == -1
    assert (groups.cpu / "offline" / "cpu.shares").read_text().strip() == "1024"
    assert not journal.exists()
    log = (tmp_path / "collector.log").read_text()
    assert "restored the CPU limits a killed guard left" in log
    assert '"action": "throttle"' in log


def _read_bytes(group: Path, device: str) -> int:
    """Bytes ``group``'s own tasks have read from ``device`` (v1 blkio)."""
    for line in (group / "blkio.throttle.io_service_bytes").read_text().splitlines():
        parts = line.split()
        if parts[:2] == [device, "Read"]:
            return int(parts[2])
    return 0


@pytest.mark.timeout(120)
def test_memory_and_io_limits_on_real_v1_controllers(tmp_path: Path) -> None:
    """This host's v1 memory and blkio controllers take the guard's limits and give them back:
    an offline group that uses memory and reads the disk (direct I/O) from a group below it (as a
    pod's container does) gets a soft limit, and that group a read bandwidth limit on the device
    (v1 throttling is flat: a rule on the offline group itself would not slow it), which the
    reader then keeps to, while the online group (a pressure tree of our own, for a pressure we
    choose) stalls; it loses both when it is calm."""
    from mco_py.analysis.guard import GuardRules
    from mco_py.collector.guard.loop import NodeGuard
    from tests.collector.test_guard import Clock, set_stall, v2_tree

    real = detect_layout(ROOT)
    if real.memory_root is None or real.io_root is None:
        pytest.skip("needs the v1 memory and blkio controllers")
    disks = [p for p in Path("/sys/block").iterdir() if p.name.startswith(("vd", "sd", "nvme"))]
    if not disks:
        pytest.skip("no disk to read from")
    device = (disks[0] / "dev").read_text().strip()
    name = f"mco-guard-memio-{os.getpid()}"
    made = [real.memory_root / name / "offline", real.io_root / name / "offline", real.cpu_root / name / "offline"]
    for group in made:
        group.mkdir(parents=True, exist_ok=True)
    container = made[1] / "container"  # where the reader's I/O is throttled, or not at all
    container.mkdir()
    pressure = v2_tree(tmp_path / "pressure", [f"{name}/online", f"{name}/offline"])
    layout = dataclasses.replace(real, pressure_root=pressure)
    disk = tmp_path / "data"  # on that disk; read with O_DIRECT, so every read reaches it
    disk.write_bytes(os.urandom(64 * 2**20))
    os.sync()
    worker = subprocess.Popen(
        [sys.executable, "-c",
         "import mmap, os, sys, time\n"
         "m = bytearray(64 * 2**20)\n"  # memory the group is charged for
         "for i in range(0, len(m), 4096): m[i] = 1\n"
         "fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)\n"
         "buf = mmap.mmap(-1, 1 << 20)\n"
         "end = time.monotonic() + 60\n"
         "while time.monotonic() < end:\n"
         "    os.lseek(fd, 0, 0)\n"
         "    for _ in range(64): os.readv(fd, [buf])\n",
         str(disk)],
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for group in (made[0], container, made[2]):
            (group / "cgroup.procs").write_text(str(worker.pid))
        clock = Clock()
        guard = NodeGuard(layout, online=[f"{name}/online"], offline=[f"{name}/offline"], rules=GuardRules(),
                          mode="on", journal_path=tmp_path / "j.json", cpus=2, clock=clock)  # fmt: skip
        guard.step()
        time.sleep(1.0)
        clock.now = 1.0
        guard.step()  # a rate over the last second
        free = _read_bytes(container, device)
        for i in (2, 3, 4):  # the online group stalls half of each second: cut to half, a quarter, an eighth
            set_stall(pressure, f"{name}/online", "memory", 500_000 * (i - 1))
            set_stall(pressure, f"{name}/online", "io", 500_000 * (i - 1))
            time.sleep(1.0)
            clock.now = float(i)
            guard.step()
        free = (_read_bytes(container, device) - free) / 3
        soft = int((made[0] / "memory.soft_limit_in_bytes").read_text())
        assert 16 * 2**20 <= soft < 2**40, "a share of its use, not unlimited"
        limits = (container / "blkio.throttle.read_bps_device").read_text().split()
        assert limits[0] == device
        limit = int(limits[1])
        assert 2**20 <= limit <= 0.5 * free, (limit, free)
        own = (made[1] / "blkio.throttle.read_bps_device").read_text().split()
        assert own == [device, str(2**64 - 2)], "the offline group itself does no I/O: only the counting rule"
        before = _read_bytes(container, device)
        time.sleep(2.0)
        assert (_read_bytes(container, device) - before) / 2 <= 1.5 * limit, "the reader keeps to its limit"
        assert guard.writer.counts().failures == 0
        for i in range(5, 120):  # calm: up in steps, then lifted
            clock.now = float(i)
            guard.step()
        assert int((made[0] / "memory.soft_limit_in_bytes").read_text()) > 2**60, "unlimited again"
        rule = (container / "blkio.throttle.read_bps_device").read_text().split()
        assert rule == [device, str(2**64 - 2)], "only the rule that lets the kernel count the group's I/O"
        guard.close()
        for group in (made[1], container):
            assert (group / "blkio.throttle.read_bps_device").read_text().strip() == ""
            assert (group / "blkio.throttle.write_bps_device").read_text().strip() == ""
    finally:
        worker.kill()
        worker.wait()
        with contextlib.suppress(OSError):
            container.rmdir()
        for group in made:
            with contextlib.suppress(OSError):
                group.rmdir()
                group.parent.rmdir()
