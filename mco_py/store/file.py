"""Standalone report store: the CR-shaped document in a local JSON file, replaced atomically."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import msgspec

from mco_py.errors import ReportError, ReportNotFound, StoreUnavailable
from mco_py.model import Report
from mco_py.report.document import ObjectMeta, ReportObject, Status, decode_json, report_of, status_of
from mco_py.report.size import Fitted

DEFAULT_PATH = Path("/var/lib/mco/report.json")


def status_document(status: Status, *, name: str = "cluster") -> ReportObject:
    """The whole object around a built ``status`` document."""
    return ReportObject(metadata=ObjectMeta(name), status=status)


def decode_document(raw: bytes | str, *, source: str) -> Report:
    """Decode a report file's content; raises :class:`ReportError` naming the source."""
    doc = decode_json(raw, ReportObject, source)
    try:
        return report_of(doc.status)
    except ReportError as exc:
        raise ReportError(f"{source}: {exc}") from exc


class FileReportStore:
    """Reads and writes the report file; writes are atomic (temp file, fsync, rename)."""

    def __init__(self, path: str | Path = DEFAULT_PATH, *, name: str = "cluster", mode: int = 0o644) -> None:
        self.path = Path(path)
        self.name = name
        self.mode = mode

    def describe(self) -> str:
        return f"file {self.path}"

    def read(self) -> Report:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError as exc:
            raise ReportNotFound(f"{self.path} does not exist yet") from exc
        except OSError as exc:
            raise StoreUnavailable(f"{self.path}: cannot read: {exc.strerror or exc}") from exc
        return decode_document(raw, source=str(self.path))

    def write(self, report: Report) -> None:
        self.write_status(status_of(report))

    def publish(self, fitted: Fitted) -> None:
        if fitted.shards is not None:
            raise ReportError(f"{self.path}: a report file holds one document; shards are for cluster mode")
        self.write_status(fitted.status)

    def write_status(self, status: Status) -> None:
        data = msgspec.json.encode(status_document(status, name=self.name))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        except OSError as exc:
            raise StoreUnavailable(f"{self.path}: cannot create: {exc.strerror or exc}") from exc
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, self.mode)
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise StoreUnavailable(f"{self.path}: cannot write: {exc.strerror or exc}") from exc
