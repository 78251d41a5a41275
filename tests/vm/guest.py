"""Runs inside the TCG test node (testbed/vm.py), as root, on pure cgroup v2: one or more scenarios
per boot, ``python3 /mnt/guest.py SCENARIO...`` (several: each after :func:`reset`, a scenario that
raises recorded as its error and the next one run). It drives the node guard's own parts (CpuLimits,
MemoryKnob, IoKnob, the LimitWriter and its journal, NodeGuard and GuardLoop) against the
guest's real cgroups, measures what the kernel then does, and writes the figures as JSON to
``$MCO_VM_RESULT``. The host-side tests (tests/vm/test_vm_cgroups.py) judge them.

Standard library and mco_py only: the guest has Debian's python3 and the payload's packages.
"""

from __future__ import annotations

import contextlib
import json
import logging
import mmap
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from mco_py.analysis.guard import GuardRules
from mco_py.collector.guard.files import JOURNALLED_FILES, detect_layout
from mco_py.collector.guard.knobs import CpuLimits, IoKnob, MemoryKnob
from mco_py.collector.guard.loop import GuardLoop, NodeGuard
from mco_py.collector.guard.writer import LimitWriter

CGROUP = Path("/sys/fs/cgroup")
SCRATCH = Path("/dev/vdb")
"""The run's empty disk (the root disk, vda, is read-only)."""
ME = Path(__file__).resolve()
MiB = 2**20
BUSY = ("/bin/sh", "-c", "while :; do :; done")


def group(name: str) -> Path:
    path = CGROUP / name
    path.mkdir(exist_ok=True)
    return path


def device(name: str) -> str:
    return Path(f"/sys/block/{name}/dev").read_text().strip()


def spawn(argv: Sequence[str], into: Path, *, cpus: set[int] | None = None) -> subprocess.Popen[bytes]:
    """``argv`` started in group ``into`` (it waits on stdin until it is there), on ``cpus``."""
    proc = subprocess.Popen(
        ["/bin/sh", "-c", 'read go; exec "$@"', "sh", *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    (into / "cgroup.procs").write_text(str(proc.pid))
    if cpus is not None:
        os.sched_setaffinity(proc.pid, cpus)
    assert proc.stdin is not None
    proc.stdin.write(b"go\n")
    proc.stdin.close()
    return proc


@contextlib.contextmanager
def running(procs: list[subprocess.Popen[bytes]]) -> Iterator[list[subprocess.Popen[bytes]]]:
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def until(cond: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {seconds} s: {cond}")
        time.sleep(0.05)


def usage_us(path: Path) -> int:
    for line in (path / "cpu.stat").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value)
    raise ValueError(f"{path}/cpu.stat has no usage_usec")


def cpu_shares(groups: Sequence[Path], seconds: float) -> tuple[list[float], float]:
    """Each group's CPU time over ``seconds`` of wall time, in CPUs; and the wall time."""
    before = [usage_us(g) for g in groups]
    start = time.monotonic()
    time.sleep(seconds)
    after = [usage_us(g) for g in groups]
    wall = time.monotonic() - start
    return [(b - a) / 1e6 / wall for a, b in zip(before, after, strict=True)], wall


def events(path: Path) -> dict[str, int]:
    return {k: int(v) for k, v in (line.split() for line in (path / "memory.events").read_text().splitlines())}


def layout_parts(journal: Path) -> tuple[CpuLimits, LimitWriter]:
    writer = LimitWriter.at(CGROUP, journal)
    return CpuLimits(writer.layout), writer


# --- scenarios ---------------------------------------------------------------------------


def facts() -> dict[str, object]:
    """What the node is: its kernel, cgroup tree, pressure files and disks, as the guard sees them."""
    ready = float(Path("/proc/uptime").read_text().split()[0])
    layout = detect_layout(CGROUP)
    probe = group("probe")
    return {
        "python_ready_uptime_s": ready,
        "kernel": os.uname().release,
        "python": sys.version.split()[0],
        "mounts": [line.split()[1:3] for line in Path("/proc/mounts").read_text().splitlines()],
        "controllers": (CGROUP / "cgroup.controllers").read_text().split(),
        "subtree_control": (CGROUP / "cgroup.subtree_control").read_text().split(),
        "layout": {
            "version": layout.version,
            "cpu_root": str(layout.cpu_root),
            "pressure_root": str(layout.pressure_root),
            "memory_root": str(layout.memory_root),
            "io_root": str(layout.io_root),
        },
        "node_pressure": sorted(p.name for p in Path("/proc/pressure").iterdir()),
        "group_files": sorted(
            f for f in (*JOURNALLED_FILES, "cpu.pressure", "io.pressure", "memory.pressure") if (probe / f).exists()
        ),
        "disks": {d.name: (d / "dev").read_text().strip() for d in sorted(Path("/sys/block").iterdir())},
        "cpus": len(os.sched_getaffinity(0)),
    }


def cpu_weight() -> dict[str, object]:
    """Two busy loops on one CPU in two groups: the weights the guard's writer sets split it."""
    limits, writer = layout_parts(Path("/run/mco/journal.json"))
    hi, lo = group("hi"), group("lo")
    out: dict[str, object] = {"weight_file": limits.weight_file, "lowest_weight": limits.lowest_weight}
    with running([spawn(BUSY, hi, cpus={0}), spawn(BUSY, lo, cpus={0})]):
        rounds = {"200:100": ("200", "100"), "100:lowest": ("100", limits.lowest_weight)}
        for label, (w_hi, w_lo) in rounds.items():
            writer.ensure("hi", limits.weight_file, w_hi)
            writer.ensure("lo", limits.weight_file, w_lo)
            time.sleep(0.5)
            (s_hi, s_lo), wall = cpu_shares([hi, lo], 3.0)
            out[label] = {
                "weights": [writer.read("hi", limits.weight_file), writer.read("lo", limits.weight_file)],
                "cpus": [round(s_hi, 4), round(s_lo, 4)],
                "share_hi": round(s_hi / (s_hi + s_lo), 4),
                "wall_s": round(wall, 2),
            }
    return out


def cpu_max() -> dict[str, object]:
    """A busy group under the quota text the guard computes (``text_for``), then unlimited."""
    limits, writer = layout_parts(Path("/run/mco/journal.json"))
    capped = group("capped")
    out: dict[str, object] = {"quota_file": limits.quota_file, "default": writer.read("capped", limits.quota_file)}
    with running([spawn(BUSY, capped), spawn(BUSY, capped)]):
        for label, cores, period in (("0.25", 0.25, None), ("0.5-period-50ms", 0.5, "max 50000"), ("none", None, None)):
            if period is not None:  # a period someone else chose: the guard keeps it
                (capped / limits.quota_file).write_text(period)
            text = limits.text_for("capped", cores)
            writer.ensure("capped", limits.quota_file, text)
            time.sleep(0.5)
            (used,), wall = cpu_shares([capped], 3.0)
            out[label] = {
                "wrote": text,
                "reads": writer.read("capped", limits.quota_file),
                "cores_read": limits.cores("capped"),
                "cpus": round(used, 4),
                "wall_s": round(wall, 2),
            }
    out["restore_problems"] = writer.restore()
    out["restored"] = writer.read("capped", limits.quota_file)
    return out


def guard_cpu() -> dict[str, object]:
    """The guard itself, stepping on real PSI: more online busy loops than CPUs make the online
    group wait; the guard gives the offline group the lowest weight and a quota."""
    layout = detect_layout(CGROUP)
    online, offline = group("online"), group("offline")
    journal = Path("/run/mco/guard-limits.json")
    guard = NodeGuard(layout, online=["online"], offline=["offline"], rules=GuardRules(), mode="on",
                      journal_path=journal, resources=("cpu",))  # fmt: skip
    out: dict[str, object] = {"cpus": guard.cpus}
    hogs = [spawn(BUSY, online) for _ in range(3)] + [spawn(BUSY, offline) for _ in range(3)]
    with running(hogs):
        time.sleep(0.5)
        (on, off), _ = cpu_shares([online, offline], 3.0)
        out["before"] = {"online_cpus": round(on, 3), "offline_cpus": round(off, 3)}
        steps = []
        for _ in range(6):
            action = guard.step()
            steps.append({"action": action.value, "pressure": guard.status.pressure, "limit": guard.status.limit})
            time.sleep(1.0)
        out["steps"] = steps
        out["offline_files"] = {
            "cpu.max": guard.writer.read("offline", "cpu.max"),
            "cpu.weight": guard.writer.read("offline", "cpu.weight"),
        }
        out["online_files"] = {
            "cpu.max": guard.writer.read("online", "cpu.max"),
            "cpu.weight": guard.writer.read("online", "cpu.weight"),
        }
        (on, off), _ = cpu_shares([online, offline], 3.0)
        out["after"] = {"online_cpus": round(on, 3), "offline_cpus": round(off, 3)}
        out["journal"] = json.loads(journal.read_text())["limits"]
        out["write_errors"] = guard.writer.counts().failures
        guard.close()
    out["closed_files"] = {
        "cpu.max": guard.writer.read("offline", "cpu.max"),
        "cpu.weight": guard.writer.read("offline", "cpu.weight"),
    }
    out["journal_left"] = journal.exists()
    return out


def memory_high() -> dict[str, object]:
    """A group that fills the page cache, limited by the guard's memory writer to a quarter of its
    use: the kernel reclaims it down and holds it there; an anonymous allocator is held back."""
    _, writer = layout_parts(Path("/run/mco/journal.json"))
    knob = MemoryKnob(writer.layout)
    mem, free = group("mem"), group("free")
    out: dict[str, object] = {}
    read = ("dd", f"if={SCRATCH}", "of=/dev/null", "bs=1M", "status=none")
    # held open: the kernel drops a block device's page cache at its last close
    keep = SCRATCH.open("rb")
    with running([spawn((*read, "count=128"), mem)]) as (first,):
        first.wait(120)
    baseline = knob.baseline("mem")
    assert baseline is not None
    (write,) = knob.writes("mem", 0.25, baseline)
    before = events(mem)
    writer.write("mem", write.name, write.line)
    high = int(write.text)
    out.update(baseline=int(baseline), high=high, current_after_write=int((mem / "memory.current").read_text()))
    samples: list[int] = []
    with running([spawn((*read, "count=384", "skip=128"), mem)]) as (reader,):
        start = time.monotonic()
        while reader.poll() is None and time.monotonic() - start < 120:
            samples.append(int((mem / "memory.current").read_text()))
            time.sleep(0.05)
        out["read_s"] = round(time.monotonic() - start, 2)
        out["reader_exit"] = reader.wait(10)
    after = events(mem)
    out.update(
        current_max=max(samples),
        current_mean=sum(samples) // len(samples),
        samples=len(samples),
        high_events=after["high"] - before["high"],
        max_events=after["max"] - before["max"],
        oom_kill=after["oom_kill"] - before["oom_kill"],
    )
    # anonymous memory cannot be reclaimed here (no swap): over memory.high the kernel makes the
    # allocator sleep; the same allocator in a group without a limit, for comparison
    grab = ("python3", str(ME), "allocate", "3.0")
    for label, grp in (("anon_limited", mem), ("anon_free", free)):
        with running([spawn(grab, grp)]) as (proc,):
            assert proc.stdout is not None
            line = proc.stdout.readline().decode().strip()
            out[label] = {"allocated_mib": int(line) if line.isdigit() else line,
                          "current": int((grp / "memory.current").read_text())}  # fmt: skip
    out["restore_problems"] = writer.restore()
    out["restored"] = writer.read("mem", "memory.high")
    keep.close()
    return out


def allocate(seconds: str) -> None:
    """(child) Touch 1 MiB chunks for ``seconds`` (each in its own mapping, so none is freed);
    print how many MiB it got."""
    end = time.monotonic() + float(seconds)
    chunks: list[mmap.mmap] = []
    while time.monotonic() < end and len(chunks) < 900:
        chunk = mmap.mmap(-1, MiB)
        for offset in range(0, MiB, mmap.PAGESIZE):
            chunk[offset] = 1
        chunks.append(chunk)
    print(len(chunks), flush=True)


def direct_writer(seconds: str, offset_mib: str = "0") -> None:
    """(child) O_DIRECT writes of 256 KiB to the scratch disk for ``seconds``; print bytes and seconds."""
    block = 256 * 1024
    buf = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT wants
    buf.write(b"\xa5" * block)
    fd = os.open(SCRATCH, os.O_WRONLY | os.O_DIRECT)
    span = 64 * MiB // block
    start = time.monotonic()
    done = 0
    while time.monotonic() - start < float(seconds):
        os.pwrite(fd, buf, int(offset_mib) * MiB + (done % span) * block)
        done += 1
    elapsed = time.monotonic() - start
    os.close(fd)
    print(done * block, round(elapsed, 3), flush=True)


def _writer_rate(proc: subprocess.Popen[bytes]) -> float:
    assert proc.stdout is not None
    written, seconds = proc.stdout.readline().split()
    return int(written) / float(seconds)


def io_max() -> dict[str, object]:
    """A direct-I/O writer, unlimited, then under the io.max line the guard's I/O writer makes
    from its measured rate (IoKnob: io.stat over an interval), then restored."""
    _, writer = layout_parts(Path("/run/mco/journal.json"))
    now = time.monotonic
    knob = IoKnob(writer.layout, clock=now)
    grp = group("io")
    disk = device("vdb")
    out: dict[str, object] = {"device": disk}
    write = ("python3", str(ME), "direct_writer", "4.0")
    with running([spawn(write, grp)]) as (free,):
        until(lambda: disk in (grp / "io.stat").read_text(), 30)  # the writer's python has started
        knob.observe("io")
        time.sleep(2.0)
        knob.observe("io")
        out["unlimited_bps_writer"] = round(_writer_rate(free))
    baseline = knob.baseline("io")
    assert baseline is not None
    assert disk in baseline, baseline
    out["baseline_bps_io_stat"] = {d: [round(r), round(w)] for d, (r, w) in baseline.items()}
    share = min(1.0, 4 * MiB / baseline[disk][1])  # a 4 MiB/s limit, well below the free rate
    writes = knob.writes("io", share, {disk: baseline[disk]})
    for item in writes:
        writer.write("io", item.name, item.line)
    out["wrote"] = [f"{w.device} {w.text}" for w in writes]
    out["io.max"] = writer.read("io", "io.max")
    out["holds"] = all(knob.holds("io", w) for w in writes)
    with running([spawn((*write[:-1], "5.0"), grp)]) as (limited,):
        written = (grp / "io.stat").read_text()
        until(lambda: (grp / "io.stat").read_text() != written, 30)
        knob.observe("io")
        time.sleep(3.0)
        knob.observe("io")
        out["limited_bps_writer"] = round(_writer_rate(limited))
    again = knob.baseline("io") or {}
    out["limited_bps_io_stat"] = round(again.get(disk, (0.0, 0.0))[1])
    out["wbps_limit"] = int(writes[0].text.split()[1].removeprefix("wbps="))
    out["restore_problems"] = writer.restore()
    out["restored"] = writer.read("io", "io.max")
    return out


def snapshot(names: Sequence[str]) -> dict[str, str]:
    """Every limit file the journal may name, of each group, as the kernel shows it."""
    out = {}
    for name in names:
        for file in JOURNALLED_FILES:
            path = CGROUP / name / file
            if path.exists():
                out[f"{name}/{file}"] = path.read_text()
    return out


def restore_after_kill() -> dict[str, object]:
    """The guard (its own process, GuardLoop as the collector runs it) limits an offline group's
    CPU, memory and I/O on real pressure; it is killed with SIGKILL; a new guard's start
    writes every file back from the journal."""
    journal = "/run/mco/guard-limits.json"
    online, offline = group("online"), group("offline")
    vda, vdb = device("vda"), device("vdb")
    out: dict[str, object] = {"vda": vda, "vdb": vdb}
    # values someone chose before the guard (not the kernel's defaults): they must come back
    (offline / "cpu.max").write_text("max 50000")
    (offline / "cpu.weight").write_text("50")
    (offline / "memory.high").write_text(str(768 * MiB))
    (offline / "io.max").write_text(f"{vda} riops=5000")
    # the online group stalls on memory (an allocator over its group's memory.high), on I/O (a
    # writer under its group's io.max) and waits for CPU (more busy loops than CPUs); each in a
    # child group, so the memory limit does not hold back the writer
    (online / "cgroup.subtree_control").write_text("+cpu +io +memory")
    on_cpu, on_mem, on_io = group("online/cpu"), group("online/mem"), group("online/io")
    (on_mem / "memory.high").write_text(str(24 * MiB))
    (on_io / "io.max").write_text(f"{vdb} wbps={2 * MiB}")
    groups = ["online", "online/mem", "online/io", "offline"]
    before = snapshot(groups)
    out["before"] = before
    began = time.monotonic()
    loads = [
        *(spawn(BUSY, on_cpu) for _ in range(3)),
        spawn(("python3", str(ME), "direct_writer", "600", "0"), on_io),
        spawn(("python3", str(ME), "allocate", "600"), on_mem),
        *(spawn(BUSY, offline) for _ in range(2)),
        spawn(("python3", str(ME), "direct_writer", "600", "128"), offline),
    ]
    watched = ("cpu.max", "cpu.weight", "memory.high", "io.max")
    with running(loads):
        # every load at work before the guard starts (a limited group's python starts slowly)
        until(lambda: vdb in (offline / "io.stat").read_text() and vdb in (on_io / "io.stat").read_text(), 60)
        until(lambda: int((on_mem / "memory.current").read_text()) > 16 * MiB, 60)
        out["loads_ready_s"] = round(time.monotonic() - began, 1)
        guard = subprocess.Popen(["python3", str(ME), "guard", journal, "0.5"])
        start = time.monotonic()
        changed: dict[str, float] = {}
        try:
            while time.monotonic() - start < 60 and len(changed) < len(watched):
                now = snapshot(["offline"])
                for name in watched:
                    if name not in changed and now[f"offline/{name}"] != before[f"offline/{name}"]:
                        changed[name] = round(time.monotonic() - start, 1)
                time.sleep(0.25)
            out["changed_after_s"] = changed
            guard.send_signal(signal.SIGKILL)
        finally:
            if guard.poll() is None:
                guard.kill()
            out["guard_exit"] = guard.wait(30)
        out["limited"] = snapshot(groups)
        out["journal"] = json.loads(Path(journal).read_text())["limits"]
    time.sleep(0.5)
    out["after_kill"] = snapshot(groups)
    restart = subprocess.run(["python3", str(ME), "guard", journal, "3600", "--once"], capture_output=True,
                             text=True, timeout=120, check=False)  # fmt: skip
    out["restart_exit"] = restart.returncode
    out["restart_log"] = restart.stderr[-2000:]
    out["after"] = snapshot(groups)
    out["journal_left"] = Path(journal).exists()
    return out


#: Levels in order, for "at least Medium".
LEVELS = ("None", "Low", "Medium", "High")
#: Samples in a row (one a second) with every dimension None that end a phase after an antagonist.
STAYS_NONE = 5
#: (phase, load, seconds, ends when every dimension has been None for STAYS_NONE samples) of
#: :func:`detection`: each antagonist, then at most as long without it (the fall back to None,
#: and staying there, is what that phase shows).
DETECTION_PHASES = (
    ("calm", "", 8, False),
    ("cpu", "cpu", 20, False),
    ("after cpu", "", 20, True),
    ("disk", "disk", 20, False),
    ("after disk", "", 20, True),
)


def detection() -> dict[str, object]:
    """Detection on this kernel's own signals: the collector's sources (open_sources, as
    ``mco collector`` opens them) sampled every second and scored by the analyzer's Scorer
    with the shipped rules, through a calm phase, a CPU antagonist (four busy loops on two
    CPUs), its end, a disk antagonist (two O_DIRECT writers on the scratch disk) and its end.
    A phase after an antagonist ends once every dimension has been None for
    STAYS_NONE samples in a row (at most its seconds).
    Per phase: each dimension's highest level, its level at the end, the seconds from the
    phase's start to Medium or higher, and its length."""
    from mco_py.analysis.rules import default_rules
    from mco_py.analysis.scoring import Scorer
    from mco_py.collector.sampler import Sampler, open_sources
    from mco_py.config.collector import CollectorSettings
    from mco_py.model import Sample, SignalReading

    node = "vm-node"
    offline = group("offline")
    sampler = Sampler(open_sources(CollectorSettings(node_name=node)), node=node)
    scorer = Scorer(default_rules())
    loads = {
        "cpu": lambda: [spawn(BUSY, offline) for _ in range(4)],
        "disk": lambda: [spawn(("python3", str(ME), "direct_writer", "600", str(64 * i)), offline) for i in range(2)],
    }
    phases: dict[str, dict[str, object]] = {}
    out: dict[str, object] = {"backends": sampler.backends, "phases": phases}
    sampler.sample()  # the first sample only starts the rates
    for phase, load, seconds, until_none in DETECTION_PHASES:
        start = time.monotonic()
        highest: dict[str, str] = {}
        medium_after: dict[str, float] = {}
        last: dict[str, str] = {}
        signals: dict[str, float] = {}
        none_for = 0  # samples in a row with every dimension None
        with running(loads[load]() if load else []):
            while time.monotonic() - start < seconds:
                time.sleep(max(0.0, 1.0 - (time.monotonic() - start) % 1.0))
                sample = sampler.sample()
                readings = [SignalReading(r.name, r.value, r.backend, r.reason, r.events)
                            for r in sample.readings if not r.device]  # fmt: skip
                scorer.observe(Sample.of(node, sample.timestamp, readings), time.time())
                (assessment,), _ = scorer.assess(time.time())
                last = {name: dim.level.value for name, dim in assessment.dimensions.items()}
                for name, level in last.items():
                    if LEVELS.index(level) > LEVELS.index(highest.get(name, "None")):
                        highest[name] = level
                    if LEVELS.index(level) >= LEVELS.index("Medium") and name not in medium_after:
                        medium_after[name] = round(time.monotonic() - start, 1)
                signals = dict(assessment.signals)
                none_for = none_for + 1 if all(level == "None" for level in last.values()) else 0
                if until_none and none_for >= STAYS_NONE:
                    break
        phases[phase] = {"highest": highest, "last": last, "medium_after_s": medium_after, "signals_at_end": signals,
                         "seconds": round(time.monotonic() - start, 1)}  # fmt: skip
    out["absent"] = {r.name: r.reason for r in sampler.sample().readings if r.value is None}
    sampler.close()
    return out


def guard(journal: str, interval: str, *args: str) -> None:
    """(child) The guard as the collector wires it: NodeGuard + GuardLoop, every resource, until
    killed; ``--once``: start (which restores a killed guard's limits) and stop."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="guard: %(levelname)s %(message)s")
    loop = GuardLoop(
        NodeGuard(detect_layout(CGROUP), online=["online"], offline=["offline"], rules=GuardRules(), mode="on",
                  journal_path=journal, resources=("cpu", "memory", "io")),
        float(interval),
    )  # fmt: skip
    loop.start()
    if "--once" in args:
        loop.stop()
        return
    while True:
        time.sleep(3600)


SCENARIOS: dict[str, Callable[[], dict[str, object]]] = {
    f.__name__: f for f in (facts, cpu_weight, cpu_max, guard_cpu, memory_high, io_max, restore_after_kill, detection)
}
CHILDREN: dict[str, Callable[..., None]] = {f.__name__: f for f in (allocate, direct_writer, guard)}


def reset() -> None:
    """The guest as a fresh boot leaves it for the next scenario: every group a scenario made
    removed (its processes killed first, deepest groups first), the guard's journal gone, and
    the page cache dropped (memory_high counts what its reads bring into it)."""
    groups = sorted((p for p in CGROUP.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
    for path in groups:
        for pid in (path / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        procs = path / "cgroup.procs"
        until(lambda: not procs.read_text().strip(), 10)  # noqa: B023 - called at once, in this iteration
        path.rmdir()
    Path("/run/mco/guard-limits.json").unlink(missing_ok=True)
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3")  # the guest's own kernel


def run_scenario(name: str) -> dict[str, object]:
    start = time.monotonic()
    result = SCENARIOS[name]()
    result["scenario"] = name
    result["scenario_s"] = round(time.monotonic() - start, 2)
    return result


def main(argv: Sequence[str]) -> int:
    name, *args = argv
    if name in CHILDREN:
        CHILDREN[name](*args)
        return 0
    unknown = [n for n in argv if n not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}: choose from {sorted(SCENARIOS)}")
    if not args:  # one scenario: its figures alone
        result = run_scenario(name)
    else:  # several: {"scenarios": {name: figures or {"error": traceback}}}
        results: dict[str, object] = {}
        for i, each in enumerate(argv):
            if i:
                reset()
            try:
                results[each] = run_scenario(each)
            except Exception:  # the other scenarios still run; the host-side test of this one fails
                results[each] = {"scenario": each, "error": traceback.format_exc()[-3000:]}
        result = {"scenarios": results}
    Path(os.environ["MCO_VM_RESULT"]).write_text(json.dumps(result, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
