"""Block I/O latency per interval: P99 (ms) node-wide and per device, with the request count.

Backends, probed once at start in ``auto`` order: ``libbpf`` (CO-RE object,
in-kernel histogram) -> ``bcc`` (same histogram, compiled at run time; needs
kernel headers) -> ``tracefs`` (block events parsed in user space) ->
``diskstats`` (Δticks/Δios: an AVERAGE, published as ``bioLatencyAvgMs`` and
never as a P99). Each failed probe is kept as a reason and logged once.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from mco_py.collector import histogram
from mco_py.collector.libbpf import BpfObject, HashMapReader
from mco_py.collector.procfs import DiskStat, device_names, parse_diskstats, read_text
from mco_py.collector.signals import Absence, Reading, Total, Unavailable
from mco_py.collector.source import ProblemLog
from mco_py.collector.tracefs import TracefsBlockTracer

log = logging.getLogger(__name__)

P99 = "bioLatencyP99Ms"
AVG = "bioLatencyAvgMs"
REQUESTS = "bioRequests"
LATENCY = "bioLatency"
BACKENDS = ("auto", "libbpf", "bcc", "tracefs", "diskstats", "off")
AUTO_ORDER = ("libbpf", "bcc", "tracefs", "diskstats")
MINORBITS = 20

DevKey = tuple[int, int]


def default_bpf_dir() -> Path:
    """Where the build installs ``biolatency.bpf.o`` (``mco_py/data/bpf``)."""
    return Path(str(resources.files("mco_py") / "data" / "bpf"))


@dataclass(slots=True)
class Window:
    """What a backend measured in one interval."""

    histograms: dict[DevKey, dict[int, int]] = field(default_factory=dict)
    """Per device (major, minor): slot -> request count."""
    averages_ms: dict[DevKey, tuple[float, int]] = field(default_factory=dict)
    """Average backends only: per device (mean ms, requests)."""


def window_since(last: dict[tuple[int, int], int], current: dict[tuple[int, int], int]) -> Window:
    """The interval's histograms from two readings of the in-kernel map keyed by (dev_t, log2 slot)."""
    window = Window()
    for (dev, slot), total in current.items():
        delta = total - last.get((dev, slot), 0)
        if delta > 0:
            window.histograms.setdefault((dev >> MINORBITS, dev & ((1 << MINORBITS) - 1)), {})[slot] = delta
    return window


class BioBackend(Protocol):
    """One way to measure block request latency."""

    name: str

    def take(self) -> Window:
        """The measurements since the previous call."""
        ...

    def close(self) -> None:
        """Detach / remove what the backend created."""
        ...


class LibbpfBackend:
    """CO-RE object on the block_rq_issue/complete tracepoints (tp_btf), loaded through libbpf1."""

    name = "libbpf"

    def __init__(self, bpf_dir: Path) -> None:
        self._obj = BpfObject(bpf_dir / "biolatency.bpf.o")
        try:
            self._hist = HashMapReader(self._obj, "hist")
        except Unavailable:
            self._obj.close()
            raise
        self._last: dict[tuple[int, int], int] = {}

    def take(self) -> Window:
        # key: u32 dev; value: struct dev_hist {u64 slots[MAX_SLOTS];}
        current: dict[tuple[int, int], int] = {}
        for key, value in self._hist.read():
            dev = int.from_bytes(key, sys.byteorder)
            for slot, count in enumerate(memoryview(value).cast("Q")):
                if count:
                    current[dev, slot] = count
        window = window_since(self._last, current)
        self._last = current
        return window

    def close(self) -> None:
        self._obj.close()


def probe_bcc(*, modules_root: Path = Path("/lib/modules"), sys_root: Path = Path("/sys")) -> Any:
    """The ``bcc`` module when it imports and kernel headers exist; else :class:`Unavailable` saying why."""
    problems: list[str] = []
    module: Any = None
    try:
        module = importlib.import_module("bcc")
    except Exception as exc:
        problems.append(
            f"python module bcc does not import in {sys.executable} ({type(exc).__name__}: {exc}); install"
            " Debian's python3-bpfcc and make it visible to this venv (the collector role does both with"
            " mco_collector_bio_backend: bcc)"
        )
    release = os.uname().release
    headers = modules_root / release / "build"
    if not (headers / "include").is_dir() and not (sys_root / "kernel/kheaders.tar.xz").exists():
        problems.append(f"no kernel headers ({headers} missing, no CONFIG_IKHEADERS)")
    if problems:
        raise Unavailable("; ".join(problems), Absence.UNSUPPORTED)
    return module


class BccBackend:
    """The bcc variant (``biolatency.bcc.c``), compiled at run time against the kernel headers."""

    name = "bcc"

    def __init__(self, bpf_dir: Path) -> None:
        bcc = probe_bcc()
        source = bpf_dir / "biolatency.bcc.c"
        if not source.is_file():
            raise Unavailable(f"{source}: bcc source missing (run `make -C bpf`)", Absence.UNSUPPORTED)
        try:
            self._bpf: Any = bcc.BPF(src_file=str(source).encode())
        except Exception as exc:
            raise Unavailable(f"bcc: cannot load {source.name}: {exc}", Absence.UNSUPPORTED) from exc
        self._last: dict[tuple[int, int], int] = {}

    def take(self) -> Window:
        current = {(int(k.dev), int(k.slot)): int(v.value) for k, v in self._bpf["hist"].items()}
        window = window_since(self._last, current)
        self._last = current
        return window

    def close(self) -> None:
        self._bpf.cleanup()


class TracefsBackend:
    """Block events from a private tracefs instance, bucketed in user space."""

    name = "tracefs"

    def __init__(self, tracefs_root: Path) -> None:
        self._tracer = TracefsBlockTracer(tracefs_root)

    def take(self) -> Window:
        if not self._tracer.alive:
            raise Unavailable("tracefs reader thread stopped (see log)", Absence.READ_ERROR)
        window = Window()
        for (dev, slot), count in self._tracer.take().items():
            window.histograms.setdefault(dev, {})[slot] = count
        return window

    def close(self) -> None:
        self._tracer.close()


class DiskstatsBackend:
    """Average latency Δticks/Δios per device from /proc/diskstats (whole disks only)."""

    name = "diskstats-average"

    def __init__(self, proc_root: Path, sys_root: Path) -> None:
        self._path = proc_root / "diskstats"
        self._block = sys_root / "block"
        self._last: dict[str, DiskStat] | None = None
        parse_diskstats(read_text(self._path), source=str(self._path))  # probe

    def _whole_disks(self, stats: Mapping[str, DiskStat]) -> dict[str, DiskStat]:
        try:
            disks = {p.name for p in self._block.iterdir()}
        except OSError:
            return dict(stats)
        return {name: stat for name, stat in stats.items() if name in disks}

    def take(self) -> Window:
        stats = self._whole_disks(parse_diskstats(read_text(self._path), source=str(self._path)))
        previous, self._last = self._last, stats
        window = Window()
        if previous is None:
            return window
        for name, stat in stats.items():
            old = previous.get(name)
            if old is None:
                continue
            d_ios, d_ticks = stat.ios - old.ios, stat.ticks_ms - old.ticks_ms
            if d_ios > 0 and d_ticks >= 0:
                window.averages_ms[(stat.major, stat.minor)] = (d_ticks / d_ios, d_ios)
        return window

    def close(self) -> None:
        """Nothing to release."""


@dataclass(frozen=True, slots=True)
class BioConfig:
    """Settings of the block-latency source."""

    backend: str = "auto"
    """``auto|libbpf|bcc|tracefs|diskstats|off``."""
    min_events: int = 20
    """Fewest requests in a window for a P99 to be reported (else absent, insufficient data)."""
    bpf_dir: Path | None = None
    """Directory with ``biolatency.bpf.o`` / ``biolatency.bcc.c``; default: the package's data/bpf."""


def open_backend(
    config: BioConfig, *, proc_root: Path, sys_root: Path, tracefs_root: Path
) -> tuple[BioBackend | None, list[str]]:
    """The first backend that works (in ``auto`` order, or the configured one) and why the others did not."""
    bpf_dir = config.bpf_dir or default_bpf_dir()
    factories: dict[str, Callable[[], BioBackend]] = {
        "libbpf": lambda: LibbpfBackend(bpf_dir),
        "bcc": lambda: BccBackend(bpf_dir),
        "tracefs": lambda: TracefsBackend(tracefs_root),
        "diskstats": lambda: DiskstatsBackend(proc_root, sys_root),
    }
    order: Sequence[str] = AUTO_ORDER if config.backend == "auto" else (config.backend,)
    failures: list[str] = []
    for name in order:
        try:
            backend = factories[name]()
        except Unavailable as exc:
            failures.append(f"{name}: {exc.reason}")
            log.warning("block latency backend %s unavailable: %s", name, exc.reason, extra={"backend": name})
            continue
        log.info("block latency backend in use: %s", backend.name, extra={"backend": backend.name})
        return backend, failures
    return None, failures


class BioLatencySource:
    """P99 of block request latency per interval, node-wide and per device, with the request count."""

    group = "bio"

    def __init__(
        self,
        config: BioConfig,
        *,
        proc_root: Path,
        sys_root: Path,
        tracefs_root: Path,
        problems: ProblemLog | None = None,
    ) -> None:
        self._config = config
        self._proc_root = proc_root
        self._problems = problems or ProblemLog(log)
        self._names: dict[DevKey, str] = {}
        self._requests = 0
        self._latency: dict[int, int] = {}
        """Node-wide slot -> requests since the collector started (bounded: one entry per slot)."""
        self.failures: list[str] = []
        """Why each backend tried before the one in use (or all of them) did not work."""
        if config.backend not in BACKENDS:
            raise Unavailable(
                f"bio backend {config.backend!r}: expected one of {', '.join(BACKENDS)}", Absence.DISABLED
            )
        self._backend: BioBackend | None = None
        if config.backend == "off":
            self.backend = "off"
            return
        self._backend, self.failures = open_backend(
            config, proc_root=proc_root, sys_root=sys_root, tracefs_root=tracefs_root
        )
        self.backend = self._backend.name if self._backend else "none"

    def _device(self, dev: DevKey) -> str:
        if dev not in self._names:
            self._names = device_names(self._proc_root)
        return self._names.get(dev, f"{dev[0]}:{dev[1]}")

    def read(self, now: float) -> list[Reading]:
        if self._backend is None:
            if self._config.backend == "off":
                kind, reason = Absence.DISABLED, "switched off by configuration (bio_backend: off)"
            else:
                kind, reason = Absence.UNSUPPORTED, "no backend works: " + " | ".join(self.failures)
            return [Reading.absent(P99, self.backend, kind, reason)]
        try:
            window = self._backend.take()
        except Unavailable as exc:
            self._problems.problem(P99, exc.reason)
            return [Reading.absent(P99, self._backend.name, exc.kind, exc.reason)]
        self._problems.ok(P99)
        if isinstance(self._backend, DiskstatsBackend):
            return self._averages(window)
        return self._percentiles(window)

    def _p99(self, hist: Mapping[int, int], device: str = "") -> Reading:
        assert self._backend is not None
        count = sum(hist.values())
        if count < self._config.min_events:
            return Reading.absent(
                P99,
                self._backend.name,
                Absence.INSUFFICIENT_DATA,
                f"{count} block requests in the window; a P99 needs at least {self._config.min_events}",
                device=device,
                events=count,
            )
        p99_us = histogram.percentile_us(hist, 0.99)
        assert p99_us is not None
        return Reading(P99, p99_us / 1000.0, self._backend.name, device=device, events=count)

    def _percentiles(self, window: Window) -> list[Reading]:
        assert self._backend is not None
        node: dict[int, int] = {}
        out: list[Reading] = []
        for dev, hist in sorted(window.histograms.items()):
            if dev == (0, 0):  # requests without a disk (should not happen; counted node-wide)
                histogram.merge(node, hist)
                continue
            histogram.merge(node, hist)
            out.append(self._p99(hist, self._device(dev)))
        total = sum(node.values())
        self._requests += total
        histogram.merge(self._latency, node)
        return [self._p99(node), Reading(REQUESTS, float(total), self._backend.name, events=total), *out]

    def _averages(self, window: Window) -> list[Reading]:
        name = DiskstatsBackend.name
        out = [
            Reading.absent(
                P99, name, Absence.UNSUPPORTED, "diskstats backend gives only an average (see bioLatencyAvgMs)"
            )
        ]
        total_ios = sum(n for _, n in window.averages_ms.values())
        self._requests += total_ios
        if total_ios == 0:
            out.append(
                Reading.absent(
                    AVG, name, Absence.INSUFFICIENT_DATA, "no completed block requests in the window", events=0
                )
            )
        else:
            mean = sum(ms * n for ms, n in window.averages_ms.values()) / total_ios
            out.append(Reading(AVG, mean, name, events=total_ios))
        out.append(Reading(REQUESTS, float(total_ios), name, events=total_ios))
        for dev, (ms, n) in sorted(window.averages_ms.items()):
            out.append(Reading(AVG, ms, name, device=self._device(dev), events=n))
        return out

    def totals(self) -> list[Total]:
        """Requests since the collector started and, from histogram backends, their latency histogram."""
        if self._backend is None:
            return []
        out = [Total(REQUESTS, float(self._requests))]
        if not isinstance(self._backend, DiskstatsBackend):
            out.append(Total(LATENCY, float(sum(self._latency.values())), slots=dict(self._latency)))
        return out

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None
