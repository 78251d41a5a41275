"""The one writer of the guard's cgroup files: every limit is journalled first (:mod:`.journal`),
written with one ``write(2)`` (per device line for the per-device files, as the kernel wants
them), and written back by :meth:`LimitWriter.restore`. It counts the files it wrote, the writes
and write-backs that failed, and the limits another writer had replaced.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from mco_py.collector.cgroups import Layout, device_values
from mco_py.collector.guard import files
from mco_py.collector.guard.journal import Journal, selected
from mco_py.errors import ConfigError

log = logging.getLogger(__name__)

#: What a v2 ``io.max`` line takes to lift a device's bandwidth limits (v1: a rule of 0 deletes one).
V2_DEVICE_RESET = "rbps=max wbps=max"


@dataclass(frozen=True, slots=True)
class WriteCounts:
    """What the writer did since it was made."""

    writes: int = 0
    """Files written: limits and write-backs (a per-device line each)."""
    failures: int = 0
    """Limit writes or write-backs that failed."""
    reasserted: int = 0
    """Times another writer (the kubelet) had replaced a limit this writer set."""


class LimitWriter:
    """Writes the limits of a layout's groups, and writes back what its journal recorded."""

    def __init__(self, layout: Layout, journal: Journal) -> None:
        self.layout = layout
        self.journal = journal
        self._written: dict[tuple[str, str], str] = {}
        """(group, file) -> what :meth:`ensure` last wrote there."""
        self._counts = WriteCounts()
        self._lock = threading.Lock()

    @classmethod
    def at(cls, cgroup_root: Path, journal_path: Path) -> LimitWriter:
        """A writer for the layout mounted at ``cgroup_root``, journalling to ``journal_path``."""
        layout = files.detect_layout(cgroup_root)
        return cls(layout, Journal(journal_path, layout))

    def counts(self) -> WriteCounts:
        """The counts so far."""
        return self._counts

    def read(self, group: str, name: str) -> str:
        """``group``'s file ``name`` as the kernel shows it."""
        return files.read(self.layout, group, name)

    def ensure(self, group: str, name: str, wanted: str) -> None:
        """Make ``group``'s file ``name`` say ``wanted`` (the whole file), journalled first; a file
        that no longer says what this writer wrote there counts as reasserted."""
        current = self.read(group, name)
        if current == wanted:
            return
        if (group, name) in self._written and current != self._written[group, name]:
            self._count(reasserted=1)  # someone (the kubelet) wrote over it
        self.write(group, name, wanted)
        self._written[group, name] = wanted

    def write(self, group: str, name: str, text: str) -> None:
        """Write ``text`` (a value, or one device's line) to ``group``'s file ``name``; what the
        file said before the first write is journalled first."""
        if self.journal.original(group, name) is None:
            self.journal.remember(group, name, self.read(group, name))
        self._put(group, name, text)

    def failed(self, group: str, what: str, exc: Exception) -> None:
        """Count and log a write to ``group`` (of its file or resource ``what``) that failed."""
        self._count(failures=1)
        log.warning("cannot set %s of offline group %s: %s", what, group, exc, extra={"group": group})

    def restore(self, *, only: str = "", under: str = "") -> list[str]:
        """Write back every journalled file (this run's and those a killed guard left), or with
        ``only`` just the files of that name, with ``under`` just that group's and those of the
        groups below it (the I/O limits of a v1 pod's containers). Returns what could not be
        written back (a group gone is not a problem); each counts as a failure."""
        problems = list(self.journal.problems)
        done = []
        for group, name, text in self.journal.entries(only=only, under=under):
            try:
                if name in files.DEVICE_FILES:
                    self._put_devices(group, name, text)
                else:
                    self._put(group, name, text)
            except FileNotFoundError:
                pass  # the group is gone, and its limit with it
            except (OSError, ConfigError) as exc:
                problems.append(f"{group}/{name}: cannot restore {text!r}: {exc}")
                continue
            done.append((group, name))
        self.journal.forget(done)
        self._written = {k: v for k, v in self._written.items() if not selected(*k, only=only, under=under)}
        self._count(failures=len(problems))
        return problems

    def _put_devices(self, group: str, name: str, original: str) -> None:
        """Put a per-device file back as ``original`` showed it: devices limited since get their
        limit lifted, devices it listed get their line back."""
        before = device_values(original)
        reset = V2_DEVICE_RESET if self.layout.version == 2 else "0"
        for device in device_values(self.read(group, name)):
            if device not in before:
                self._put(group, name, f"{device} {reset}")
        for device, value in before.items():
            self._put(group, name, f"{device} {value}")

    def _put(self, group: str, name: str, text: str) -> None:
        with files.path(self.layout, group, name).open("w") as file:  # one write(2), as the kernel wants it
            file.write(text)
        self._count(writes=1)

    def _count(self, *, writes: int = 0, failures: int = 0, reasserted: int = 0) -> None:
        with self._lock:
            now = self._counts
            self._counts = WriteCounts(now.writes + writes, now.failures + failures, now.reasserted + reasserted)
