"""The report store interface. Nothing outside ``mco_py.store`` knows which one is in use."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from mco_py.model import Report


class ReportStore(Protocol):
    """Where the report lives: the CR status (cluster mode) or a JSON file (standalone)."""

    def read(self) -> Report:
        """The current report.

        Raises :class:`~mco_py.errors.ReportNotFound` when there is none yet,
        :class:`~mco_py.errors.ReportError` when it cannot be decoded, and
        :class:`~mco_py.errors.StoreUnavailable` when the store cannot be reached.
        """
        ...

    def write(self, report: Report, *, status: Mapping[str, Any] | None = None) -> None:
        """Replace the report. Raises :class:`~mco_py.errors.ReportError` subclasses on failure.

        ``status``, when given, must be ``report_to_status(report)`` (a caller that already
        built it saves the store the work).
        """
        ...

    def write_status(self, status: Mapping[str, Any]) -> None:
        """``write(report, status=status)`` given only the ``status`` document (as
        :func:`~mco_py.model.report_to_status` builds it): the report it came from is not needed."""
        ...

    def describe(self) -> str:
        """Where the report is, for logs and ``mco report``."""
        ...
