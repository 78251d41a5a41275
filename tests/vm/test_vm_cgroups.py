"""The node guard's cgroup v2 writers against real cgroups: a TCG guest with its own kernel
(testbed/vm.py), one boot for these and detection (tests/vm/runner.py, SHARED), tests/vm/guest.py
measuring inside, each scenario on a reset guest. CPU figures come from
cpu.stat, memory from memory.current and memory.events, I/O from the writer and io.stat.
The guest's CPU is emulated, much slower than the host's (docs/vm-node.md), and shares the
host's two cores: the bounds are wide; the semantics are the kernel's own."""

from __future__ import annotations

from typing import Any

import pytest

from tests.vm.runner import Results, shared

pytestmark = [pytest.mark.vm, pytest.mark.slow, pytest.mark.timeout(600)]  # the first test builds the node
MiB = 2**20


def test_cpu_weight_splits_one_cpu_as_the_guard_writes_it(shared_results: Results) -> None:
    got: Any = shared(shared_results, "cpu_weight")
    assert (got["weight_file"], got["lowest_weight"]) == ("cpu.weight", "1")
    assert got["200:100"]["weights"] == ["200", "100"]
    assert 0.58 <= got["200:100"]["share_hi"] <= 0.75, "two thirds"
    assert got["100:lowest"]["weights"] == ["100", "1"]
    assert got["100:lowest"]["share_hi"] >= 0.95, "the lowest weight leaves about 1 %"
    assert sum(got["100:lowest"]["cpus"]) >= 0.9, "one CPU, all used"


def test_cpu_max_caps_a_busy_group_at_the_guards_quota_and_keeps_its_period(shared_results: Results) -> None:
    got: Any = shared(shared_results, "cpu_max")
    assert (got["quota_file"], got["default"]) == ("cpu.max", "max 100000")
    quarter = got["0.25"]
    assert quarter["wrote"] == quarter["reads"] == "25000 100000"
    assert 0.18 <= quarter["cpus"] <= 0.32
    half = got["0.5-period-50ms"]
    assert half["wrote"] == half["reads"] == "25000 50000", "a period someone else chose is kept"
    assert half["cores_read"] == 0.5
    assert 0.4 <= half["cpus"] <= 0.6
    free = got["none"]
    assert (free["wrote"], free["cores_read"]) == ("max 50000", None)
    assert free["cpus"] >= 1.5, "two busy loops, two CPUs"
    assert (got["restore_problems"], got["restored"]) == ([], "max 100000")


def test_the_guard_limits_offline_cpu_on_real_pressure_and_gives_it_back(shared_results: Results) -> None:
    got: Any = shared(shared_results, "guard_cpu")
    actions = [s["action"] for s in got["steps"]]
    assert actions[0] == "hold", "the first step has no interval to measure"
    assert actions[1] == "throttle", got["steps"]
    assert all(s["pressure"] >= 10 for s in got["steps"][1:]), "three online loops on two CPUs stall"
    assert got["offline_files"]["cpu.weight"] == "1"
    quota, period = got["offline_files"]["cpu.max"].split()
    assert period == "100000"
    assert int(quota) == round(got["steps"][-1]["limit"] * got["cpus"] * 100000)
    assert got["online_files"] == {"cpu.max": "max 100000", "cpu.weight": "100"}, "online is never written"
    assert got["before"]["offline_cpus"] >= 0.6, "unlimited, offline takes its share"
    assert got["after"]["offline_cpus"] <= 0.3
    assert got["after"]["online_cpus"] >= 1.6
    assert got["journal"] == {"offline/cpu.weight": "100", "offline/cpu.max": "max 100000"}
    assert got["write_errors"] == 0
    assert got["closed_files"] == {"cpu.max": "max 100000", "cpu.weight": "100"}
    assert not got["journal_left"]


def test_memory_high_reclaims_a_group_and_holds_back_an_allocator(shared_results: Results) -> None:
    got: Any = shared(shared_results, "memory_high")
    assert got["baseline"] >= 100 * MiB, "128 MiB read into the page cache"
    assert got["high"] == got["baseline"] // 4 // 4096 * 4096
    assert got["current_after_write"] <= got["high"], "writing memory.high reclaims at once"
    assert got["reader_exit"] == 0
    assert got["current_max"] <= got["high"] + 8 * MiB, "384 MiB more read, held at the limit"
    assert got["high_events"] > 0
    assert (got["max_events"], got["oom_kill"]) == (0, 0), "throttled, never killed"
    assert got["anon_limited"]["allocated_mib"] * MiB <= got["high"] + 8 * MiB
    assert got["anon_free"]["allocated_mib"] >= 4 * got["anon_limited"]["allocated_mib"]
    assert (got["restore_problems"], got["restored"]) == ([], "max")


def test_io_max_limits_a_direct_io_writer_to_the_guards_rate(shared_results: Results) -> None:
    got: Any = shared(shared_results, "io_max")
    device, limit = got["device"], got["wbps_limit"]
    assert got["wrote"] == [f"{device} rbps={MiB} wbps={limit}"], "reads it did not do: the floor"
    assert got["io.max"] == f"{device} rbps={MiB} wbps={limit} riops=max wiops=max"
    assert got["holds"], "the knob reads back what it wrote"
    assert got["unlimited_bps_writer"] >= 4 * limit
    assert 0.75 * limit <= got["limited_bps_writer"] <= 1.25 * limit
    assert 0.75 * limit <= got["limited_bps_io_stat"] <= 1.25 * limit
    assert (got["restore_problems"], got["restored"]) == ([], ""), "the kernel drops an all-max line"


def test_a_killed_guards_limits_are_put_back_exactly_by_the_next_start(shared_results: Results) -> None:
    got: Any = shared(shared_results, "restore_after_kill")
    watched = ("cpu.max", "cpu.weight", "memory.high", "io.max")
    assert set(got["changed_after_s"]) == set(watched), "the guard limited all four on real pressure"
    assert got["guard_exit"] == -9
    assert set(got["journal"]) == {f"offline/{name}" for name in watched}
    assert all(got["journal"][f"offline/{n}"] == got["before"][f"offline/{n}"].strip() for n in watched)
    vdb = got["vdb"]
    assert f"{vdb} rbps=" in got["limited"]["offline/io.max"]
    assert got["limited"]["offline/cpu.weight"] == "1\n"
    assert got["after_kill"] == got["limited"], "a killed guard's limits stay"
    assert got["restart_exit"] == 0
    assert "restored the CPU limits a killed guard left" in got["restart_log"]
    assert got["after"] == got["before"], "every file reads as it did before the guard"
    assert not got["journal_left"]
    online = {k: v for k, v in got["limited"].items() if k.startswith("online")}
    assert online == {k: v for k, v in got["before"].items() if k.startswith("online")}, "online never written"
