"""perf_event_open through ctypes: per-CPU counters with multiplex scaling, and the LLC miss rate.

:class:`PerfCounters` opens a set of counters (e.g. cache references and
misses) on every online CPU, system-wide (``pid=-1``), with
``read_format = TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING``. Each read scales
the per-CPU change by enabled/running (the kernel multiplexes counters when
there are more events than hardware slots) and sums over CPUs. The same class
runs software events (cpu-clock, context-switches) where there is no PMU.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import platform
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mco_py.collector.procfs import online_cpus
from mco_py.collector.signals import Absence, Reading, Total, Unavailable, errno_kind, errno_text
from mco_py.collector.source import ProblemLog

log = logging.getLogger(__name__)

# include/uapi/linux/perf_event.h
PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_TYPE_HW_CACHE = 3
PERF_COUNT_HW_CACHE_REFERENCES = 2
PERF_COUNT_HW_CACHE_MISSES = 3
PERF_COUNT_SW_CPU_CLOCK = 0
PERF_COUNT_SW_CONTEXT_SWITCHES = 3
PERF_COUNT_HW_CACHE_LL = 2
PERF_COUNT_HW_CACHE_OP_READ = 0
PERF_COUNT_HW_CACHE_RESULT_ACCESS = 0
PERF_COUNT_HW_CACHE_RESULT_MISS = 1
PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1
PERF_FLAG_FD_CLOEXEC = 1 << 3
_ATTR_DISABLED = 1 << 0
_ATTR_EXCLUDE_HV = 1 << 6
_PERF_EVENT_IOC_ENABLE = 0x2400
_PERF_EVENT_IOC_DISABLE = 0x2401

_SYSCALL_NR = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331, "riscv64": 241}


def hw_cache_config(cache: int, op: int, result: int) -> int:
    """``config`` of a PERF_TYPE_HW_CACHE event."""
    return cache | (op << 8) | (result << 16)


@dataclass(frozen=True, slots=True)
class EventSpec:
    """One perf event: ``type`` and ``config`` of ``perf_event_attr`` and a short name."""

    name: str
    type: int
    config: int


#: Hardware events tried in order for the LLC miss rate: (references, misses).
LLC_EVENT_SETS: tuple[tuple[EventSpec, EventSpec], ...] = (
    (
        EventSpec("cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES),
        EventSpec("cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES),
    ),
    (
        EventSpec(
            "LLC-loads",
            PERF_TYPE_HW_CACHE,
            hw_cache_config(PERF_COUNT_HW_CACHE_LL, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_ACCESS),
        ),
        EventSpec(
            "LLC-load-misses",
            PERF_TYPE_HW_CACHE,
            hw_cache_config(PERF_COUNT_HW_CACHE_LL, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS),
        ),
    ),
)


class PerfEventAttr(ctypes.Structure):
    """``struct perf_event_attr`` up to ``config3`` (PERF_ATTR_SIZE_VER8, 136 bytes)."""

    _fields_ = (
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved_2", ctypes.c_uint16),
        ("aux_sample_size", ctypes.c_uint32),
        ("reserved_3", ctypes.c_uint32),
        ("sig_data", ctypes.c_uint64),
        ("config3", ctypes.c_uint64),
    )


_libc: ctypes.CDLL | None = None


def _syscall() -> ctypes.CDLL:
    global _libc  # noqa: PLW0603 - one handle for the process
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


def perf_event_open(spec: EventSpec, cpu: int, *, pid: int = -1) -> int:
    """Open one counting event on ``cpu``; raises :class:`Unavailable` with the errno text."""
    nr = _SYSCALL_NR.get(platform.machine())
    if nr is None:
        raise Unavailable(f"perf_event_open: unknown syscall number on {platform.machine()}", Absence.UNSUPPORTED)
    attr = PerfEventAttr()
    attr.type = spec.type
    attr.size = ctypes.sizeof(PerfEventAttr)
    attr.config = spec.config
    attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
    attr.flags = _ATTR_DISABLED | _ATTR_EXCLUDE_HV
    libc = _syscall()
    fd = int(
        libc.syscall(
            ctypes.c_long(nr),
            ctypes.byref(attr),
            ctypes.c_int(pid),
            ctypes.c_int(cpu),
            ctypes.c_int(-1),
            ctypes.c_ulong(PERF_FLAG_FD_CLOEXEC),
        )
    )
    if fd < 0:
        code = ctypes.get_errno()
        hint = " (no PMU: virtual machine or unsupported CPU)" if code in (2, 95, 19) else ""
        if code in (1, 13):
            hint = " (needs CAP_PERFMON or kernel.perf_event_paranoid <= 0)"
        raise Unavailable(f"perf_event_open({spec.name}, cpu {cpu}): {errno_text(code)}{hint}", errno_kind(code))
    return fd


def _ioctl(fd: int, request: int) -> None:
    if _syscall().ioctl(ctypes.c_int(fd), ctypes.c_ulong(request), ctypes.c_int(0)) < 0:
        code = ctypes.get_errno()
        raise Unavailable(f"perf ioctl {request:#x}: {errno_text(code)}", errno_kind(code))


_READ = struct.Struct("=QQQ")


@dataclass(frozen=True, slots=True)
class CounterValue:
    """A raw per-CPU read: count, time enabled and time running (ns)."""

    value: int
    enabled: int
    running: int


def scaled_delta(old: CounterValue, new: CounterValue) -> float | None:
    """Change of one counter scaled for multiplexing; None when it never ran in the interval."""
    d_value = new.value - old.value
    d_enabled = new.enabled - old.enabled
    d_running = new.running - old.running
    if d_running <= 0 or d_value < 0:
        return None
    if d_enabled <= d_running:
        return float(d_value)
    return d_value * (d_enabled / d_running)


class PerfCounters:
    """Counting events on every given CPU; :meth:`read_deltas` returns the scaled change per event."""

    def __init__(self, events: Sequence[EventSpec], cpus: Sequence[int]) -> None:
        self.events = tuple(events)
        self.cpus = tuple(cpus)
        self._fds: list[list[int]] = []
        self._last: list[list[CounterValue]] | None = None
        try:
            for spec in self.events:
                row: list[int] = []
                self._fds.append(row)
                for cpu in self.cpus:
                    row.append(perf_event_open(spec, cpu))
            for row in self._fds:
                for fd in row:
                    _ioctl(fd, _PERF_EVENT_IOC_ENABLE)
        except Unavailable:
            self.close()
            raise

    def _read_all(self) -> list[list[CounterValue]]:
        out: list[list[CounterValue]] = []
        for spec, row in zip(self.events, self._fds, strict=True):
            values: list[CounterValue] = []
            for fd in row:
                try:
                    data = os.read(fd, _READ.size)
                except OSError as exc:
                    raise Unavailable(f"read({spec.name}): {errno_text(exc.errno)}", errno_kind(exc.errno)) from exc
                if len(data) != _READ.size:
                    raise Unavailable(f"read({spec.name}): short read of {len(data)} bytes", Absence.READ_ERROR)
                values.append(CounterValue(*_READ.unpack(data)))
            out.append(values)
        return out

    def read_deltas(self) -> list[float | None] | None:
        """Per event: scaled change since the previous call summed over CPUs (None: never ran).

        Returns None on the first call (a change needs two reads).
        """
        now = self._read_all()
        previous, self._last = self._last, now
        if previous is None:
            return None
        totals: list[float | None] = []
        for old_row, new_row in zip(previous, now, strict=True):
            parts = [scaled_delta(o, n) for o, n in zip(old_row, new_row, strict=True)]
            known = [p for p in parts if p is not None]
            totals.append(sum(known) if known else None)
        return totals

    def close(self) -> None:
        """Close every counter fd (idempotent)."""
        for row in self._fds:
            for fd in row:
                with contextlib.suppress(Unavailable):
                    _ioctl(fd, _PERF_EVENT_IOC_DISABLE)
                os.close(fd)
        self._fds = []


LLC = "llcMissRate"


class LlcSource:
    """LLC miss rate = misses / references, from hardware cache events on every online CPU."""

    group = "llc"

    def __init__(
        self,
        sys_root: Path,
        *,
        event_sets: Sequence[tuple[EventSpec, EventSpec]] = LLC_EVENT_SETS,
        enabled: bool = True,
        problems: ProblemLog | None = None,
    ) -> None:
        self._problems = problems or ProblemLog(log)
        self._counters: PerfCounters | None = None
        self._why: Unavailable | None = None
        self.backend = "perf"
        if not enabled:
            self._why = Unavailable("switched off by configuration (llc: off)", Absence.DISABLED)
            self.backend = "off"
            return
        cpus = online_cpus(sys_root)
        failures: list[Unavailable] = []
        for refs, misses in event_sets:
            try:
                self._counters = PerfCounters((refs, misses), cpus)
                break
            except Unavailable as exc:
                failures.append(exc)
        if self._counters is None:
            kinds = {f.kind for f in failures}
            kind = (
                Absence.PERMISSION
                if Absence.PERMISSION in kinds
                else (failures[0].kind if failures else Absence.UNSUPPORTED)
            )
            self._why = Unavailable("; ".join(f.reason for f in failures) or "no events configured", kind)
            self.backend = "none"
            self._problems.problem(LLC, self._why.reason)

    @property
    def events(self) -> tuple[EventSpec, ...]:
        """The events in use (empty when absent)."""
        return self._counters.events if self._counters else ()

    def read(self, now: float) -> list[Reading]:
        if self._counters is None:
            assert self._why is not None
            return [Reading.absent(LLC, "perf", self._why.kind, self._why.reason)]
        try:
            deltas = self._counters.read_deltas()
        except Unavailable as exc:
            self._problems.problem(LLC, exc.reason)
            return [Reading.absent(LLC, "perf", exc.kind, exc.reason)]
        self._problems.ok(LLC)
        if deltas is None:
            return [Reading.absent(LLC, "perf", Absence.WARMING_UP, "first reading; a rate needs two")]
        refs, misses = deltas
        if refs is None or misses is None or refs <= 0:
            return [
                Reading.absent(LLC, "perf", Absence.INSUFFICIENT_DATA, "no cache references counted in the interval")
            ]
        return [Reading(LLC, misses / refs, "perf", events=round(refs))]

    def totals(self) -> list[Total]:
        """No running counts."""
        return []

    def close(self) -> None:
        if self._counters is not None:
            self._counters.close()
            self._counters = None
