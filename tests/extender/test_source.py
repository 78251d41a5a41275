"""FileReportSource: re-read on change, rate-limited stat, garbage after a good report, recovery."""

from __future__ import annotations

from mco_py.extender.source import FileReportSource

from .conftest import NOW


def test_reread_on_change_and_recovery(report_file):
    source = FileReportSource(report_file.path)
    snap = source.snapshot()
    assert snap.report is None
    assert not snap.unreadable
    assert "does not exist" in (snap.problem or "")
    report_file.write()
    good = source.snapshot()
    assert good.report is not None
    assert good.report.by_name["worker-1"].signals["psiIoSomeAvg10"] == 61.2
    assert source.snapshot() is good  # unchanged file: not read again
    report_file.write_raw(b'{"status": []}')
    bad = source.snapshot()
    assert bad.report is None
    assert bad.unreadable
    assert "status" in (bad.problem or "")
    report_file.write(updated=NOW + 1)
    again = source.snapshot()
    assert again.report is not None
    assert again.report.report.last_update_time == NOW + 1
    report_file.path.unlink()
    assert source.snapshot().report is None


def test_stat_at_most_once_per_recheck_interval(report_file):
    now = [100.0]
    source = FileReportSource(report_file.path, recheck_seconds=0.05, monotonic=lambda: now[0])
    assert source.snapshot().report is None
    report_file.write()
    assert source.snapshot().report is None  # within 50 ms of the last check
    now[0] += 0.06
    assert source.snapshot().report is not None


def test_unreadable_path_is_unreadable_not_missing(report_file):
    report_file.path.mkdir()  # exists but cannot be read as a file
    snap = FileReportSource(report_file.path).snapshot()
    assert snap.report is None
    assert snap.unreadable
    assert "cannot read" in (snap.problem or "")
