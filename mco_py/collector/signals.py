"""Plain data of the collector: one reading per signal, one sample per interval.

A reading either carries a value or says why it is absent (kind + reason);
an absent signal is never reported as 0.
"""

from __future__ import annotations

import enum
import errno
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mco_py.errors import SignalUnavailable


class Absence(enum.Enum):
    """Why a signal carries no value (bounded: used as a metric label)."""

    UNSUPPORTED = "unsupported"
    """The host has no such facility (no PMU, no PSI, no resctrl)."""
    PERMISSION = "permission"
    """The facility exists but may not be used (EPERM, EACCES, capability)."""
    READ_ERROR = "read_error"
    """Reading failed this time (missing or garbled file)."""
    INSUFFICIENT_DATA = "insufficient_data"
    """Not enough events in the window (e.g. too few block I/Os for a P99)."""
    DISABLED = "disabled"
    """Switched off by configuration."""
    WARMING_UP = "warming_up"
    """First reading: a rate needs two."""


class Unavailable(SignalUnavailable):
    """A signal cannot be read; carries the absence kind next to the reason."""

    def __init__(self, reason: str, kind: Absence = Absence.READ_ERROR) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


_PERMISSION_ERRNOS = {errno.EPERM, errno.EACCES}
_UNSUPPORTED_ERRNOS = {errno.ENOENT, errno.ENODEV, errno.EOPNOTSUPP, errno.ENOSYS, errno.ENXIO}


def errno_kind(code: int | None, *, missing: Absence = Absence.UNSUPPORTED) -> Absence:
    """Absence kind for an errno: permission, unsupported (``missing`` for ENOENT) or read error."""
    if code in _PERMISSION_ERRNOS:
        return Absence.PERMISSION
    if code == errno.ENOENT:
        return missing
    if code in _UNSUPPORTED_ERRNOS:
        return Absence.UNSUPPORTED
    return Absence.READ_ERROR


def errno_text(code: int | None) -> str:
    """``ENOENT (No such file or directory)`` for an errno value."""
    if code is None:
        return "unknown error"
    name = errno.errorcode.get(code, f"errno {code}")
    return f"{name} ({os.strerror(code)})"


def unavailable_from_oserror(what: str, exc: OSError, *, missing: Absence = Absence.UNSUPPORTED) -> Unavailable:
    """An :class:`Unavailable` naming ``what`` failed and the errno behind it."""
    return Unavailable(f"{what}: {errno_text(exc.errno)}", errno_kind(exc.errno, missing=missing))


@dataclass(frozen=True, slots=True)
class Reading:
    """One signal in one sample: a value, or the absence kind and reason."""

    name: str
    """Signal key; the scored ones are the report keys (``psiIoSomeAvg10``, ``bioLatencyP99Ms``, ...)."""
    value: float | None
    """The measured value; None when absent."""
    backend: str
    """What produced (or tried to produce) it: procfs, perf, libbpf, bcc, tracefs, diskstats-average, ..."""
    absence: Absence | None = None
    """Why the value is missing; None when present."""
    reason: str = ""
    """Human-readable absence reason; empty when present."""
    device: str = ""
    """Block device for per-device series; empty for node-wide ones."""
    events: int | None = None
    """Events behind the value in this window (block I/Os for a P99), when meaningful."""

    @property
    def present(self) -> bool:
        """True when the reading carries a value."""
        return self.value is not None

    @classmethod
    def absent(cls, name: str, backend: str, kind: Absence, reason: str, **extra: Any) -> Reading:
        """An absent reading."""
        return cls(name=name, value=None, backend=backend, absence=kind, reason=reason, **extra)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (``mco collector --once -o json``)."""
        out: dict[str, Any] = {"name": self.name, "backend": self.backend}
        if self.device:
            out["device"] = self.device
        if self.value is not None:
            out["value"] = self.value
        else:
            out["absent"] = {"kind": self.absence.value if self.absence else "", "reason": self.reason}
        if self.events is not None:
            out["events"] = self.events
        return out


def absent_all(names: Iterable[str], backend: str, exc: Unavailable) -> list[Reading]:
    """The same absence for each of ``names``."""
    return [Reading.absent(n, backend, exc.kind, exc.reason) for n in names]


@dataclass(frozen=True, slots=True)
class Total:
    """A running count read with a sample, for a Prometheus counter or histogram; never streamed.

    Counts come from the kernel (PSI ``total=`` and vmstat ``oom_kill``, since boot) or are
    summed by the collector since it started (block requests); ``rate()`` copes with either
    starting over.
    """

    name: str
    """Key: ``psiCpuSomeSeconds`` (and the other PSI lines), ``oomKills``, ``bioRequests``, ``bioLatency``."""
    value: float
    """The count: seconds stalled for PSI, events otherwise (observations for the latency histogram)."""
    slots: Mapping[int, int] | None = None
    """Latency histogram only: slot (``histogram.py`` layout) -> observations since the collector started."""


@dataclass(frozen=True, slots=True)
class NodeSample:
    """Everything one collector measured in one interval."""

    node: str
    """Node name (joins collector, report and scheduler)."""
    timestamp: float
    """End of the interval, seconds since the Unix epoch."""
    interval: float
    """Length of the interval the rates cover, seconds."""
    readings: tuple[Reading, ...] = ()
    """Every signal, present or absent."""
    backends: Mapping[str, str] = field(default_factory=dict)
    """Backend in use per signal group (``psi``, ``llc``, ``bio``, ...)."""
    totals: tuple[Total, ...] = ()
    """Running counts for the exporter's counters (collector-local: not sent to the analyzer)."""

    def get(self, name: str, device: str = "") -> Reading | None:
        """The reading of ``name`` (and ``device``), or None."""
        for item in self.readings:
            if item.name == name and item.device == device:
                return item
        return None

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "node": self.node,
            "timestamp": self.timestamp,
            "intervalSeconds": self.interval,
            "backends": dict(self.backends),
            "signals": [r.as_dict() for r in self.readings],
        }


@dataclass(frozen=True, slots=True)
class StreamStatus:
    """Counters of one analyzer stream, for the collector's self-metrics."""

    analyzer: str
    """Analyzer address as configured (host:port)."""
    connected: bool
    """True while a stream is open and the last send succeeded."""
    sent: int
    """Samples the analyzer acknowledged (unacknowledged ones go back into the buffer)."""
    dropped: int
    """Samples dropped because the send buffer was full (oldest first)."""
    buffered: int
    """Samples waiting in the send buffer."""
    reconnects: int
    """Streams opened after the first one."""
    acked: int = 0
    """Samples the analyzer acknowledged as accepted."""
