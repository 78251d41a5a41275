"""The report builder: the scorer's assessments in, the status document out. Pure; one
report thread.

Entries of nodes whose assessment did not change are reused (:mod:`mco_py.report.cache`);
with a budget the document is fitted to it (:mod:`mco_py.report.size`), or, with a shard
planner, split into shards once it no longer fits in full (:mod:`mco_py.report.shards`).
"""

from __future__ import annotations

from msgspec.structs import replace

from mco_py.model import Report
from mco_py.report.cache import EntryCache
from mco_py.report.document import envelope
from mco_py.report.shards import ShardPlanner
from mco_py.report.size import Fitted, fit


class ReportBuilder:
    """Builds the status document of each report, reusing what did not change since the last one."""

    def __init__(self, budget: int | None = None, *, shards: ShardPlanner | None = None) -> None:
        self.budget = budget
        """Bytes the encoded status may take (None: no limit, every entry in full)."""
        self.shards = shards
        """Splits a report over the budget into shards (None: strip detail to fit instead)."""
        self._cache = EntryCache()

    def reset(self, min_generation: int = 0) -> None:
        """The last report was not written as built (failed, or not the leader): write the next one
        whole (a sharded one as a generation numbered ``min_generation`` or above)."""
        if self.shards is not None:
            self.shards.reset(min_generation)

    def build(self, report: Report, *, write: bool = True) -> Fitted:
        """The status document of ``report`` (sizes and counts with it); ``write=False``: only its
        envelope (a follower builds for its metrics and never writes)."""
        if not write:
            return Fitted(envelope(report))
        record = self._cache.record
        try:
            if self.budget is None:
                return Fitted(replace(envelope(report), nodes=[record(item).full for item in report.nodes]))
            if self.shards is not None:
                plan = self.shards.plan(report.nodes, record, report.last_update_time)
                if plan is None:
                    return fit(report, [record(item) for item in report.nodes], self.budget)
                return Fitted(replace(envelope(report), shards=plan.index), sum(plan.sizes), shards=plan)
            return fit(report, [record(item) for item in report.nodes], self.budget)
        finally:
            self._cache.end_round()
