"""The node guard: its decisions (pure, property tests), its writes on a cgroup v2 tree, its
configuration errors. Real cgroups on this host and kill -9: test_guard_cgroups.py."""

from __future__ import annotations

import json
import logging
import math
import random
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mco_py.analysis.guard import (
    IO_CUT_ABOVE,
    IO_GROW_BELOW,
    IO_GROWTH,
    Action,
    GuardRules,
    GuardState,
    decide,
    decide_io,
)
from mco_py.analysis.workloads import WorkloadPod, pod_group
from mco_py.collector.cgroups import Layout, PressureMeter, WorkloadPressureSource
from mco_py.collector.guard.files import detect_layout
from mco_py.collector.guard.journal import Journal
from mco_py.collector.guard.knobs import CpuLimits, IoKnob
from mco_py.collector.guard.loop import NodeGuard
from mco_py.collector.guard.writer import LimitWriter
from mco_py.collector.workload_groups import WorkloadGroups, detect_driver
from mco_py.errors import ConfigError
from tests.config.settings import collector_settings

_rules = st.builds(
    GuardRules,
    throttle_above=st.floats(5, 100),
    release_below=st.floats(0, 4.9),
    calm_intervals=st.integers(1, 5),
    step_down=st.floats(0.05, 0.95),
    step_up=st.floats(0.01, 1.0),
    floor=st.floats(0, 0.9),
    io_target=st.floats(0.5, 50),
    io_floor=st.floats(0, 0.9),
)
_pressure = st.none() | st.floats(0, 100)


@given(rules=_rules, pressures=st.lists(_pressure, max_size=60))
def test_the_limit_stays_between_the_floor_and_the_whole_node(rules: GuardRules, pressures: list[float | None]) -> None:
    state = GuardState()
    for pressure in pressures:
        before = state.limit
        state, action = decide(state, pressure, rules)
        if state.limit is not None:
            assert rules.floor <= state.limit < 1.0 or state.limit == before
        if pressure is not None and rules.release_below < pressure < rules.throttle_above:
            assert state.limit == before, "between the thresholds nothing changes (hysteresis)"
            assert action is Action.HOLD
        if action is Action.THROTTLE:
            assert before is None or (state.limit is not None and state.limit < before)
        if action in (Action.RELAX, Action.RELEASE):
            assert pressure is None or pressure <= rules.release_below


@given(rules=_rules, start=st.lists(_pressure, max_size=30))
def test_constant_pressure_reaches_the_floor_and_calm_restores_everything(
    rules: GuardRules, start: list[float | None]
) -> None:
    state = GuardState()
    for pressure in start:
        state, _ = decide(state, pressure, rules)
    # under constant pressure: at the floor within log(floor)/log(step_down) + 1 steps (bounded steps)
    steps = 1 + (math.ceil(math.log(rules.floor) / math.log(rules.step_down)) if rules.floor > 0 else 60)
    for _ in range(steps):
        state, _ = decide(state, 100.0, rules)
    assert state.limit is not None
    if rules.floor > 0:
        assert state.limit == pytest.approx(rules.floor)
    else:  # no floor: it keeps halving (the kernel's smallest quota, 1 ms a period, is the bottom)
        assert state.limit <= rules.step_down ** (steps - 1) * (1 + 1e-9)
    # calm (or unknown) for long enough: the limit is lifted, never to stay
    calm_steps = rules.calm_intervals * (math.ceil(1 / rules.step_up) + 1)
    for i in range(calm_steps):
        state, _ = decide(state, None if i % 2 else 0.0, rules)
    assert state == GuardState()


def test_each_step_is_bounded() -> None:
    rules = GuardRules(throttle_above=10, release_below=2, calm_intervals=2, step_down=0.5, step_up=0.25, floor=0.1)
    state, action = decide(GuardState(), 50.0, rules)
    assert (state, action) == (GuardState(0.5, 0), Action.THROTTLE)
    state, _ = decide(state, 50.0, rules)
    assert state.limit == 0.25
    state, _ = decide(state, 1.0, rules)
    assert (state, _) == (GuardState(0.25, 1), Action.HOLD)
    state, action = decide(state, 1.0, rules)
    assert (state, action) == (GuardState(0.5, 0), Action.RELAX)
    state, _ = decide(state, 5.0, rules)  # between: the calm count starts over
    assert state == GuardState(0.5, 0)
    for _ in range(3):
        state, action = decide(state, 0.0, rules)
    assert (state, action) == (GuardState(0.75, 1), Action.HOLD)
    state, action = decide(state, 0.0, rules)
    assert (state, action) == (GuardState(), Action.RELEASE)


@given(rules=_rules, pressures=st.lists(_pressure, max_size=60))
def test_the_io_limit_stays_between_its_floor_and_unlimited_and_holds_in_the_dead_band(
    rules: GuardRules, pressures: list[float | None]
) -> None:
    state = GuardState()
    for pressure in pressures:
        before = state.limit
        state, action = decide_io(state, pressure, rules)
        if state.limit is not None:
            assert rules.io_floor <= state.limit < 1.0 or state.limit == before
        band = (rules.io_target * IO_GROW_BELOW, rules.io_target * IO_CUT_ABOVE)
        if pressure is not None and band[0] < pressure <= band[1]:
            assert (state.limit, action) == (before, Action.HOLD), "in the dead band nothing changes"
        if action is Action.THROTTLE:
            assert pressure is not None
            assert pressure > band[1]
            cut_to = (1.0 if before is None else before) * max(rules.step_down, rules.io_target / pressure)
            assert state.limit == pytest.approx(max(rules.io_floor, cut_to)), "a proportional cut, at most step_down"
        if action is Action.RELAX:
            assert before is not None
            assert state.limit == pytest.approx(before * IO_GROWTH)


def test_the_io_limit_is_cut_in_proportion_and_grows_back_slowly() -> None:
    rules = GuardRules(io_target=3, io_floor=0.02, calm_intervals=2)
    state, action = decide_io(GuardState(), 4.0, rules)  # 4 > 3.75: 3/4 of unlimited
    assert (state, action) == (GuardState(0.75, 0), Action.THROTTLE)
    state, _ = decide_io(state, 60.0, rules)  # far off: halved at most
    assert state.limit == pytest.approx(0.375)
    state, _ = decide_io(state, 3.5, rules)  # inside the band
    assert state == GuardState(0.375, 0)
    for _ in range(12):
        state, _ = decide_io(state, 100.0, rules)
    assert state.limit == pytest.approx(0.02), "never below io_floor"
    state, action = decide_io(state, 1.0, rules)
    assert (state, action) == (GuardState(0.02, 1), Action.HOLD)
    state, action = decide_io(state, None, rules)  # unknown counts as calm
    assert (state, action) == (GuardState(pytest.approx(0.024), 0), Action.RELAX)  # type: ignore[arg-type]
    calm = 0
    while action is not Action.RELEASE and calm < 100:
        state, action = decide_io(state, 0.0, rules)
        calm += 1
    assert state == GuardState()
    assert calm == 2 * math.ceil(math.log(1 / 0.024) / math.log(IO_GROWTH)), "x1.2 every 2 calm intervals"


@pytest.mark.parametrize("gain", [5.0, 20.0, 60.0, 300.0])
def test_the_io_loop_settles_near_its_target_and_stays_there(gain: float) -> None:
    """Against a disk where the online stall grows with the batch's bandwidth (stall = gain *
    limit, +-15 % noise each interval), the loop settles within a few intervals at a limit whose
    stall is near the target, then moves it by no more than one step."""
    noise = random.Random(int(gain))
    rules = GuardRules(io_target=3, io_floor=0.001)
    state, limits = GuardState(), []
    for _ in range(300):
        stall = gain * (1.0 if state.limit is None else state.limit) * noise.uniform(0.85, 1.15)
        state, _ = decide_io(state, stall, rules)
        limits.append(1.0 if state.limit is None else state.limit)
    settled = limits[20:]
    assert gain * min(settled) >= 3 * IO_GROW_BELOW / 1.15, "settled near the target, not starved"
    assert gain * max(settled) <= 3 * IO_CUT_ABOVE / 0.85, "settled near the target, not above it"
    assert max(settled) / min(settled) <= IO_GROWTH * 1.01, "no oscillation beyond one step"


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ({"throttleAbove": 2, "releaseBelow": 5}, "guard.rules: need 0 <= releaseBelow (5) < throttleAbove (2)"),
        ({"stepDown": 1.5}, "guard.rules: stepDown (1.5) must be between 0 and 1"),
        ({"floor": 1}, "guard.rules: floor (1) must be at least 0 and below 1"),
        ({"ioTarget": 0}, "guard.rules: ioTarget (0) must be above 0 and at most 100"),
        ({"ioFloor": -0.1}, "guard.rules: ioFloor (-0.1) must be at least 0 and below 1"),
        ({"calmIntervals": 0}, "guard.rules: calmIntervals (0) must be at least 1"),
        ({"calmIntervals": 1.5}, "guard.rules.calmIntervals: expected int, got float 1.5"),
        ({"stepUp": "lots"}, "guard.rules.stepUp: expected float, got str 'lots'"),
        ({"floor": True}, "guard.rules.floor: expected float, got bool True"),
        ({"throttle": 5}, "guard.rules.throttle: unknown key; did you mean 'throttleAbove'?"),
        ([1], "guard.rules: expected a mapping of settings"),
    ],
)
def test_bad_rules_say_what_to_fix(doc: object, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        collector_settings(f"stream: {{enabled: false}}\nguard: {{rules: {json.dumps(doc)}}}\n")
    assert f"collector.yaml: {says}" in str(caught.value)


def test_the_collector_configuration_of_the_guard() -> None:
    settings = collector_settings(
        "stream: {enabled: false}\nguard: {mode: dry-run, rules: {throttleAbove: 20, floor: 0.2}}\n"
        "onlineCgroups: [online.slice]\nofflineCgroups: [offline.slice, batch]\n"
    )
    assert settings.guard.mode == "dry-run"
    assert settings.offline_cgroups == ("offline.slice", "batch")
    assert settings.guard.rules.rules() == GuardRules(throttle_above=20, floor=0.2)
    assert collector_settings("stream: {enabled: false}\n").guard.mode == "off"
    # YAML 1.1 reads an unquoted on as true: taken as meant
    assert (
        collector_settings(
            "stream: {enabled: false}\nguard: {mode: on}\nonlineCgroups: [a]\nofflineCgroups: [b]\n"
        ).guard.mode
        == "on"
    )
    with pytest.raises(ConfigError, match=r"guard.rules: floor \(2\) must be at least 0 and below 1"):
        collector_settings("stream: {enabled: false}\nguard: {mode: on, rules: {floor: 2}}\n")
    with pytest.raises(ConfigError, match=re.escape("guard.mode: on needs onlineCgroups")):
        collector_settings("stream: {enabled: false}\nguard: {mode: on}\nofflineCgroups: [batch]\n")
    with pytest.raises(ConfigError, match=re.escape("guard.mode: expected one of off, dry-run, on, got 'yes'")):
        collector_settings("stream: {enabled: false}\nguard: {mode: 'yes'}\n")


# -- a cgroup v2 tree ------------------------------------------------------------------------


def v2_tree(root: Path, groups: list[str]) -> Path:
    """A cgroup v2 mount as the kernel shows it: cpu enabled, each group with cpu.max and pressure."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    for group in groups:
        (root / group).mkdir(parents=True)
        (root / group / "cpu.max").write_text("max 100000\n")
        (root / group / "cpu.weight").write_text("100\n")
        for resource in ("cpu", "io", "memory"):
            set_stall(root, group, resource, 0)
    return root


def set_stall(root: Path, group: str, resource: str, total_us: int) -> None:
    line = f"avg10=0.00 avg60=0.00 avg300=0.00 total={total_us}"
    (root / group / f"{resource}.pressure").write_text(f"some {line}\nfull {line}\n")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_guard(root: Path, tmp: Path, clock: Clock, mode: str = "on") -> NodeGuard:
    return NodeGuard(
        detect_layout(root),
        online=["online.slice"],
        offline=["offline.slice/job-1", "offline.slice/job-2"],
        rules=GuardRules(throttle_above=10, release_below=2, calm_intervals=1, step_down=0.5, step_up=0.5, floor=0.1),
        mode=mode,
        journal_path=tmp / "journal.json",
        cpus=4,
        clock=clock,
    )


def run_interval(guard: NodeGuard, root: Path, clock: Clock, stall_share: float) -> Action:
    """One second in which the online group stalled ``stall_share`` of the time."""
    text = (root / "online.slice" / "cpu.pressure").read_text()
    total = int(text.split("total=")[1].split()[0])
    set_stall(root, "online.slice", "cpu", total + round(stall_share * 1e6))
    clock.now += 1.0
    return guard.step()


def test_on_a_v2_tree_only_offline_groups_are_limited_and_everything_is_put_back(tmp_path: Path) -> None:
    root = v2_tree(tmp_path / "cg", ["online.slice", "offline.slice/job-1", "offline.slice/job-2"])
    (root / "offline.slice/job-2/cpu.max").write_text("300000 100000\n")  # an operator's own limit: 3 CPUs
    clock = Clock()
    guard = make_guard(root, tmp_path, clock)
    guard.step()  # first reading: no rate yet
    assert run_interval(guard, root, clock, 0.5) is Action.THROTTLE
    assert (root / "offline.slice/job-1/cpu.max").read_text() == "200000 100000"  # 0.5 of 4 CPUs
    assert (root / "offline.slice/job-2/cpu.max").read_text() == "200000 100000"
    assert (root / "online.slice/cpu.max").read_text() == "max 100000\n", "online is never limited"
    assert (root / "offline.slice/job-1/cpu.weight").read_text() == "1", "the lowest weight while the guard runs"
    assert (root / "online.slice/cpu.weight").read_text() == "100\n"
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["limits"] == {
        "offline.slice/job-1/cpu.weight": "100",
        "offline.slice/job-2/cpu.weight": "100",
        "offline.slice/job-1/cpu.max": "max 100000",
        "offline.slice/job-2/cpu.max": "300000 100000",
    }
    run_interval(guard, root, clock, 0.5)
    assert (root / "offline.slice/job-1/cpu.max").read_text() == "100000 100000"
    # the kubelet (or anyone) writes over the limit: the guard puts it back and counts it
    (root / "offline.slice/job-1/cpu.max").write_text("max 100000")
    run_interval(guard, root, clock, 0.5)
    assert guard.writer.counts().reasserted == 1
    assert (root / "offline.slice/job-1/cpu.max").read_text() == "50000 100000"  # 0.125 of 4 CPUs
    run_interval(guard, root, clock, 0.5)
    assert (root / "offline.slice/job-1/cpu.max").read_text() == "40000 100000"  # the floor: 0.1 of 4 CPUs
    assert run_interval(guard, root, clock, 0.5) is Action.HOLD
    families = {f.name: f for f in guard.families()}
    assert families["mco_guard_offline_cpu_limit_ratio"].rows == [((), 0.1)]
    assert dict(families["mco_guard_actions"].rows)[("throttle",)] == 4
    assert families["mco_guard_online_cpu_pressure_percent"].rows == [((), pytest.approx(50.0))]
    stalled = dict(families["mco_workload_pressure_seconds"].rows)
    assert stalled[("online", "online.slice", "cpu")] == pytest.approx(2.5)
    assert stalled[("offline", "offline.slice/job-1", "io")] == 0.0
    # calm: steps up, then lifts the limit: each group back to exactly what it was
    actions = [run_interval(guard, root, clock, 0.0) for _ in range(2)]
    assert actions == [Action.RELAX, Action.RELEASE]
    assert (root / "offline.slice/job-1/cpu.max").read_text() == "max 100000"
    assert (root / "offline.slice/job-2/cpu.max").read_text() == "300000 100000"
    assert list(json.loads((tmp_path / "journal.json").read_text())["limits"]) == [
        "offline.slice/job-1/cpu.weight",
        "offline.slice/job-2/cpu.weight",
    ], "the weight stays lowest while the guard runs"
    guard.close()
    assert (root / "offline.slice/job-1/cpu.weight").read_text() == "100"
    assert not (tmp_path / "journal.json").exists()


def test_dry_run_decides_but_writes_nothing(tmp_path: Path) -> None:
    root = v2_tree(tmp_path / "cg", ["online.slice", "offline.slice/job-1", "offline.slice/job-2"])
    clock = Clock()
    guard = make_guard(root, tmp_path, clock, mode="dry-run")
    guard.step()
    assert run_interval(guard, root, clock, 0.9) is Action.THROTTLE
    assert (root / "offline.slice/job-1/cpu.max").read_text() == "max 100000\n"
    assert not (tmp_path / "journal.json").exists()
    families = {f.name: f for f in guard.families()}
    assert families["mco_guard_mode"].rows == [(("dry-run",), 1.0)]
    assert families["mco_guard_offline_cpu_limit_ratio"].rows == [((), 0.5)]


def test_a_journal_left_by_a_killed_guard_is_restored_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = v2_tree(tmp_path / "cg", ["online.slice", "offline.slice/job-1", "offline.slice/job-2"])
    clock = Clock()
    first = make_guard(root, tmp_path, clock)
    first.step()
    run_interval(first, root, clock, 0.9)
    assert (root / "offline.slice/job-1/cpu.max").read_text() == "200000 100000"
    # killed here (no close); a new guard starts
    (root / "offline.slice/job-2").rename(root / "offline.slice/gone")  # a group removed meanwhile
    second = make_guard(root, tmp_path, Clock())
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        second.recover()
    assert (root / "offline.slice/job-1/cpu.max").read_text() == "max 100000"
    assert not (tmp_path / "journal.json").exists()
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", f"restored the CPU limits a killed guard left (journal {tmp_path / 'journal.json'})")
    ]
    assert not second.status.failing


def test_groups_cannot_escape_the_tree_or_be_both_classes(tmp_path: Path) -> None:
    root = v2_tree(tmp_path / "cg", ["a", "b"])
    layout = detect_layout(root)
    for bad in ("../etc", "a/../../x", "", "/"):
        with pytest.raises(ConfigError, match="expected a path below the cgroup root"):
            layout.check_group(bad)
    for online, offline in (("a", "/a/"), ("a", "a/pod-1"), ("a/pod-1", "a")):
        with pytest.raises(ConfigError, match="are the same group or one holds the other"):
            NodeGuard(
                layout, online=[online], offline=[offline], rules=GuardRules(), mode="on", journal_path=tmp_path / "j"
            )
    NodeGuard(layout, online=["a"], offline=["ab"], rules=GuardRules(), mode="on", journal_path=tmp_path / "j")


def test_layouts(tmp_path: Path) -> None:
    v2 = v2_tree(tmp_path / "v2", [])
    assert detect_layout(v2) == Layout(v2, 2, v2, v2, v2)
    hybrid = tmp_path / "hybrid"
    (hybrid / "cpu").mkdir(parents=True)
    (hybrid / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert detect_layout(hybrid) == Layout(hybrid / "cpu", 1, None)
    (hybrid / "memory").mkdir()
    (hybrid / "memory" / "memory.usage_in_bytes").write_text("0\n")
    (hybrid / "blkio").mkdir()
    (hybrid / "blkio" / "blkio.throttle.read_bps_device").write_text("")
    assert detect_layout(hybrid) == Layout(hybrid / "cpu", 1, None, hybrid / "memory", hybrid / "blkio")
    (hybrid / "unified").mkdir()
    (hybrid / "unified" / "cgroup.procs").write_text("")
    assert detect_layout(hybrid).pressure_root == hybrid / "unified"
    with pytest.raises(ConfigError, match="neither a cgroup v2 tree with cpu nor a cgroup v1 cpu controller"):
        detect_layout(tmp_path / "nothing")
    no_cpu = tmp_path / "nocpu"
    no_cpu.mkdir()
    (no_cpu / "cgroup.controllers").write_text("io memory\n")
    with pytest.raises(ConfigError, match="without the cpu controller"):
        detect_layout(no_cpu)


def test_v1_limits_and_the_journal_round_trip(tmp_path: Path) -> None:
    cpu = tmp_path / "cpu" / "offline"
    cpu.mkdir(parents=True)
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    (cpu / "cpu.cfs_period_us").write_text("50000\n")
    layout = detect_layout(tmp_path)
    limits = CpuLimits(layout)
    assert limits.text_for("offline", 1.5) == "75000"
    assert limits.text_for("offline", 0.0) == "1000", "the kernel's smallest quota"
    assert limits.text_for("offline", None) == "-1"
    writer = LimitWriter(layout, Journal(tmp_path / "state" / "j.json", layout))
    writer.write("offline", limits.quota_file, "75000")
    assert json.loads(writer.journal.path.read_text())["limits"] == {"offline/cpu.cfs_quota_us": "-1"}
    assert limits.cores("offline") == 1.5
    assert writer.restore() == []
    assert limits.cores("offline") is None


def test_pressure_share_needs_two_readings_and_a_v2_tree(tmp_path: Path) -> None:
    root = v2_tree(tmp_path / "cg", ["g"])
    clock = Clock()
    meter = PressureMeter(detect_layout(root), clock=clock)
    assert meter.share("g", "io") is None
    set_stall(root, "g", "io", 250_000)
    clock.now = 0.5
    assert meter.share("g", "io") == pytest.approx(50.0)
    assert meter.share("missing", "io") is None


def test_the_workload_source_says_who_stalls(tmp_path: Path) -> None:
    root = v2_tree(tmp_path / "cg", ["online.slice", "offline.slice/a", "offline.slice/b"])
    clock = Clock()
    source = WorkloadPressureSource(
        detect_layout(root),
        WorkloadGroups(("online.slice",), ("offline.slice/a", "offline.slice/b"), driver=None),
        clock=clock,
    )
    first = {r.name: r for r in source.read(0.0)}
    assert len(first) == 6
    assert first["psiOnlineCpuSomeRate"].absence is not None
    set_stall(root, "online.slice", "cpu", 300_000)
    set_stall(root, "offline.slice/b", "io", 800_000)
    clock.now = 1.0
    got = {r.name: r.value for r in source.read(1.0)}
    assert got["psiOnlineCpuSomeRate"] == pytest.approx(30.0)
    assert got["psiOfflineIoSomeRate"] == pytest.approx(80.0), "the worst offline group"
    assert got["psiOfflineCpuSomeRate"] == 0.0
    v1_only = tmp_path / "v1"
    (v1_only / "cpu").mkdir(parents=True)
    (v1_only / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    absent = WorkloadPressureSource(detect_layout(v1_only), WorkloadGroups(("x",), (), driver=None)).read(0.0)
    assert all(r.absence is not None and "cgroup v1 only" in r.reason for r in absent)


def test_a_tighter_limit_of_a_groups_own_is_never_raised(tmp_path: Path) -> None:
    root = v2_tree(tmp_path / "cg", ["online.slice", "offline.slice/job-1", "offline.slice/job-2"])
    (root / "offline.slice/job-2/cpu.max").write_text("50000 100000\n")  # its own limit: half a CPU
    clock = Clock()
    guard = make_guard(root, tmp_path, clock)
    guard.step()
    run_interval(guard, root, clock, 0.9)  # the guard's limit: 2 of 4 CPUs
    assert (root / "offline.slice/job-1/cpu.max").read_text() == "200000 100000"
    assert (root / "offline.slice/job-2/cpu.max").read_text() == "50000 100000\n", "left at its own, tighter limit"
    guard.close()
    assert (root / "offline.slice/job-2/cpu.max").read_text().strip() == "50000 100000"


def test_a_write_back_that_fails_stays_recorded_and_is_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = v2_tree(tmp_path / "cg", ["online.slice", "offline.slice/job-1", "offline.slice/job-2"])
    journal_file = tmp_path / "journal.json"
    journal_file.write_text(
        json.dumps(
            {
                "limits": {
                    "offline.slice/job-1/cpu.max": "max 100000",
                    "offline.slice/job-1/cgroup.kill": "1",  # not a file a guard writes: ignored
                    "../../etc/cpu.max": "x",  # outside the tree: ignored
                }
            }
        )
    )
    path = root / "offline.slice/job-1/cpu.max"
    path.unlink()
    path.mkdir()  # the write-back fails (even for root)
    guard = make_guard(root, tmp_path, Clock())
    with caplog.at_level(logging.WARNING):
        guard.recover()
    assert guard.status.failing
    assert guard.writer.counts().failures == 1
    assert [(r.levelname, r.getMessage().split(": ")[0]) for r in caplog.records] == [
        ("ERROR", f"cannot restore the CPU limits a killed guard left (journal {journal_file})")
    ], "said once, as a failure"
    assert guard.writer.journal.original("offline.slice/job-1", "cpu.max") == "max 100000", "kept, not re-read"
    assert json.loads(journal_file.read_text())["limits"] == {"offline.slice/job-1/cpu.max": "max 100000"}
    path.rmdir()
    path.write_text("40000 100000")  # what the killed guard left
    guard.close()  # retried: now it works
    assert (root / "offline.slice/job-1/cpu.max").read_text() == "max 100000"
    assert not journal_file.exists()


def test_an_unreadable_journal_is_never_replaced(tmp_path: Path) -> None:
    root = v2_tree(tmp_path / "cg", ["online.slice", "offline.slice/job-1", "offline.slice/job-2"])
    (tmp_path / "journal.json").write_text("{not json")
    clock = Clock()
    guard = make_guard(root, tmp_path, clock)
    guard.recover()
    assert guard.status.failing
    guard.step()
    run_interval(guard, root, clock, 0.9)
    assert (root / "offline.slice/job-1/cpu.max").read_text() == "max 100000\n", "nothing written without a journal"
    assert (tmp_path / "journal.json").read_text() == "{not json"


def test_fail_safe_lifts_the_quota(tmp_path: Path) -> None:
    root = v2_tree(tmp_path / "cg", ["online.slice", "offline.slice/job-1", "offline.slice/job-2"])
    clock = Clock()
    guard = make_guard(root, tmp_path, clock)
    guard.step()
    run_interval(guard, root, clock, 0.9)
    guard.fail_safe()
    assert guard.state == GuardState()
    assert (root / "offline.slice/job-1/cpu.max").read_text() == "max 100000"
    assert (root / "offline.slice/job-1/cpu.weight").read_text() == "1", "the weight stays while the guard runs"


def test_restore_guard_writes_back_what_a_journal_recorded(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = v2_tree(tmp_path / "cg", ["offline"])
    config = tmp_path / "collector.yaml"
    journal = tmp_path / "journal.json"
    config.write_text(f"stream: {{enabled: false}}\ncgroupRoot: {root}\nguard: {{journal: {journal}}}\n")
    command = [sys.executable, "-m", "mco_py.cli", "collector", "--config", str(config), "--restore-guard"]
    nothing = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert nothing.returncode == 0
    assert "nothing to restore" in nothing.stdout
    (root / "offline/cpu.max").write_text("10000 100000")
    journal.write_text(json.dumps({"limits": {"offline/cpu.max": "max 100000"}}))
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert (root / "offline/cpu.max").read_text() == "max 100000"
    assert not journal.exists()


POD_ON = "0b5e6a10-1111-4c1e-9a55-3d0e7f1b2c9a"
POD_OFF = "0b5e6a10-2222-4c1e-9a55-3d0e7f1b2c9a"
POD_LATE = "0b5e6a10-3333-4c1e-9a55-3d0e7f1b2c9a"


def pod(uid: str, qos: str, cls: str) -> WorkloadPod:
    return WorkloadPod("ns", uid[9:13], uid, qos, cls)


def test_pods_the_analyzer_names_are_watched_and_limited_and_a_relabelled_one_gets_its_limit_back(
    tmp_path: Path,
) -> None:
    online = pod_group(POD_ON, "Burstable", "systemd")
    offline = pod_group(POD_OFF, "BestEffort", "systemd")
    root = v2_tree(tmp_path / "cg", [online, offline])
    (root / offline / "cpu.weight").write_text("1\n")
    layout = detect_layout(root)
    assert detect_driver(layout.cpu_root) == "systemd"
    groups = WorkloadGroups((), (), driver="systemd")
    clock = Clock()
    guard = NodeGuard(
        layout, groups=groups, rules=GuardRules(), mode="on", journal_path=tmp_path / "j.json", node="n", cpus=4,
        clock=clock, wall_clock=lambda: 1e9,
    )  # fmt: skip
    # a pod whose cgroup is not there yet (still starting) is no write error
    groups.set_pods([pod(POD_ON, "Burstable", "online"), pod(POD_OFF, "BestEffort", "offline"),
                     pod(POD_LATE, "BestEffort", "offline")])  # fmt: skip
    guard.step()
    set_stall(root, online, "cpu", 500_000)
    clock.now = 1.0
    assert guard.step() is Action.THROTTLE
    assert (root / offline / "cpu.max").read_text() == "200000 100000", "half of 4 CPUs"
    assert (root / online / "cpu.max").read_text() == "max 100000\n", "online pods are never written"
    assert guard.writer.counts().failures == 0
    changes = guard.take_changes()
    assert [(c.node, c.action, c.limit_before, c.limit, c.cpus) for c in changes] == [
        ("n", Action.THROTTLE, None, 0.5, 4)
    ]
    assert guard.take_changes() == [], "each change is taken once"
    # relabelled online: its limit goes back at the next step, while the pressure lasts
    groups.set_pods([pod(POD_ON, "Burstable", "online"), pod(POD_OFF, "BestEffort", "online")])
    set_stall(root, online, "cpu", 1_000_000)
    clock.now = 2.0
    guard.step()
    assert (root / offline / "cpu.max").read_text().strip() == "max 100000"
    assert (root / offline / "cpu.weight").read_text().strip() == "1"
    assert not (tmp_path / "j.json").exists(), "nothing left to restore"


def test_a_pod_that_nests_with_the_other_class_is_left_out(tmp_path: Path) -> None:
    groups = WorkloadGroups((), ("kubepods.slice/kubepods-besteffort.slice",), driver="systemd")
    view = groups.set_pods([pod(POD_ON, "BestEffort", "online"), pod(POD_OFF, "Burstable", "offline")])
    assert view.online == ()
    assert view.conflicts == 1
    assert view.offline == ("kubepods.slice/kubepods-besteffort.slice", pod_group(POD_OFF, "Burstable", "systemd"))
    no_kubelet = WorkloadGroups(("online.slice",), (), driver=None).set_pods([pod(POD_OFF, "BestEffort", "offline")])
    assert no_kubelet.offline == ()
    assert no_kubelet.pods == 1


def test_rules_from_the_analyzer_replace_the_configured_ones(tmp_path: Path) -> None:
    root = v2_tree(tmp_path / "cg", ["online.slice", "offline.slice"])
    clock = Clock()
    guard = make_guard(root, tmp_path, clock)
    guard.step()
    set_stall(root, "online.slice", "cpu", 150_000)  # 15 %: above the default 10
    clock.now = 1.0
    guard.set_rules(GuardRules(throttle_above=20, release_below=5))
    assert guard.step() is Action.HOLD, "15 % is between the analyzer's 5 and 20"
    assert guard.status.rules_from == "analyzer"


def memory_io_tree(tmp_path: Path, memory: int, io_stat: str) -> tuple[Path, Path]:
    """A v2 tree whose offline group uses ``memory`` bytes and has read and written as ``io_stat`` says."""
    root = v2_tree(tmp_path / "cg", ["online.slice", "offline.slice"])
    off = root / "offline.slice"
    (off / "memory.current").write_text(f"{memory}\n")
    (off / "memory.high").write_text("max\n")
    (off / "io.max").write_text("")
    (off / "io.stat").write_text(io_stat)
    return root, off


def test_memory_and_io_are_limited_as_shares_of_their_use_and_given_back(tmp_path: Path) -> None:
    root, off = memory_io_tree(tmp_path, 400 * 2**20, "254:0 rbytes=0 wbytes=0 rios=0 wios=0 dbytes=0 dios=0\n")
    clock = Clock()
    guard = NodeGuard(detect_layout(root), online=["online.slice"], offline=["offline.slice"], rules=GuardRules(),
                      mode="on", journal_path=tmp_path / "j.json", cpus=2, clock=clock)  # fmt: skip
    assert set(guard.knobs) == {"memory", "io"}
    guard.step()
    # the offline group reads 100 MiB/s; the online one stalls on memory and on I/O
    (off / "io.stat").write_text(f"254:0 rbytes={100 * 2**20} wbytes=0 rios=9 wios=0 dbytes=0 dios=0\n")
    set_stall(root, "online.slice", "memory", 300_000)
    set_stall(root, "online.slice", "io", 400_000)
    clock.now = 1.0
    guard.step()
    assert (off / "memory.high").read_text() == str(200 * 2**20), "half its use then"
    assert (off / "io.max").read_text() == f"254:0 rbps={50 * 2**20} wbps={2**20}", "half its rate; a floor for writes"
    assert (off / "cpu.max").read_text().strip() == "max 100000", "no CPU pressure: CPU untouched"
    assert {(c.resource, c.action) for c in guard.take_changes()} == {
        ("memory", Action.THROTTLE),
        ("io", Action.THROTTLE),
    }
    # calm: step up, then lifted; every file as it was
    for i in range(2, 60):
        clock.now = float(i)
        guard.step()
    assert (off / "memory.high").read_text() == "max"
    assert (off / "io.max").read_text() == "254:0 rbps=max wbps=max"
    left = json.loads((tmp_path / "j.json").read_text())["limits"]
    assert list(left) == ["offline.slice/cpu.weight"], "only the weight, held while the guard is on"
    families = {f.name: f for f in guard.families()}
    assert dict(families["mco_guard_offline_limit_ratio"].rows) == {("io",): 1.0, ("memory",): 1.0}
    assert dict(families["mco_guard_resource_actions"].rows)[("memory", "throttle")] == 1


def test_a_killed_guards_io_and_memory_limits_go_at_the_next_start(tmp_path: Path) -> None:
    root, off = memory_io_tree(tmp_path, 64 * 2**20, "8:0 rbytes=0 wbytes=0\n")
    clock = Clock()
    args = {"online": ["online.slice"], "offline": ["offline.slice"], "rules": GuardRules(), "mode": "on",
            "journal_path": tmp_path / "j.json", "cpus": 2, "clock": clock}  # fmt: skip
    killed = NodeGuard(detect_layout(root), **args)  # type: ignore[arg-type]
    killed.step()
    (off / "io.stat").write_text(f"8:0 rbytes=0 wbytes={40 * 2**20}\n")
    set_stall(root, "online.slice", "memory", 500_000)
    set_stall(root, "online.slice", "io", 500_000)
    clock.now = 1.0
    killed.step()
    assert (off / "memory.high").read_text() != "max\n"
    assert "wbps=20971520" in (off / "io.max").read_text()
    NodeGuard(detect_layout(root), **args).recover()  # type: ignore[arg-type]
    assert (off / "memory.high").read_text() == "max"
    assert (off / "io.max").read_text() == "8:0 rbps=max wbps=max"


def test_io_on_a_device_the_group_had_not_used_counts_from_the_interval_it_began(tmp_path: Path) -> None:
    """Real v2 lists a device in a group's io.stat only from the group's first I/O there (the
    TCG node shows it: tests/vm): the first interval's writes are the group's rate, not 0."""
    root, off = memory_io_tree(tmp_path, 64 * 2**20, "")
    clock = Clock()
    guard = NodeGuard(detect_layout(root), online=["online.slice"], offline=["offline.slice"], rules=GuardRules(),
                      mode="on", journal_path=tmp_path / "j.json", cpus=2, clock=clock, resources=("io",))  # fmt: skip
    guard.step()
    (off / "io.stat").write_text(f"254:16 rbytes=0 wbytes={40 * 2**20} rios=0 wios=160 dbytes=0 dios=0\n")
    set_stall(root, "online.slice", "io", 500_000)
    clock.now = 1.0
    guard.step()
    assert (off / "io.max").read_text() == f"254:16 rbps={2**20} wbps={20 * 2**20}", "half of 40 MiB/s"


def test_on_v1_the_io_knob_works_on_every_group_below_an_offline_group(tmp_path: Path) -> None:
    """v1 throttling is flat (a rule limits its own group's tasks only): a pod's containers get
    their own rules; on v2 the group's own rule covers everything below it."""
    blkio = tmp_path / "blkio"
    for child in ("pod1/c1", "pod1/c2/inner", "other"):
        (blkio / child).mkdir(parents=True)
    v1 = IoKnob(Layout(tmp_path / "cpu", 1, None, None, blkio), clock=Clock())
    assert v1.targets("pod1") == ["pod1", "pod1/c1", "pod1/c2", "pod1/c2/inner"]
    assert v1.targets("gone") == ["gone"], "a group that went: its writes fail as usual"
    v2 = IoKnob(Layout(tmp_path / "unified", 2, None, None, tmp_path / "unified"), clock=Clock())
    assert v2.targets("pod1") == ["pod1"]
