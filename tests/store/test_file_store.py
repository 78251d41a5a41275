"""Standalone report file: atomic, CR-shaped, clear errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mco_py.errors import ReportError, ReportNotFound
from mco_py.model import Level, NodeAssessment, Report
from mco_py.report.document import status_of
from mco_py.store.file import FileReportStore
from tests.contracts import crd_schema

REPORT = Report(
    last_update_time=1_800_000_000.0,
    analyzer_identity="a1",
    rules_version="r1",
    nodes=(NodeAssessment(name="n1", level=Level.LOW, score=30.0, signals={"psiIoSomeAvg10": 25.0}),),
)


def test_write_then_read_round_trips_and_validates(tmp_path: Path) -> None:
    store = FileReportStore(tmp_path / "sub" / "report.json")
    store.write(REPORT)
    doc = json.loads((tmp_path / "sub" / "report.json").read_text())
    assert crd_schema.errors(doc) == []
    back = store.read()
    assert back.nodes[0].level is Level.LOW
    assert back.rules_version == "r1"
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["report.json"], "no temp files left"


def test_a_file_larger_than_one_report_object_reads_back(tmp_path: Path) -> None:
    """The CRD's 20,000-entry cap is the API server's; the standalone file has none."""
    nodes = tuple(NodeAssessment(name=f"n{i:05d}", level=Level.NONE, score=0.0) for i in range(20_001))
    store = FileReportStore(tmp_path / "report.json")
    store.write(Report(1_800_000_000.0, "a1", "r1", nodes))
    assert len(store.read().nodes) == 20_001


def test_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(ReportNotFound):
        FileReportStore(tmp_path / "none.json").read()


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ("[]", r"report.json: Expected `object`, got `array`$"),
        ('{"status": 3}', r"report.json: Expected `object`, got `int` - at `status`$"),
        ('{"status": {"nodes": []}}', r"report.json: Object missing required field `lastUpdateTime` - at `status`$"),
        ('{"status": {"lastUpdateTime": "yesterday"}}', r"report.json: status.lastUpdateTime: invalid RFC 3339 time"),
        (
            '{"status": {"lastUpdateTime": "2026-01-01T00:00:00Z", '
            '"nodes": [{"name": "a", "level": "Bad", "score": 1}]}}',
            r"Invalid enum value 'Bad' - at `status.nodes\[0\].level`$",
        ),
    ],
)
def test_garbage_is_a_clear_error(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "report.json"
    path.write_text(content)
    with pytest.raises(ReportError, match=fragment):
        FileReportStore(path).read()


def test_replace_is_atomic_for_readers(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    store = FileReportStore(path)
    store.write(REPORT)
    inode = os.stat(path).st_ino
    with path.open() as reader:
        store.write(Report(last_update_time=1_800_000_005.0, analyzer_identity="a1", rules_version="r2"))
        # The open reader still sees the complete old document.
        assert json.loads(reader.read())["status"]["analyzer"]["rulesVersion"] == "r1"
    assert os.stat(path).st_ino != inode
    assert store.read().rules_version == "r2"


def test_write_status_writes_what_write_writes(tmp_path: Path) -> None:
    store = FileReportStore(tmp_path / "report.json")
    store.write(REPORT)
    written = (tmp_path / "report.json").read_bytes()
    store.write_status(status_of(REPORT))
    assert (tmp_path / "report.json").read_bytes() == written
    assert store.read() == REPORT
