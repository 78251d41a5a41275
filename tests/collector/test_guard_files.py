"""The node guard's table of cgroup files: each resource's v1 and v2 file, the tree it is in,
and that no other module of mco_py names a cgroup file of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mco_py.collector.cgroups import Layout
from mco_py.collector.guard.files import (
    DEVICE_FILES,
    FILES,
    JOURNALLED_FILES,
    CgroupResource,
    detect_layout,
    file_name,
    path,
    root_for,
)
from mco_py.collector.guard.knobs import CpuLimits, IoKnob, MemoryKnob
from mco_py.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "mco_py" / "collector" / "guard" / "files.py"


def test_each_resource_has_its_kernel_file_in_each_version() -> None:
    assert {resource: (file.v1, file.v2) for resource, file in FILES.items()} == {
        CgroupResource.CPU_QUOTA: ("cpu.cfs_quota_us", "cpu.max"),
        CgroupResource.CPU_PERIOD: ("cpu.cfs_period_us", ""),
        CgroupResource.CPU_WEIGHT: ("cpu.shares", "cpu.weight"),
        CgroupResource.MEMORY_LIMIT: ("memory.soft_limit_in_bytes", "memory.high"),
        CgroupResource.MEMORY_USAGE: ("memory.usage_in_bytes", "memory.current"),
        CgroupResource.IO_READ_LIMIT: ("blkio.throttle.read_bps_device", "io.max"),
        CgroupResource.IO_WRITE_LIMIT: ("blkio.throttle.write_bps_device", "io.max"),
        CgroupResource.IO_BYTES: ("blkio.throttle.io_service_bytes", "io.stat"),
    }
    assert file_name(CgroupResource.MEMORY_LIMIT, 1) == "memory.soft_limit_in_bytes"
    assert file_name(CgroupResource.MEMORY_LIMIT, 2) == "memory.high"
    assert set(JOURNALLED_FILES) == {
        "cpu.max", "cpu.weight", "cpu.cfs_quota_us", "cpu.shares", "memory.high", "memory.soft_limit_in_bytes",
        "io.max", "blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
    }, "the limits the guard writes, and nothing it only reads"  # fmt: skip
    assert set(DEVICE_FILES) == {"io.max", "blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"}


def test_each_file_is_in_its_controllers_tree(tmp_path: Path) -> None:
    cpu, memory, blkio = tmp_path / "cpu", tmp_path / "memory", tmp_path / "blkio"
    v1 = Layout(cpu, 1, None, memory, blkio)
    trees = {"cpu": cpu, "memory": memory, "io": blkio}
    for file in FILES.values():
        assert root_for(v1, file.v1) == trees[file.controller], file
    assert (
        path(v1, "/offline.slice/", "memory.soft_limit_in_bytes") == memory / "offline.slice/memory.soft_limit_in_bytes"
    )
    cpu_only = Layout(tmp_path, 2, tmp_path)
    assert root_for(cpu_only, "cpu.max") == tmp_path
    with pytest.raises(ConfigError, match=r"no controller for memory\.high is mounted"):
        root_for(cpu_only, "memory.high")
    with pytest.raises(ConfigError, match=r"cgroup\.procs is not a cgroup file of the guard's"):
        root_for(cpu_only, "cgroup.procs")
    with pytest.raises(ConfigError, match="expected a path below the cgroup root"):
        path(v1, "../etc", "cpu.shares")


def test_the_knobs_write_the_tables_files_of_their_layout(tmp_path: Path) -> None:
    v1 = Layout(tmp_path / "cpu", 1, None, tmp_path / "memory", tmp_path / "blkio")
    v2 = Layout(tmp_path, 2, tmp_path, tmp_path, tmp_path)
    assert (CpuLimits(v1).quota_file, CpuLimits(v1).weight_file) == ("cpu.cfs_quota_us", "cpu.shares")
    assert (CpuLimits(v2).quota_file, CpuLimits(v2).weight_file) == ("cpu.max", "cpu.weight")
    assert MemoryKnob(v1).files == ("memory.soft_limit_in_bytes",)
    assert MemoryKnob(v2).files == ("memory.high",)
    assert IoKnob(v1, clock=lambda: 0.0).files == ("blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device")
    assert IoKnob(v2, clock=lambda: 0.0).files == ("io.max",)
    lines = IoKnob(v1, clock=lambda: 0.0).writes("g", 0.5, {"8:0": (4e6, 2e6)})
    assert [(w.name, w.line) for w in lines] == [
        ("blkio.throttle.read_bps_device", "8:0 2000000"),
        ("blkio.throttle.write_bps_device", "8:0 1048576"),
    ], "v1: a file a direction; the floor for a slow writer"
    assert [(w.name, w.line) for w in IoKnob(v2, clock=lambda: 0.0).writes("g", 0.5, {"8:0": (4e6, 2e6)})] == [
        ("io.max", "8:0 rbps=2000000 wbps=1048576")
    ]


def test_the_layout_is_found_by_the_tables_v1_files(tmp_path: Path) -> None:
    (tmp_path / "cpu,cpuacct").mkdir()
    (tmp_path / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("-1\n")
    (tmp_path / "memory").mkdir()  # mounted, but not the memory controller's tree
    (tmp_path / "blkio").mkdir()
    (tmp_path / "blkio" / "blkio.throttle.read_bps_device").write_text("")
    assert detect_layout(tmp_path) == Layout(tmp_path / "cpu,cpuacct", 1, None, None, tmp_path / "blkio")


def _names_in_code(source: str) -> set[str]:
    """The string constants of a module, docstrings left out."""
    tree = ast.parse(source)
    docs = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    }


def test_no_module_but_the_table_names_a_cgroup_file() -> None:
    names = {n for file in FILES.values() for n in (file.v1, file.v2) if n}
    named = {
        str(module.relative_to(ROOT)): sorted(found)
        for module in sorted((ROOT / "mco_py").rglob("*.py"))
        if module != TABLE and (found := names & _names_in_code(module.read_text()))
    }
    assert named == {}, "take the names from mco_py/collector/guard/files.py"
    assert _names_in_code('"""memory.high"""\nx = "cpu.max"\n') == {"cpu.max"}, "the check sees code, not docs"
