"""The node guard's one writer of cgroup files, on its own: journalled before it writes, the
restore (whole files, per-device lines, by file name or by group), and what it counts."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from mco_py.collector.cgroups import Layout
from mco_py.collector.guard.files import detect_layout
from mco_py.collector.guard.journal import Journal
from mco_py.collector.guard.writer import LimitWriter, WriteCounts


def v2_writer(tmp_path: Path) -> LimitWriter:
    """A v2 tree with a group ``g`` and a group ``g/c`` below it, and a writer journalling to j.json."""
    root = tmp_path / "cg"
    for group in ("g", "g/c"):
        (root / group).mkdir(parents=True)
        (root / group / "cpu.max").write_text("max 100000\n")
        (root / group / "cpu.weight").write_text("100\n")
        (root / group / "memory.high").write_text("max\n")
        (root / group / "io.max").write_text("8:0 rbps=max wbps=max riops=5000 wiops=max\n")
    (root / "cgroup.controllers").write_text("cpu io memory\n")
    return LimitWriter.at(root, tmp_path / "j.json")


def journalled(writer: LimitWriter) -> dict[str, str]:
    document: dict[str, dict[str, str]] = json.loads(writer.journal.path.read_text())
    return document["limits"]


def test_the_first_write_of_a_file_journals_what_it_said_on_disk_first(tmp_path: Path) -> None:
    writer = v2_writer(tmp_path)
    writer.write("g", "cpu.max", "50000 100000")
    assert journalled(writer) == {"g/cpu.max": "max 100000"}
    assert (writer.layout.cpu_root / "g/cpu.max").read_text() == "50000 100000"
    writer.write("/g/", "cpu.max", "20000 100000")
    assert journalled(writer) == {"g/cpu.max": "max 100000"}, "the original, not the guard's own limit"
    assert writer.read("g", "cpu.max") == "20000 100000"
    assert writer.counts() == WriteCounts(writes=2)


def test_ensure_writes_a_change_only_and_counts_a_limit_someone_replaced(tmp_path: Path) -> None:
    writer = v2_writer(tmp_path)
    weight = writer.layout.cpu_root / "g/cpu.weight"
    writer.ensure("g", "cpu.weight", "100")
    assert writer.counts() == WriteCounts(), "it says so already: nothing written, nothing journalled"
    assert not writer.journal.path.exists()
    writer.ensure("g", "cpu.weight", "1")
    writer.ensure("g", "cpu.weight", "1")
    assert (weight.read_text(), writer.counts()) == ("1", WriteCounts(writes=1))
    weight.write_text("100")  # the kubelet writes over it
    writer.ensure("g", "cpu.weight", "1")
    assert (weight.read_text(), writer.counts()) == ("1", WriteCounts(writes=2, reasserted=1))
    writer.ensure("g", "cpu.weight", "2")  # a new limit of its own is no reassertion
    assert writer.counts() == WriteCounts(writes=3, reasserted=1)
    assert journalled(writer) == {"g/cpu.weight": "100"}


def test_restore_by_file_name_by_group_and_all_then_the_journal_goes(tmp_path: Path) -> None:
    writer = v2_writer(tmp_path)
    root = writer.layout.cpu_root
    for group in ("g", "g/c"):
        writer.write(group, "cpu.max", "50000 100000")
        writer.write(group, "memory.high", "16777216")
        writer.write(group, "io.max", "8:16 rbps=1048576 wbps=max")
    assert writer.restore(only="memory.high") == []
    assert (root / "g/memory.high").read_text() == (root / "g/c/memory.high").read_text() == "max"
    assert (root / "g/cpu.max").read_text() == "50000 100000"
    assert set(journalled(writer)) == {"g/cpu.max", "g/io.max", "g/c/cpu.max", "g/c/io.max"}
    written = writer.counts().writes
    assert writer.restore(under="g/c") == []
    assert (root / "g/c/cpu.max").read_text() == "max 100000"
    # io.max: the device the guard added is lifted, then the device it listed gets its line back
    # (a line a write: a plain file keeps the last one)
    assert (root / "g/c/io.max").read_text() == "8:0 rbps=max wbps=max riops=5000 wiops=max"
    assert writer.counts().writes == written + 3
    assert set(journalled(writer)) == {"g/cpu.max", "g/io.max"}
    assert writer.restore() == []
    assert (root / "g/cpu.max").read_text() == "max 100000"
    assert not writer.journal.path.exists()
    assert writer.restore() == [], "nothing left: nothing to do"


def test_a_restore_writes_each_device_line_on_v1_and_lifts_new_rules_with_0(tmp_path: Path) -> None:
    for controller, probe in (("cpu", "cpu.cfs_quota_us"), ("blkio", "blkio.throttle.read_bps_device")):
        (tmp_path / controller / "g").mkdir(parents=True)
        (tmp_path / controller / probe).write_text("")
    rule = tmp_path / "blkio/g/blkio.throttle.read_bps_device"
    rule.write_text("")
    layout = detect_layout(tmp_path)
    writer = LimitWriter(layout, Journal(tmp_path / "j.json", layout))
    writer.write("g", rule.name, "8:0 1048576")
    assert writer.restore() == []
    assert rule.read_text() == "8:0 0", "v1 deletes a rule with 0"
    assert writer.counts() == WriteCounts(writes=2)


def test_a_write_back_that_fails_is_returned_counted_and_kept_and_a_group_gone_is_none(tmp_path: Path) -> None:
    writer = v2_writer(tmp_path)
    root = writer.layout.cpu_root
    writer.write("g", "cpu.max", "50000 100000")
    writer.write("g/c", "cpu.max", "50000 100000")
    (root / "g/cpu.max").unlink()
    (root / "g/cpu.max").mkdir()  # the write-back fails (even for root)
    for name in ("cpu.max", "cpu.weight", "memory.high", "io.max"):
        (root / "g/c" / name).unlink()
    (root / "g/c").rmdir()  # the group went, and its limit with it
    problems = writer.restore()
    assert len(problems) == 1
    assert problems[0].startswith("g/cpu.max: cannot restore 'max 100000': ")
    assert writer.counts().failures == 1
    assert journalled(writer) == {"g/cpu.max": "max 100000"}, "kept, to be retried"
    (root / "g/cpu.max").rmdir()
    (root / "g/cpu.max").write_text("50000 100000")
    assert writer.restore() == []
    assert (root / "g/cpu.max").read_text() == "max 100000"


def test_an_unreadable_journal_stops_every_write_and_stays(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    (root / "g").mkdir(parents=True)
    (root / "g/cpu.max").write_text("max 100000\n")
    journal = tmp_path / "j.json"
    journal.write_text("{not json")
    layout = Layout(root, 2, root)
    writer = LimitWriter(layout, Journal(journal, layout))
    with pytest.raises(OSError, match="is unreadable; move it away"):
        writer.write("g", "cpu.max", "50000 100000")
    assert (root / "g/cpu.max").read_text() == "max 100000\n", "nothing written without a journal"
    problems = writer.restore()
    assert len(problems) == 1
    assert "unreadable journal" in problems[0]
    assert writer.counts().failures == 1
    assert (root / "g/cpu.max").read_text() == "max 100000"
    assert journal.read_text() == "{not json"


def test_a_failed_write_is_counted_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    writer = v2_writer(tmp_path)
    with caplog.at_level(logging.WARNING):
        writer.failed("g", "memory", OSError("no space"))
    assert writer.counts() == WriteCounts(failures=1)
    assert [r.getMessage() for r in caplog.records] == ["cannot set memory of offline group g: no space"]


def test_a_journal_keeps_only_files_the_guard_writes_in_groups_below_the_root(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    path = tmp_path / "j.json"
    path.write_text(json.dumps({"limits": {"g/cpu.max": "max 100000", "g/cgroup.kill": "1", "../../etc/cpu.max": "x"}}))
    journal = Journal(path, Layout(root, 2, root))
    assert journal.entries() == [("g", "cpu.max", "max 100000")]
    assert journal.holds("cpu.max")
    assert not journal.holds("cpu.weight")
    assert journal.entries(only="cpu.weight") == []
    assert journal.entries(under="g/c") == []
