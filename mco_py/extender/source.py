"""Where the extender gets the report (and, for kube-scheduler, node labels).

- :class:`FileReportSource` (standalone): the report file, re-read when its
  mtime, size or inode changes (one ``stat`` per call, no thread).
- :class:`WatchReportSource` (cluster): a list+watch of the
  ``NodeInterferenceReport`` named ``crName`` and of its shards, kept by background threads.
- :class:`NodeLabelCache` (cluster): labels of every Node from a watch, for
  kube-scheduler requests that carry only node names (``nodeCacheCapable``).

Every source answers :meth:`snapshot` without raising; the policy decides
from the snapshot whether to use the report or fall back.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mco_py.analysis.policy import IndexedReport, index_report
from mco_py.errors import ReportError
from mco_py.kube.watch import ListWatch, Reflector
from mco_py.model import Report
from mco_py.obs.logging import OnceFilter
from mco_py.report.assemble import ShardAssembler, index_of, shard_of
from mco_py.report.document import ShardIndex, Status, decode, report_of
from mco_py.store.file import decode_document

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The latest report a source holds, or why there is none."""

    report: IndexedReport | None
    problem: str | None = None
    """Why there is no usable report (missing, unreadable...)."""
    unreadable: bool = False
    """The latest document exists but could not be read or decoded."""
    synced: bool = True
    """The source finished its first load attempt (readiness)."""


class ReportSource(Protocol):
    def snapshot(self) -> Snapshot: ...

    def describe(self) -> str: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


class FileReportSource:
    """Standalone mode: the report file written atomically by the analyzer."""

    def __init__(
        self, path: str | Path, *, recheck_seconds: float = 0.0, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.path = Path(path)
        self._recheck = recheck_seconds
        self._monotonic = monotonic
        self._checked = -math.inf
        self._stamp: tuple[int, int, int] | None = None
        self._snapshot = Snapshot(None, f"{self.path} not read yet")
        self._lock = threading.Lock()
        self._once = OnceFilter()

    def describe(self) -> str:
        return f"file {self.path}"

    def start(self) -> None:
        self.snapshot()

    def stop(self) -> None:
        """Nothing runs in the background."""

    def snapshot(self) -> Snapshot:
        """The report; the file is stat-ed at most once per ``recheck_seconds`` (0 = on every call)."""
        if self._recheck > 0:
            now = self._monotonic()
            if now - self._checked < self._recheck:
                return self._snapshot
            self._checked = now
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return self._set(None, Snapshot(None, f"{self.path} does not exist", unreadable=False), "missing")
        except OSError as exc:
            return self._set(None, Snapshot(None, f"{self.path}: {exc.strerror or exc}", unreadable=True), "stat")
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp == self._stamp:
            return self._snapshot
        try:
            raw = self.path.read_bytes()
            snap = Snapshot(index_report(decode_document(raw, source=str(self.path))))
            problem = ""
        except OSError as exc:
            snap = Snapshot(None, f"{self.path}: cannot read: {exc.strerror or exc}", unreadable=True)
            problem = "read"
        except ReportError as exc:
            snap = Snapshot(None, str(exc), unreadable=True)
            problem = "decode"
        return self._set(stamp, snap, problem)

    def _set(self, stamp: tuple[int, int, int] | None, snap: Snapshot, problem: str) -> Snapshot:
        with self._lock:
            changed = stamp != self._stamp or snap.problem != self._snapshot.problem
            self._stamp = stamp
            self._snapshot = snap
        if changed and problem and self._once.first(problem):
            log.warning("report not usable; basic mode", extra={"source": self.describe(), "problem": snap.problem})
        if not problem:
            for key in ("missing", "stat", "read", "decode"):
                self._once.clear(key)
        return snap


class WatchReportSource:
    """Cluster mode: the ``NodeInterferenceReport`` object ``name`` from a list+watch, and, given
    ``shards``, a list+watch of its ``NodeInterferenceReportShard`` objects for a sharded report
    (:class:`~mco_py.report.shards.ShardAssembler` decides what is served)."""

    def __init__(
        self, listwatch: ListWatch, *, name: str = "cluster", backoff_max: float = 10.0, shards: ListWatch | None = None
    ) -> None:
        self.name = name
        self._snapshot = Snapshot(None, f"NodeInterferenceReport {name} not listed yet", synced=False)
        self._lock = threading.Lock()
        self._head: Report | None = None
        self._index: ShardIndex | None = None
        self._assembler = ShardAssembler()
        self._once = OnceFilter()
        self._reflector = Reflector(listwatch, on_change=self._changed, name=f"nir-{name}", backoff_max=backoff_max)
        self._shards = (
            Reflector(
                shards,
                on_change=self._shards_changed,
                name=f"nirs-{name}",
                backoff_max=backoff_max,
                transform=lambda obj: {"shard": shard_of(obj)},  # decoded once, the raw object let go
            )
            if shards is not None
            else None
        )

    def describe(self) -> str:
        return f"NodeInterferenceReport {self.name} (watch)"

    def start(self) -> None:
        self._reflector.start()
        if self._shards is not None:
            self._shards.start()

    def stop(self) -> None:
        self._reflector.stop()
        if self._shards is not None:
            self._shards.stop()

    def reflector_status(self) -> Any:
        return self._reflector.status()

    def snapshot(self) -> Snapshot:
        snap = self._snapshot
        if not snap.synced:
            error = self._reflector.status().last_error
            if not error and self._shards is not None and self._index is not None:
                error = self._shards.status().last_error
            if error:
                return Snapshot(None, f"NodeInterferenceReport {self.name} not listed yet: {error}", synced=False)
        return snap

    def _changed(self, items: Mapping[str, Mapping[str, Any]]) -> None:
        obj = items.get(self.name)
        status = obj.get("status") if obj is not None else None
        with self._lock:
            self._head = self._index = None
            if obj is None:
                snap = Snapshot(None, f"NodeInterferenceReport {self.name} does not exist")
            elif not isinstance(status, Mapping) or not status:
                snap = Snapshot(None, f"NodeInterferenceReport {self.name} has no status yet")
            else:
                try:
                    doc = decode(status, Status, "status")
                    head = report_of(doc)
                    index = index_of(doc)
                except ReportError as exc:
                    snap = Snapshot(None, f"NodeInterferenceReport {self.name}: {exc}", unreadable=True)
                    log.warning("report not usable; basic mode", extra={"problem": snap.problem})
                else:
                    if index is None:
                        self._assembler = ShardAssembler()  # a later sharded report starts afresh
                        snap = Snapshot(index_report(head))
                    else:
                        self._head, self._index = head, index
                        self._assembler.set_head(head, index)
                        snap = self._sharded()
            self._snapshot = snap  # one reference swap; readers never see a half-built snapshot

    def _shards_changed(self, items: Mapping[str, Mapping[str, Any]]) -> None:
        with self._lock:
            self._assembler.set_shards({key: item["shard"] for key, item in items.items()})
            if self._index is not None:
                self._snapshot = self._sharded()

    def _sharded(self) -> Snapshot:
        """The snapshot of a sharded report (under the lock)."""
        if self._shards is None:
            return Snapshot(
                None, f"NodeInterferenceReport {self.name} is sharded and this reader does not watch shards"
            )
        served = self._assembler.report()
        synced = self._shards.status().synced
        problem = self._assembler.problem
        if problem and self._once.first("shards"):  # once per spell: a generation switch takes many events
            log.warning("report shards not usable yet; serving the last whole state", extra={"problem": problem})
        elif not problem:
            self._once.clear("shards")
        if served is None:
            previous = self._snapshot
            if previous.report is not None:  # the report just turned sharded: the inline one until it is whole
                return previous
            return Snapshot(None, problem or "report shards not listed yet", synced=synced)
        envelope, by_name = served
        return Snapshot(IndexedReport(envelope, by_name), synced=synced)


class NodeLabelCache:
    """Labels of every Node, from a list+watch (for kube-scheduler ``nodeCacheCapable`` requests)."""

    def __init__(self, listwatch: ListWatch, *, backoff_max: float = 10.0) -> None:
        self._labels: Mapping[str, Mapping[str, str]] = {}
        self._reflector = Reflector(listwatch, on_change=self._changed, name="nodes", backoff_max=backoff_max)

    def start(self) -> None:
        self._reflector.start()

    def stop(self) -> None:
        self._reflector.stop()

    def labels(self, node: str) -> Mapping[str, str] | None:
        """Labels of ``node``, or None when the node is not (yet) known."""
        return self._labels.get(node)

    def _changed(self, items: Mapping[str, Mapping[str, Any]]) -> None:
        out: dict[str, Mapping[str, str]] = {}
        for name, obj in items.items():
            meta = obj.get("metadata")
            labels = meta.get("labels") if isinstance(meta, Mapping) else None
            out[name] = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}
        self._labels = out


class LabelLookup(Protocol):
    def labels(self, node: str) -> Mapping[str, str] | None: ...


class NoLabels:
    """Standalone mode: no Node objects to look at."""

    def labels(self, node: str) -> Mapping[str, str] | None:
        return None

    def start(self) -> None:
        """Nothing to start."""

    def stop(self) -> None:
        """Nothing to stop."""
