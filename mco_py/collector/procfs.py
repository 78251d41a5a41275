"""Parsers for the kernel's text files (pure) and one careful file reader.

Every parser raises :class:`Unavailable` (kind ``read_error``) naming the file
and the problem for truncated or garbled input; none returns made-up zeros.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from mco_py.collector.signals import Absence, Unavailable, unavailable_from_oserror

MAX_FILE_BYTES = 1 << 20
_CHUNK = 1 << 16


def read_text(path: Path | str, *, missing: Absence = Absence.UNSUPPORTED) -> str:
    """Read a small kernel file; any failure becomes :class:`Unavailable` naming the path.

    Plain ``os.read`` in 64 KiB steps (at most ``MAX_FILE_BYTES``): much cheaper
    than ``Path.open().read()``, which builds a buffered text reader for each file,
    for the handful of files read every second.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, _CHUNK)
            if len(data) == _CHUNK:
                chunks = [data]
                size = len(data)
                while size < MAX_FILE_BYTES and (more := os.read(fd, min(_CHUNK, MAX_FILE_BYTES - size))):
                    chunks.append(more)
                    size += len(more)
                data = b"".join(chunks)
        finally:
            os.close(fd)
    except IsADirectoryError as exc:
        raise Unavailable(f"{path}: is a directory, expected a file", Absence.READ_ERROR) from exc
    except OSError as exc:
        raise unavailable_from_oserror(str(path), exc, missing=missing) from exc
    try:
        return data.decode("ascii")
    except UnicodeDecodeError as exc:
        raise Unavailable(f"{path}: not ASCII text (byte {exc.start})", Absence.READ_ERROR) from exc


# --- /proc/pressure/<resource> ------------------------------------------------


@dataclass(frozen=True, slots=True)
class PsiLine:
    """One ``some``/``full`` line of a PSI file."""

    avg10: float
    avg60: float
    avg300: float
    total_us: int
    """Cumulative stall time, microseconds."""


PSI_KINDS = ("some", "full")


def parse_psi(text: str, *, source: str = "pressure") -> dict[str, PsiLine]:
    """``{"some": PsiLine, "full": PsiLine}`` (``full`` may be missing on old kernels' cpu file)."""
    out: dict[str, PsiLine] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        kind, *fields = line.split()
        if kind not in PSI_KINDS:
            raise Unavailable(f"{source}: line {number}: unknown kind {kind!r}", Absence.READ_ERROR)
        values: dict[str, str] = {}
        for item in fields:
            key, sep, value = item.partition("=")
            if not sep:
                raise Unavailable(f"{source}: line {number}: expected key=value, got {item!r}", Absence.READ_ERROR)
            values[key] = value
        try:
            out[kind] = PsiLine(
                avg10=_finite(values["avg10"]),
                avg60=_finite(values["avg60"]),
                avg300=_finite(values["avg300"]),
                total_us=int(values["total"]),
            )
        except KeyError as exc:
            raise Unavailable(f"{source}: line {number}: {exc.args[0]}= missing", Absence.READ_ERROR) from exc
        except ValueError as exc:
            raise Unavailable(f"{source}: line {number}: bad number ({exc})", Absence.READ_ERROR) from exc
        if out[kind].total_us < 0:
            raise Unavailable(f"{source}: line {number}: negative total", Absence.READ_ERROR)
    if "some" not in out:
        raise Unavailable(f"{source}: no 'some' line (empty or truncated file)", Absence.READ_ERROR)
    return out


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text!r} is not a finite non-negative number")
    return value


# --- /proc/stat -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CpuTimes:
    """The aggregate ``cpu`` line of /proc/stat, in USER_HZ ticks."""

    total: int
    """Sum of every field (guest time is already inside user/nice)."""
    steal: int


def parse_cpu_stat(text: str, *, source: str = "/proc/stat") -> CpuTimes:
    """The aggregate ``cpu`` line; steal is its 8th value."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = line.split()[1:]
            if len(fields) < 8:
                raise Unavailable(f"{source}: cpu line has {len(fields)} values, steal needs 8", Absence.READ_ERROR)
            try:
                values = [int(v) for v in fields]
            except ValueError as exc:
                raise Unavailable(f"{source}: cpu line: bad number ({exc})", Absence.READ_ERROR) from exc
            if any(v < 0 for v in values):
                raise Unavailable(f"{source}: cpu line: negative value", Absence.READ_ERROR)
            # guest and guest_nice (9th, 10th) are already counted in user and nice.
            return CpuTimes(total=sum(values[:8]), steal=values[7])
    raise Unavailable(f"{source}: no aggregate 'cpu' line", Absence.READ_ERROR)


# --- /proc/vmstat -------------------------------------------------------------------


def parse_vmstat_field(text: str, field: str, *, source: str = "/proc/vmstat") -> int:
    """The value of one ``name value`` line."""
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == field:
            try:
                number = int(value.strip())
            except ValueError as exc:
                raise Unavailable(f"{source}: {field}: bad number {value.strip()!r}", Absence.READ_ERROR) from exc
            if number < 0:
                raise Unavailable(f"{source}: {field}: negative value", Absence.READ_ERROR)
            return number
    raise Unavailable(f"{source}: no {field} line (kernel too old or file truncated)", Absence.UNSUPPORTED)


# --- /proc/diskstats ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DiskStat:
    """One /proc/diskstats line (the fields the collector uses)."""

    major: int
    minor: int
    name: str
    ios: int
    """Completed reads + writes (+ discards + flushes when the kernel reports them)."""
    ticks_ms: int
    """Milliseconds spent on those requests (sum over requests)."""


def parse_diskstats(text: str, *, source: str = "/proc/diskstats") -> dict[str, DiskStat]:
    """Every device line by name; lines that are not diskstats raise :class:`Unavailable`."""
    out: dict[str, DiskStat] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 14:
            raise Unavailable(
                f"{source}: line {number}: {len(fields)} fields, expected at least 14", Absence.READ_ERROR
            )
        try:
            nums = [int(v) for v in fields[3:]]
            major, minor = int(fields[0]), int(fields[1])
        except ValueError as exc:
            raise Unavailable(f"{source}: line {number}: bad number ({exc})", Absence.READ_ERROR) from exc
        if min(nums) < 0 or major < 0 or minor < 0:
            raise Unavailable(f"{source}: line {number}: negative value", Absence.READ_ERROR)
        ios = nums[0] + nums[4]
        ticks = nums[3] + nums[7]
        if len(nums) >= 15:  # discards (4.18+)
            ios += nums[11]
            ticks += nums[14]
        if len(nums) >= 17:  # flushes (5.5+)
            ios += nums[15]
            ticks += nums[16]
        out[fields[2]] = DiskStat(major=major, minor=minor, name=fields[2], ios=ios, ticks_ms=ticks)
    if not out:
        raise Unavailable(f"{source}: no devices (empty file)", Absence.READ_ERROR)
    return out


def device_names(proc_root: Path) -> dict[tuple[int, int], str]:
    """``(major, minor) -> name`` from diskstats; empty when it cannot be read."""
    try:
        stats = parse_diskstats(read_text(proc_root / "diskstats"))
    except Unavailable:
        return {}
    return {(s.major, s.minor): s.name for s in stats.values()}


def parse_cpu_list(text: str) -> list[int]:
    """``0-3,8`` -> ``[0, 1, 2, 3, 8]`` (the format of /sys/devices/system/cpu/online)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            start, end = int(lo), int(hi) if sep else int(lo)
        except ValueError as exc:
            raise Unavailable(f"cpu list {text.strip()!r}: bad range {part!r}", Absence.READ_ERROR) from exc
        if start < 0 or end < start or end - start > 65536:
            raise Unavailable(f"cpu list {text.strip()!r}: bad range {part!r}", Absence.READ_ERROR)
        cpus.extend(range(start, end + 1))
    if not cpus:
        raise Unavailable("cpu list is empty", Absence.READ_ERROR)
    return cpus


def online_cpus(sys_root: Path) -> list[int]:
    """Online CPUs from ``<sys>/devices/system/cpu/online``; falls back to ``os.cpu_count()``."""
    try:
        return parse_cpu_list(read_text(sys_root / "devices/system/cpu/online"))
    except Unavailable:
        return list(range(os.cpu_count() or 1))
