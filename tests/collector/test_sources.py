"""PSI, steal, OOM and resctrl sources on fixture trees, broken variants and the real /proc."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from mco_py.collector.cpustat import OOM, STEAL, OomSource, StealSource
from mco_py.collector.psi import PsiSource, signal_names
from mco_py.collector.resctrl import BANDWIDTH, OCCUPANCY, ResctrlSource
from mco_py.collector.signals import Absence, Reading

from .conftest import FIXTURES, bump_psi, is_root


def by_name(readings: list[Reading]) -> dict[str, Reading]:
    return {r.name: r for r in readings if not r.device}


def test_psi_values_and_rate(host_tree: Path) -> None:
    source = PsiSource(host_tree / "proc")
    first = by_name(source.read(100.0))
    assert set(first) == set(signal_names())
    expected_avg10 = float((host_tree / "proc/pressure/io").read_text().split()[1].split("=")[1])
    assert first["psiIoSomeAvg10"].value == expected_avg10
    assert first["psiIoSomeRate"].absence is Absence.WARMING_UP
    # 0.25 s of io "some" stall and 0.1 s "full" in a 0.5 s interval -> 50 % and 20 %.
    bump_psi(host_tree / "proc/pressure/io", some_us=250_000, full_us=100_000)
    second = by_name(source.read(100.5))
    assert second["psiIoSomeRate"].value == pytest.approx(50.0)
    assert second["psiIoFullRate"].value == pytest.approx(20.0)
    assert second["psiCpuSomeRate"].value == 0.0
    assert second["psiIoSomeRate"].backend == "procfs"
    # running totals: the kernel's total= in seconds (counters, not the interval's share)
    totals = {t.name: t.value for t in source.totals()}
    assert len(totals) == 6
    io_some_us = int((host_tree / "proc/pressure/io").read_text().split()[4].split("=")[1])
    assert totals["psiIoSomeSeconds"] == io_some_us / 1e6
    _break(host_tree / "proc/pressure/io", "garbage")
    source.read(101.0)
    assert "psiIoSomeSeconds" not in {t.name for t in source.totals()}  # unreadable: no counter, never 0
    assert "psiCpuSomeSeconds" in {t.name for t in source.totals()}


def _break(path: Path, how: str) -> None:
    if how == "missing":
        path.unlink()
    elif how == "truncated":
        path.write_text(path.read_text()[:9])
    elif how == "garbage":
        path.write_bytes(b"\x00\xff garbage \n")
    elif how == "directory":
        path.unlink()
        path.mkdir()


@pytest.mark.parametrize("how", ["missing", "truncated", "garbage", "directory"])
def test_broken_psi_file_only_affects_its_signals(host_tree: Path, how: str, caplog: pytest.LogCaptureFixture) -> None:
    _break(host_tree / "proc/pressure/memory", how)
    source = PsiSource(host_tree / "proc")
    with caplog.at_level(logging.WARNING):
        for t in range(3):
            readings = by_name(source.read(float(t)))
    assert readings["psiMemorySomeAvg10"].value is None
    assert readings["psiMemorySomeAvg10"].reason
    expected = Absence.UNSUPPORTED if how == "missing" else Absence.READ_ERROR
    assert readings["psiMemoryFullAvg10"].absence is expected
    assert readings["psiCpuSomeAvg10"].present
    assert readings["psiIoSomeRate"].present
    warnings = [r for r in caplog.records if "psi.memory" in r.getMessage()]
    assert len(warnings) == 1, "a failing file is logged once, not per sample"


def test_no_pressure_dir_names_psi_boot_flag(host_tree: Path) -> None:
    shutil.rmtree(host_tree / "proc/pressure")
    readings = by_name(PsiSource(host_tree / "proc").read(0.0))
    assert readings["psiCpuSomeAvg10"].absence is Absence.UNSUPPORTED
    assert "psi=1" in readings["psiCpuSomeAvg10"].reason


def test_recovery_is_logged_and_values_return(host_tree: Path, caplog: pytest.LogCaptureFixture) -> None:
    good = (host_tree / "proc/pressure/cpu").read_text()
    (host_tree / "proc/pressure/cpu").write_text("garbage\n")
    source = PsiSource(host_tree / "proc")
    with caplog.at_level(logging.INFO):
        assert not by_name(source.read(0.0))["psiCpuSomeAvg10"].present
        (host_tree / "proc/pressure/cpu").write_text(good)
        assert by_name(source.read(1.0))["psiCpuSomeAvg10"].present
    assert any("available again" in r.getMessage() for r in caplog.records)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_permission_denied_as_non_root(host_tree: Path) -> None:
    """Root reads mode-000 files, so the check runs in a child that drops to nobody."""
    if not is_root():
        pytest.skip("needs root to switch to another uid")
    base = Path(tempfile.mkdtemp(prefix="mco-perm-"))
    try:
        base.chmod(0o755)
        tree = base / "host"
        shutil.copytree(host_tree, tree)
        (tree / "proc/pressure/io").chmod(0)
        result = _read_as_nobody(tree)
    finally:
        shutil.rmtree(base)
    assert result == "ok", result


def _read_as_nobody(tree: Path) -> str:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(read_fd)
            os.setgid(65534)
            os.setuid(65534)
            readings = by_name(PsiSource(tree / "proc").read(0.0))
            io = readings["psiIoSomeAvg10"]
            ok = io.absence is Absence.PERMISSION and "EACCES" in io.reason and readings["psiCpuSomeAvg10"].present
            os.write(write_fd, b"ok" if ok else f"bad {io!r}".encode())
        except BaseException as exc:  # report anything to the parent
            os.write(write_fd, f"child failed: {exc!r}".encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        result = pipe.read().decode()
    os.waitpid(pid, 0)
    return result


def test_steal_and_oom_deltas(host_tree: Path) -> None:
    steal, oom = StealSource(host_tree / "proc"), OomSource(host_tree / "proc")
    assert oom.totals() == []  # nothing read yet
    assert steal.read(0.0)[0].absence is Absence.WARMING_UP
    assert oom.read(0.0)[0].absence is Absence.WARMING_UP
    before = oom.totals()[0].value
    stat = host_tree / "proc/stat"
    lines = stat.read_text().splitlines()
    fields = lines[0].split()
    values = [int(v) for v in fields[1:]]
    values[0] += 90  # user
    values[7] += 10  # steal
    lines[0] = "cpu  " + " ".join(map(str, values))
    stat.write_text("\n".join(lines) + "\n")
    vmstat = host_tree / "proc/vmstat"
    vmstat.write_text(
        "\n".join(
            f"oom_kill {int(line.split()[1]) + 3}" if line.startswith("oom_kill ") else line
            for line in vmstat.read_text().splitlines()
        )
        + "\n"
    )
    assert steal.read(1.0)[0].value == pytest.approx(10.0)
    assert oom.read(1.0)[0].value == 3.0
    assert [(t.name, t.value) for t in oom.totals()] == [(OOM, before + 3)]  # since boot, from the kernel
    assert steal.totals() == []


def test_oom_missing_vmstat_line(host_tree: Path) -> None:
    vmstat = host_tree / "proc/vmstat"
    vmstat.write_text("".join(line + "\n" for line in vmstat.read_text().splitlines() if "oom_kill" not in line))
    reading = OomSource(host_tree / "proc").read(0.0)[0]
    assert reading.name == OOM
    assert reading.absence is Absence.UNSUPPORTED
    assert "oom_kill" in reading.reason


def test_steal_on_real_proc() -> None:
    source = StealSource(Path("/proc"))
    source.read(0.0)
    reading = source.read(1.0)[0]
    assert reading.name == STEAL
    # A fast second read may see no tick pass; otherwise a real percentage.
    assert reading.present or reading.absence is Absence.INSUFFICIENT_DATA
    if reading.value is not None:
        assert 0.0 <= reading.value <= 100.0


def test_psi_on_real_proc() -> None:
    readings = by_name(PsiSource(Path("/proc")).read(0.0))
    for name in ("psiCpuSomeAvg10", "psiMemoryFullAvg10", "psiIoSomeAvg10"):
        assert readings[name].present, readings[name]


def test_resctrl_fixture(tmp_path: Path) -> None:
    tree = tmp_path / "resctrl"
    shutil.copytree(FIXTURES / "resctrl", tree)
    source = ResctrlSource(FIXTURES / "host/proc", tree / "sys")
    assert source.backend == "resctrl"
    first = by_name(source.read(10.0))
    assert first[OCCUPANCY].value == 3 * 1048576
    assert first[BANDWIDTH].absence is Absence.WARMING_UP
    (tree / "sys/fs/resctrl/mon_data/mon_L3_00/mbm_total_bytes").write_text("7000000\n")
    assert by_name(source.read(12.0))[BANDWIDTH].value == pytest.approx(1_000_000.0)


def test_resctrl_absent_here() -> None:
    source = ResctrlSource(FIXTURES / "host/proc", FIXTURES / "host/sys")
    reading = by_name(source.read(0.0))[OCCUPANCY]
    assert reading.absence is Absence.UNSUPPORTED
    assert "not mounted" in reading.reason
