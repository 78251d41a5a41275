"""Hot reload of the detection rules: a file (standalone) or the ConfigMap (cluster).

Every ``interval`` seconds the source is read again. A valid, changed document replaces
the rules in force; an invalid one is refused (logged, counted in
``mco_analyzer_rules_reload_total{result="invalid"}``, ``mco_analyzer_rules_source_valid`` 0
until a valid document replaces it, reported once per distinct
document through ``report_invalid``) and the last good rules stay. A format-1 document is
read converted, with one warning per document that says what changed.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Protocol

from mco_py.analysis.rules import parse_rules
from mco_py.analyzer.engine import Engine
from mco_py.errors import MCOError, ReportNotFound, RulesError, StoreUnavailable
from mco_py.obs.logging import OnceFilter

log = logging.getLogger(__name__)


class RulesSource(Protocol):
    def describe(self) -> str: ...

    def fetch(self) -> str:
        """The document text; ReportNotFound when there is none, StoreUnavailable when unreachable."""
        ...

    def report_invalid(self, message: str) -> None:
        """Tell the operator where they look (a Kubernetes Event); may raise MCOError."""
        ...


class FileRulesSource:
    """Rules from a local YAML file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def describe(self) -> str:
        return f"file {self.path}"

    def fetch(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise ReportNotFound(f"{self.path} does not exist") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreUnavailable(f"{self.path}: cannot read: {exc}") from exc

    def report_invalid(self, message: str) -> None:
        """The log line is the report in standalone mode."""


class RulesWatcher:
    """Re-reads the rules source and swaps the engine's rules when a new valid document appears."""

    def __init__(self, source: RulesSource, engine: Engine, *, interval: float = 30.0) -> None:
        self.source = source
        self.engine = engine
        self.interval = interval
        self._last_text: str | None = None
        self._last_invalid: str | None = None
        self._once = OnceFilter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def reload(self) -> str:
        """One attempt; returns the result label (success, unchanged, invalid, missing, error)."""
        result = self._reload()
        self.engine.metrics.rules_reloads.labels(result).inc()
        if result != "error":  # unreadable: nothing known about the document
            self.engine.metrics.rules_source_valid.set(0 if result == "invalid" else 1)
        return result

    def _reload(self) -> str:
        where = self.source.describe()
        try:
            text = self.source.fetch()
        except ReportNotFound as exc:
            if self._once.first("missing"):
                log.warning(
                    "no detection rules at %s (%s); keeping rules version %s%s",
                    where,
                    exc,
                    self.engine.rules.version,
                    " (built-in defaults)" if self._last_text is None else "",
                )
            return "missing"
        except MCOError as exc:
            if self._once.first(f"error:{exc}"):
                log.warning("cannot read detection rules from %s: %s; keeping the rules in force", where, exc)
            return "error"
        self._once.clear("missing")
        if text == self._last_text:
            return "unchanged"
        try:
            rules = parse_rules(text, source=where)
        except RulesError as exc:
            if text != self._last_invalid:
                self._last_invalid = text
                log.error(
                    "invalid detection rules at %s; keeping version %s: %s",
                    where,
                    self.engine.rules.version,
                    "; ".join(exc.problems),
                )
                message = (
                    f"Rejected: {len(exc.problems)} problem(s): {'; '.join(exc.problems)}. "
                    f"Rules version {self.engine.rules.version} stays in force."
                )
                try:
                    self.source.report_invalid(message)
                except MCOError as report_exc:
                    log.warning("cannot report the invalid rules: %s", report_exc)
            return "invalid"
        self._last_text = text
        self._last_invalid = None
        old = self.engine.rules.version
        self.engine.set_rules(rules)
        log.info(
            "detection rules version %s (format %d) in force (was %s), from %s",
            rules.version,
            rules.format,
            old,
            where,
        )
        if rules.migration_notes:  # once per document: a changed text comes through here again
            log.warning("detection rules at %s converted: %s", where, "; ".join(rules.migration_notes))
        return "success"

    def start(self) -> None:
        """Reload every ``interval`` seconds in a daemon thread."""

        def loop() -> None:
            while not self._stop.wait(self.interval):
                self.reload()

        self._thread = threading.Thread(target=loop, name="rules-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
