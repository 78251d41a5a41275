"""Parsers of the kernel's text files: captured files, broken variants, properties."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mco_py.collector.procfs import (
    MAX_FILE_BYTES,
    parse_cpu_list,
    parse_cpu_stat,
    parse_diskstats,
    parse_psi,
    parse_vmstat_field,
    read_text,
)
from mco_py.collector.signals import Absence, Unavailable

from .conftest import FIXTURES

PROC = FIXTURES / "host" / "proc"


def test_captured_files_parse() -> None:
    for resource in ("cpu", "memory", "io"):
        lines = parse_psi((PROC / "pressure" / resource).read_text())
        assert set(lines) == {"some", "full"}
        assert lines["some"].total_us >= lines["full"].total_us
    times = parse_cpu_stat((PROC / "stat").read_text())
    assert 0 <= times.steal < times.total
    assert parse_vmstat_field((PROC / "vmstat").read_text(), "oom_kill") >= 0
    disks = parse_diskstats((PROC / "diskstats").read_text())
    assert "vda" in disks
    assert disks["vda"].ios > 0


def test_real_proc_parses() -> None:
    """The same parsers on this host's live files."""
    from pathlib import Path

    assert "some" in parse_psi(Path("/proc/pressure/io").read_text())
    assert parse_cpu_stat(Path("/proc/stat").read_text()).total > 0
    assert parse_diskstats(Path("/proc/diskstats").read_text())


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no 'some' line"),
        ("some avg10=0.00 avg60=0.00 avg300=0.00\n", "total= missing"),
        ("some avg10=abc avg60=0.00 avg300=0.00 total=1\n", "bad number"),
        ("some avg10=0.00 avg60=0.00 avg300=0.00 total=1\nweird x=1\n", "unknown kind"),
        ("some avg10\n", "expected key=value"),
        ("some avg10=nan avg60=0.00 avg300=0.00 total=1\n", "bad number"),
    ],
)
def test_psi_garbage_is_a_read_error(text: str, problem: str) -> None:
    with pytest.raises(Unavailable, match=problem) as info:
        parse_psi(text)
    assert info.value.kind is Absence.READ_ERROR


def test_cpu_stat_truncated() -> None:
    with pytest.raises(Unavailable, match="steal needs 8"):
        parse_cpu_stat("cpu  1 2 3 4\n")
    with pytest.raises(Unavailable, match="no aggregate"):
        parse_cpu_stat("cpu0 1 2 3 4 5 6 7 8\n")


def test_diskstats_short_line() -> None:
    with pytest.raises(Unavailable, match="expected at least 14"):
        parse_diskstats(" 254 0 vda 1 2 3\n")


def test_vmstat_missing_field_is_unsupported() -> None:
    with pytest.raises(Unavailable) as info:
        parse_vmstat_field("nr_free_pages 10\n", "oom_kill")
    assert info.value.kind is Absence.UNSUPPORTED


_avg = st.floats(min_value=0, max_value=100, allow_nan=False).map(lambda v: round(v, 2))


@given(st.lists(st.tuples(_avg, _avg, _avg, st.integers(0, 2**63 - 1)), min_size=1, max_size=2))
def test_psi_round_trip(lines: list[tuple[float, float, float, int]]) -> None:
    text = "".join(
        f"{kind} avg10={a:.2f} avg60={b:.2f} avg300={c:.2f} total={t}\n"
        for kind, (a, b, c, t) in zip(("some", "full"), lines, strict=False)
    )
    parsed = parse_psi(text)
    for kind, (a, b, c, t) in zip(("some", "full"), lines, strict=False):
        assert (parsed[kind].avg10, parsed[kind].avg60, parsed[kind].avg300) == (a, b, c)
        assert parsed[kind].total_us == t


@given(st.text(max_size=300))
def test_parsers_raise_only_unavailable(text: str) -> None:
    """Arbitrary text never escapes as another exception type."""
    for parse in (parse_psi, parse_cpu_stat, parse_diskstats, parse_cpu_list):
        with contextlib.suppress(Unavailable):
            parse(text)
    with contextlib.suppress(Unavailable):
        parse_vmstat_field(text, "oom_kill")


@given(
    st.lists(
        st.tuples(
            st.integers(0, 4095), st.integers(0, 2**20 - 1), st.lists(st.integers(0, 2**40), min_size=17, max_size=17)
        ),
        min_size=1,
        max_size=5,
        unique_by=lambda t: (t[0], t[1]),
    )
)
def test_diskstats_sums_reads_writes_discards_flushes(rows: list[tuple[int, int, list[int]]]) -> None:
    text = "".join(f"{ma} {mi} d{ma}_{mi} " + " ".join(map(str, nums)) + "\n" for ma, mi, nums in rows)
    parsed = parse_diskstats(text)
    for ma, mi, nums in rows:
        stat = parsed[f"d{ma}_{mi}"]
        assert stat.ios == nums[0] + nums[4] + nums[11] + nums[15]
        assert stat.ticks_ms == nums[3] + nums[7] + nums[14] + nums[16]


@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 8)), min_size=1, max_size=6))
def test_cpu_list(ranges: list[tuple[int, int]]) -> None:
    text = ",".join(f"{lo}-{lo + n}" if n else f"{lo}" for lo, n in ranges)
    expected = [c for lo, n in ranges for c in range(lo, lo + n + 1)]
    assert parse_cpu_list(text + "\n") == expected


def test_read_text_reads_files_larger_than_one_chunk_up_to_the_cap(tmp_path: Path) -> None:
    big = tmp_path / "stat"
    big.write_bytes(b"cpu  1 2 3\n" * 20000)  # 220 KB: several 64 KiB reads
    assert read_text(big) == "cpu  1 2 3\n" * 20000
    huge = tmp_path / "huge"
    huge.write_bytes(b"x" * (MAX_FILE_BYTES + 5000))
    assert len(read_text(str(huge))) == MAX_FILE_BYTES


def test_read_text_failures_name_the_file_and_kind(tmp_path: Path) -> None:
    with pytest.raises(Unavailable, match="is a directory") as info:
        read_text(tmp_path)
    assert info.value.kind is Absence.READ_ERROR
    with pytest.raises(Unavailable, match="ENOENT") as info:
        read_text(tmp_path / "missing")
    assert info.value.kind is Absence.UNSUPPORTED
    binary = tmp_path / "bin"
    binary.write_bytes(b"ok\xff")
    with pytest.raises(Unavailable, match=r"not ASCII text \(byte 2\)"):
        read_text(binary)
