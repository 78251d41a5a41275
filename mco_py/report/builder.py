"""The report builder: the scorer's assessments in, the status document out. Pure; one
report thread.

Entries of nodes whose assessment did not change are reused (:mod:`mco_py.report.cache`);
with a budget the document is fitted to it (:mod:`mco_py.report.size`).
"""

from __future__ import annotations

from mco_py.model import Report
from mco_py.report.cache import EntryCache
from mco_py.report.document import envelope
from mco_py.report.size import Fitted, fit


class ReportBuilder:
    """Builds the status document of each report, reusing what did not change since the last one."""

    def __init__(self, budget: int | None = None) -> None:
        self.budget = budget
        """Bytes the encoded status may take (None: no limit, every entry in full)."""
        self._cache = EntryCache()

    def build(self, report: Report) -> Fitted:
        """The status document of ``report`` (sizes and counts with it)."""
        record = self._cache.record
        try:
            if self.budget is None:
                status = envelope(report)
                status["nodes"] = [record(item).full for item in report.nodes]
                return Fitted(status)
            return fit(report, [record(item) for item in report.nodes], self.budget)
        finally:
            self._cache.end_round()
