"""The report store interface. Nothing outside ``mco_py.store`` knows which one is in use."""

from __future__ import annotations

from typing import Protocol

from mco_py.model import Report
from mco_py.report.document import Status
from mco_py.report.size import Fitted


class ReportStore(Protocol):
    """Where the report lives: the CR status (cluster mode) or a JSON file (standalone)."""

    def read(self) -> Report:
        """The current report.

        Raises :class:`~mco_py.errors.ReportNotFound` when there is none yet,
        :class:`~mco_py.errors.ReportError` when it cannot be decoded, and
        :class:`~mco_py.errors.StoreUnavailable` when the store cannot be reached.
        """
        ...

    def write(self, report: Report) -> None:
        """Replace the report with ``report``, every entry in full (:func:`~mco_py.report.document.status_of`)."""
        ...

    def publish(self, fitted: Fitted) -> None:
        """Write a built report: its shards first when it has some (:mod:`mco_py.report.shards`), then
        the report object. Raises :class:`~mco_py.errors.ReportError` subclasses on failure."""
        ...

    def write_status(self, status: Status) -> None:
        """Replace the report with a built ``status`` document (:mod:`mco_py.report`). Raises
        :class:`~mco_py.errors.ReportError` subclasses on failure."""
        ...

    def describe(self) -> str:
        """Where the report is, for logs and ``mco report``."""
        ...
