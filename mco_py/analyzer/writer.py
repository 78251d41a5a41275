"""The report loop: build the report every interval; the leader writes it.

Followers build it too (their per-node metrics stay right and their state warm) but do
not write. A failed write is counted and logged once per kind of failure; scoring goes
on regardless and the next interval writes the current state (catching up after an
API outage).

The previous report is kept until the new one is written: releasing tens of thousands of
entries then comes after the write, not between the build and it (its cost is in the report's
CPU figure: docs/benchmarks.md, "Report build and serialize").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from mco_py.analyzer.engine import Engine
from mco_py.errors import GenerationTaken, ReportError
from mco_py.obs.logging import OnceFilter
from mco_py.report.size import Fitted
from mco_py.store.base import ReportStore

log = logging.getLogger(__name__)


class ReportLoop:
    """Runs :meth:`tick` every ``interval`` seconds in a daemon thread, and sooner (``min_interval``
    after the previous tick) when a sample changed a node's level."""

    def __init__(
        self,
        engine: Engine,
        store: ReportStore,
        *,
        interval: float = 5.0,
        min_interval: float = 1.0,
        is_leader: Callable[[], bool] = lambda: True,
    ) -> None:
        self.engine = engine
        self.store = store
        self.interval = interval
        self.min_interval = min_interval
        """After a level change the next report comes this long after the previous one (0: only
        every ``interval``)."""
        self.is_leader = is_leader
        self._once = OnceFilter()
        self._failing = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous: Fitted | None = None
        """The report of the last tick, released after this tick's write (see the module doc)."""

    def tick(self) -> bool:
        """Build the report; write it when leader. Returns True when a report was written."""
        leader = self.is_leader()
        self.engine.metrics.leader.set(1 if leader else 0)
        if not leader:  # build for the metrics only; whoever leads next writes everything
            self.engine.report_not_written()
            self._previous = self.engine.build_report(write=False)
            return False
        fitted = self.engine.build_report()
        try:
            return self._publish(fitted)
        except BaseException:
            self.engine.report_not_written()  # whatever was written, the next round writes all
            raise
        finally:
            self._previous = fitted  # the previous one is released here, after the write

    def _publish(self, fitted: Fitted) -> bool:
        try:
            self.store.publish(fitted)
        except ReportError as exc:
            self.engine.report_not_written(exc.floor if isinstance(exc, GenerationTaken) else 0)
            self.engine.metrics.write_errors.inc()
            self._failing = True
            if self._once.first(type(exc).__name__):
                log.error("cannot write the report to %s: %s; scoring continues", self.store.describe(), exc)
            return False
        self.engine.metrics.writes.inc()
        if fitted.shards is not None:
            self.engine.metrics.shard_writes.inc(len(fitted.shards.writes))
        if self._failing:
            self._failing = False
            self._once = OnceFilter()
            log.info("report written to %s again", self.store.describe())
        return True

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                started = time.monotonic()
                self.engine.level_changed.clear()  # a change from here on is in this report or wakes the next
                try:
                    self.tick()
                except Exception:  # the loop must outlive any bug in one round
                    log.exception("report round failed")
                self._pause(started)

        self._thread = threading.Thread(target=loop, name="report-loop", daemon=True)
        self._thread.start()

    def _pause(self, started: float) -> None:
        """Until ``interval`` after ``started``, or ``min_interval`` after it once a level changed."""
        if 0 < self.min_interval < self.interval:
            if self._stop.wait(max(0.0, started + self.min_interval - time.monotonic())):
                return
            left = started + self.interval - time.monotonic()
            if left > 0:
                self.engine.level_changed.wait(left)
            return
        self._stop.wait(max(0.0, started + self.interval - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        self.engine.level_changed.set()  # wakes the pause
        if self._thread:
            self._thread.join(timeout=self.interval + 10)
