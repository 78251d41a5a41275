"""Engine and report loop with an injected clock: metrics lifecycle, write failures, size budget."""

from __future__ import annotations

import gc
import json
import time
import weakref
from pathlib import Path

import msgspec
import pytest
from msgspec.structs import replace
from prometheus_client import CollectorRegistry

from mco_py.analyzer.engine import Engine, Outcome
from mco_py.analyzer.metrics import AnalyzerMetrics
from mco_py.analyzer.writer import ReportLoop
from mco_py.model import SIGNAL_NAMES, Sample
from mco_py.obs.process import gc_paused
from mco_py.report.builder import ReportBuilder
from mco_py.report.document import Status, report_of
from mco_py.report.size import Fitted
from mco_py.store.file import FileReportStore
from tests.contracts import crd_schema
from tests.rpc import wire
from tests.rules_fixtures import quick_rules

T0 = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def make(budget: int | None = None) -> tuple[Engine, Clock, CollectorRegistry]:
    clock = Clock()
    registry = CollectorRegistry()
    engine = Engine(quick_rules(), metrics=AnalyzerMetrics(registry), identity="a1", clock=clock, status_budget=budget)
    return engine, clock, registry


def sample(node: str, t: float, level: float = 1.0) -> Sample:
    """Every signal at ``level`` (LLC miss rate at level/100, no OOM kills): 90 is High, 1 is None."""
    values = {n: level for n in SIGNAL_NAMES} | {"llcMissRate": level / 100, "oomKills": 0.0}
    return Sample(node, t, values)


def test_forgotten_node_loses_its_series_and_stale_is_minus_one() -> None:
    engine, clock, registry = make()
    wire.accept(engine, [sample("node-1", T0, 90.0), sample("node-2", T0)], Outcome())
    engine.build_report()
    assert registry.get_sample_value("mco_node_interference_level", {"node": "node-1"}) == 3
    assert registry.get_sample_value("mco_node_interference_level", {"node": "node-1", "dimension": "io"}) == 3
    assert registry.get_sample_value("mco_node_interference_level", {"node": "node-2", "dimension": "io"}) == 0
    assert registry.get_sample_value("mco_analyzer_nodes") == 2
    clock.now = T0 + 31  # default staleAfterSeconds 30
    wire.accept(engine, [sample("node-2", clock.now)], Outcome())
    report = report_of(engine.build_report().status)
    assert report.node("node-1").level.value == "Unknown"  # type: ignore[union-attr]
    assert registry.get_sample_value("mco_node_interference_level", {"node": "node-1"}) == -1
    assert registry.get_sample_value("mco_node_interference_level", {"node": "node-1", "dimension": "cpu"}) == -1
    clock.now = T0 + 601  # default forgetAfterSeconds 600
    wire.accept(engine, [sample("node-2", clock.now)], Outcome())
    report = report_of(engine.build_report().status)
    assert [n.name for n in report.nodes] == ["node-2"]
    assert registry.get_sample_value("mco_node_interference_level", {"node": "node-1"}) is None
    assert registry.get_sample_value("mco_node_interference_score", {"node": "node-1"}) is None
    assert registry.get_sample_value("mco_node_interference_level", {"node": "node-1", "dimension": "io"}) is None
    # once forgotten, the node may come back with any timestamp order
    wire.accept(engine, [sample("node-1", clock.now - 10)], Outcome())
    assert report_of(engine.build_report().status).node("node-1") is not None


def test_write_failure_is_counted_and_scoring_goes_on(tmp_path: Path) -> None:
    engine, clock, registry = make()
    blocker = tmp_path / "state"
    blocker.write_text("a file where the directory should be")
    loop = ReportLoop(engine, FileReportStore(blocker / "report.json"))
    wire.accept(engine, [sample("node-1", T0)], Outcome())
    assert not loop.tick()
    clock.now += 1
    wire.accept(engine, [sample("node-2", clock.now)], Outcome())
    assert not loop.tick()
    assert registry.get_sample_value("mco_analyzer_report_write_errors_total") == 2
    blocker.unlink()
    assert loop.tick()
    doc = json.loads((blocker / "report.json").read_text())
    assert crd_schema.errors(doc) == []
    assert [n["name"] for n in doc["status"]["nodes"]] == ["node-1", "node-2"]
    assert registry.get_sample_value("mco_analyzer_report_writes_total") == 1


class _Marker:
    """Stands for a report's entries (weakly referable)."""


def test_the_previous_report_is_released_after_the_new_one_is_written(tmp_path: Path) -> None:
    """Its release (10-20 ms at 10,000 nodes) does not delay the write."""
    engine, _, _ = make()
    alive_at_write: list[bool] = []
    previous: list[weakref.ref[_Marker]] = []

    class Store(FileReportStore):
        def write_status(self, status: Status) -> None:
            alive_at_write.append(len(previous) >= 2 and previous[-2]() is not None)  # the last tick's
            super().write_status(replace(status, nodes=[n for n in status.nodes if not isinstance(n, _Marker)]))

    def build() -> Fitted:
        marker = _Marker()
        previous.append(weakref.ref(marker))
        fitted = real_build()
        fitted.status.nodes.append(marker)  # type: ignore[arg-type]  # held only by the fitted report
        return fitted

    real_build = engine.build_report
    engine.build_report = build  # type: ignore[method-assign]
    loop = ReportLoop(engine, Store(tmp_path / "r.json"))
    wire.accept(engine, [sample("node-1", T0)], Outcome())
    assert loop.tick()
    assert loop.tick()
    assert alive_at_write == [False, True]  # the first tick has no previous report
    assert previous[0]() is None  # released once the second report was written
    assert previous[1]() is not None  # kept until the next write


def test_follower_builds_but_does_not_write(tmp_path: Path) -> None:
    engine, _, registry = make()
    leader = False
    loop = ReportLoop(engine, FileReportStore(tmp_path / "r.json"), is_leader=lambda: leader)
    wire.accept(engine, [sample("node-1", T0, 90.0)], Outcome())
    assert not loop.tick()
    assert not (tmp_path / "r.json").exists()
    assert registry.get_sample_value("mco_analyzer_leader") == 0
    assert registry.get_sample_value("mco_node_interference_level", {"node": "node-1"}) == 3
    leader = True
    assert loop.tick()
    assert registry.get_sample_value("mco_analyzer_leader") == 1


def test_size_budget_drops_detail_and_reports_it(tmp_path: Path) -> None:
    engine, _, registry = make(budget=20_000)
    wire.accept(engine, [sample(f"node-{i:03d}", T0, 60.0 if i % 10 == 0 else 1.0) for i in range(200)], Outcome())
    fitted = engine.build_report()
    assert fitted.detail_dropped > 0
    assert fitted.size <= 20_000
    assert registry.get_sample_value("mco_analyzer_report_detail_dropped_nodes") == fitted.detail_dropped
    FileReportStore(tmp_path / "r.json").write_status(fitted.status)
    doc = json.loads((tmp_path / "r.json").read_text())
    assert crd_schema.errors(doc) == []
    assert doc["status"]["summary"]["detailDropped"] == fitted.detail_dropped
    assert len(json.dumps(doc["status"], separators=(",", ":"))) <= 20_000


def test_build_report_leaves_the_gc_as_it_found_it() -> None:
    engine, clock, _ = make()
    wire.accept(engine, [sample("n1", clock.now)], Outcome())
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested (another thread building at the same time)
            assert not gc.isenabled()
        assert not gc.isenabled()
        engine.build_report()
        assert not gc.isenabled()
    assert gc.isenabled()
    engine.build_report()
    assert gc.isenabled()
    gc.disable()
    try:
        engine.build_report()
        assert not gc.isenabled()  # an application that runs without the GC keeps it off
    finally:
        gc.enable()


def test_repeated_reports_equal_a_fresh_engine_report() -> None:
    engine, clock, _ = make(budget=3000)
    names = [f"n{i}" for i in range(8)]
    wire.accept(engine, [sample(n, clock.now, level=10.0 * i) for i, n in enumerate(names)], Outcome())
    first = engine.build_report()
    clock.now += 1
    wire.accept(engine, [sample("n3", clock.now, level=90.0)], Outcome())
    second = engine.build_report()
    engine._scorer.drop_kept_assessments()
    reference = ReportBuilder(3000).build(engine._scorer.report(clock.now, identity=engine.identity)[0])
    assert msgspec.json.encode(second.status) == msgspec.json.encode(reference.status)
    assert first.status != second.status


def _level_in(path: Path, node: str) -> str | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return next((n["level"] for n in doc["status"]["nodes"] if n["name"] == node), None)


@pytest.mark.parametrize("min_interval", [0.05, 0.0])
def test_a_level_change_is_reported_min_interval_after_the_previous_report(tmp_path: Path, min_interval: float) -> None:
    engine, clock, _ = make()
    path = tmp_path / "r.json"
    loop = ReportLoop(engine, FileReportStore(path), interval=30.0, min_interval=min_interval)
    wire.accept(engine, [sample("node-1", T0, 1.0)], Outcome())
    loop.start()
    try:
        deadline = time.monotonic() + 10
        while _level_in(path, "node-1") != "None" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _level_in(path, "node-1") == "None"
        clock.now += 1
        wire.accept(engine, [sample("node-1", clock.now, 90.0)], Outcome())  # None -> High
        deadline = time.monotonic() + (10 if min_interval else 0.5)
        while _level_in(path, "node-1") != "High" and time.monotonic() < deadline:
            time.sleep(0.01)
        if min_interval:
            assert _level_in(path, "node-1") == "High", "written at once, not a 30 s interval later"
        else:
            assert _level_in(path, "node-1") == "None", "0 turns early reports off"
    finally:
        loop.stop()


class _ShardStore:
    """Takes published reports (as the cluster store would), or refuses them while ``failing``."""

    def __init__(self) -> None:
        self.published: list[Fitted] = []
        self.failing = False

    def publish(self, fitted: Fitted) -> None:
        from mco_py.errors import StoreUnavailable

        if self.failing:
            raise StoreUnavailable("API server down")
        self.published.append(fitted)

    def describe(self) -> str:
        return "shards"


def test_a_large_report_is_sharded_and_a_failed_or_skipped_write_restarts_the_generation() -> None:
    clock = Clock()
    registry = CollectorRegistry()
    engine = Engine(
        quick_rules(), metrics=AnalyzerMetrics(registry), identity="a1", clock=clock,
        status_budget=20_000, shard_refresh_seconds=60.0,
    )  # fmt: skip
    store = _ShardStore()
    leader = [True]
    loop = ReportLoop(engine, store, is_leader=lambda: leader[0])  # type: ignore[arg-type]
    wire.accept(engine, [sample(f"node-{i:03d}", T0) for i in range(120)], Outcome())
    assert loop.tick()
    first = store.published[-1].shards
    assert first is not None and first.new_generation  # noqa: PT018
    assert registry.get_sample_value("mco_analyzer_report_shards") == first.index.count
    assert registry.get_sample_value("mco_analyzer_report_shard_writes_total") == first.index.count
    clock.now += 1
    assert loop.tick()
    assert not store.published[-1].shards.new_generation  # type: ignore[union-attr]
    store.failing = True
    clock.now += 1
    assert not loop.tick()
    store.failing = False
    clock.now += 1
    assert loop.tick()
    assert store.published[-1].shards.new_generation  # type: ignore[union-attr]  # after a failed write: all again
    leader[0] = False
    clock.now += 1
    assert not loop.tick()
    leader[0] = True
    clock.now += 1
    assert loop.tick()
    assert store.published[-1].shards.new_generation  # type: ignore[union-attr]  # a new leader writes all
