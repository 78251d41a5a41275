"""The TCG test node itself (testbed/vm.py): what it boots into, and that a run never outlives
its timeout or its caller."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testbed import system, vm
from testbed.errors import TestbedError
from tests.vm.runner import scenario

pytestmark = [pytest.mark.vm, pytest.mark.slow, pytest.mark.timeout(600)]  # the first test builds the node
REPO = Path(__file__).resolve().parents[2]


def qemu_runs() -> list[tuple[int, list[str]]]:
    """QEMU processes started by vm.run (they name a file under its runs directory)."""
    runs = str(vm.cache_root() / "runs")
    return [(pid, argv) for pid, argv in system.processes() if argv[0].endswith(vm.QEMU) and runs in " ".join(argv)]


def test_the_node_boots_into_pure_cgroup_v2_with_pressure_and_two_virtio_disks(node: vm.Node) -> None:
    got: Any = scenario(node, "facts")
    assert got["kernel"].startswith("6.1."), "Debian bookworm's cloud kernel"
    assert got["python"].startswith("3.11."), "the node image's python3, the host's minor version"
    assert {"cpu", "io", "memory", "cpuset", "pids"} <= set(got["controllers"])
    assert got["subtree_control"] == ["cpu", "io", "memory"]
    assert ["/sys/fs/cgroup", "cgroup2"] in got["mounts"]
    assert not any(fstype == "cgroup" for _, fstype in got["mounts"]), "no v1 hierarchy"
    root = "/sys/fs/cgroup"
    assert got["layout"] == {"version": 2, "cpu_root": root, "pressure_root": root, "memory_root": root,
                             "io_root": root}  # fmt: skip
    assert {"cpu", "io", "memory"} <= set(got["node_pressure"])
    assert {"cpu.max", "cpu.weight", "memory.high", "io.max", "cpu.pressure", "io.pressure", "memory.pressure"} <= set(
        got["group_files"]
    )
    assert set(got["disks"]) == {"vda", "vdb"}
    assert got["cpus"] == 2
    assert got["boot_s"] < 20, "user space in seconds, even emulated"


def test_a_run_over_its_timeout_is_killed_and_leaves_nothing(node: vm.Node) -> None:
    started = time.monotonic()
    outcome = vm.run(node, vm.Payload(command=("sleep", "600")), timeout=15)
    assert outcome.exit is None
    assert outcome.result is None
    assert outcome.boot_seconds is not None, "it booted, then ran out of time"
    assert time.monotonic() - started < 60
    with pytest.raises(TestbedError, match="timed out or crashed"):
        outcome.checked()
    assert qemu_runs() == []
    assert not any(p.name.startswith(f"{os.getpid()}-") for p in (vm.cache_root() / "runs").iterdir())


def test_a_killed_caller_takes_its_vm_with_it(node: vm.Node) -> None:
    caller = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from pathlib import Path; from testbed import vm\n"
         "vm.run(vm.Node.at(Path(sys.argv[1])), vm.Payload(command=('sleep', '600')), timeout=300)",
         str(node.directory)],
        cwd=REPO,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not any(f"/runs/{caller.pid}-" in " ".join(argv) for _, argv in qemu_runs()):
            assert time.monotonic() < deadline, "no QEMU started"
            assert caller.poll() is None, "the caller ended early"
            time.sleep(0.2)
        caller.send_signal(signal.SIGKILL)
        caller.wait(10)
        deadline = time.monotonic() + 10
        while qemu_runs():
            assert time.monotonic() < deadline, f"QEMU outlived its caller: {qemu_runs()}"
            time.sleep(0.1)
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait(10)
    left = [p for p in (vm.cache_root() / "runs").iterdir() if p.name.startswith(f"{caller.pid}-")]
    assert len(left) == 1, "a killed caller cannot clean up after itself"
    assert vm.clean_runs() == left, "the next run removes what it left"
