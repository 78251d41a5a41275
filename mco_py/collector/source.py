"""What every signal source looks like to the sampler."""

from __future__ import annotations

import logging
from typing import Protocol

from mco_py.collector.signals import Reading, Total
from mco_py.obs.logging import OnceFilter


class Source(Protocol):
    """A group of signals read together (PSI, steal, block latency, ...)."""

    group: str
    """Signal group, a bounded label (``psi``, ``llc``, ``bio``, ...)."""
    backend: str
    """Backend chosen when the source was opened (probed once at start)."""

    def read(self, now: float) -> list[Reading]:
        """Readings for the interval ending at ``now`` (monotonic seconds); never raises for host trouble."""
        ...

    def totals(self) -> list[Total]:
        """Running counts as of the last :meth:`read` (empty when the source has none)."""
        ...

    def close(self) -> None:
        """Release kernel objects (BPF links, tracefs instances, perf fds)."""
        ...


class ProblemLog:
    """Logs each distinct problem of a source once, and once more when it clears."""

    def __init__(self, logger: logging.Logger, once: OnceFilter | None = None) -> None:
        self._log = logger
        self._once = once or OnceFilter()
        self._active: dict[str, str] = {}

    def problem(self, key: str, reason: str) -> None:
        """Report ``reason`` for ``key``; logged only the first time."""
        if self._once.first(f"{key}:{reason}"):
            self._log.warning("%s unavailable: %s", key, reason, extra={"signal": key, "reason": reason})
        self._active[key] = reason

    def ok(self, key: str) -> None:
        """``key`` reads again; a later failure is logged again."""
        reason = self._active.pop(key, None)
        if reason is not None:
            self._once.clear(f"{key}:{reason}")
            self._log.info("%s available again", key, extra={"signal": key})
