"""What a peer chooses (names, times, collector labels) cannot grow the analyzer's state or log without bound."""

from __future__ import annotations

import logging
import tracemalloc

from prometheus_client import CollectorRegistry

from mco_py.analysis.samples import _short_name_problem, node_name_problem
from mco_py.analyzer.engine import Engine, Outcome
from mco_py.analyzer.metrics import AnalyzerMetrics
from mco_py.obs.logging import OnceFilter, RateLimit
from mco_py.report.document import report_of
from tests.rpc import wire
from tests.rules_fixtures import quick_rules

from .test_engine import T0, Clock, sample


def test_long_node_names_are_rejected_without_being_remembered() -> None:
    _short_name_problem.cache_clear()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for i in range(200):
            problem = node_name_problem(f"{i}" + "x" * (1024 * 1024))
            assert problem is not None
            assert "at most 253" in problem
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 1024 * 1024, "200 names of 1 MiB were kept"
    assert _short_name_problem.cache_info().currsize == 0


def test_the_name_cache_is_bounded_in_entries() -> None:
    assert _short_name_problem.cache_info().maxsize == 65536


def test_once_filter_forgets_the_oldest_keys_beyond_its_bound() -> None:
    once = OnceFilter(max_keys=100)
    assert all(once.first(f"collector-{i}") for i in range(20_000))
    assert len(once) == 100
    assert not once.first("collector-19999")  # recent keys are still remembered
    assert once.first("collector-0")  # the oldest were forgotten: logged again on recurrence


def test_rate_limit_allows_a_burst_per_interval_and_counts_the_rest() -> None:
    now = [0.0]
    limit = RateLimit(burst=3, interval=60.0, clock=lambda: now[0])
    assert [limit.allow() for _ in range(5)] == [0, 0, 0, None, None]
    now[0] = 61.0
    assert limit.allow() == 2  # the next allowed line says how many were held back


def make(max_nodes: int) -> tuple[Engine, Clock, CollectorRegistry]:
    clock = Clock()
    registry = CollectorRegistry()
    engine = Engine(quick_rules(), metrics=AnalyzerMetrics(registry), identity="a", clock=clock, max_nodes=max_nodes)
    return engine, clock, registry


def test_a_flood_of_made_up_names_locks_new_nodes_out_only_until_they_go_stale(caplog) -> None:
    """staleAfterSeconds is 30 in quick_rules; forgetAfterSeconds is far longer."""
    engine, clock, registry = make(max_nodes=50)
    wire.accept(engine, [sample("real-1", T0)], Outcome())
    flood = wire.accept(engine, [sample(f"fake-{i}", T0) for i in range(200)], Outcome())
    assert flood.counts == {"too_many_nodes": 151}
    clock.now = T0 + 10
    wire.accept(engine, [sample("real-1", clock.now)], Outcome())
    locked = wire.accept(engine, [sample("real-2", clock.now)], Outcome())
    assert locked.counts == {"too_many_nodes": 1}  # the flood is not stale yet
    clock.now = T0 + 31
    wire.accept(engine, [sample("real-1", clock.now)], Outcome())
    with caplog.at_level(logging.WARNING):
        admitted = wire.accept(engine, [sample("real-2", clock.now)], Outcome())
    assert admitted.accepted == 1
    assert registry.get_sample_value("mco_analyzer_nodes_evicted_total") == 49
    assert "node table full" in caplog.text
    names = {n.name for n in report_of(engine.build_report().status).nodes}
    assert names == {"real-1", "real-2"}  # the node that kept reporting was never displaced


def test_a_full_table_is_scanned_at_most_once_a_second() -> None:
    engine, clock, _registry = make(max_nodes=10)
    wire.accept(engine, [sample(f"node-{i}", T0) for i in range(10)], Outcome())
    clock.now = T0 + 31
    wire.accept(engine, [sample(f"node-{i}", clock.now) for i in range(10)], Outcome())  # all fresh again
    calls = 0
    original = engine._scorer.forget_silent

    def counting(now: float, silent_for: float) -> list[str]:
        nonlocal calls
        calls += 1
        return original(now, silent_for)

    engine._scorer.forget_silent = counting  # type: ignore[method-assign]
    outcome = wire.accept(engine, [sample(f"new-{i}", clock.now) for i in range(1000)], Outcome())
    assert outcome.counts == {"too_many_nodes": 1000}
    assert calls == 1


def test_samples_from_the_future_are_refused_beyond_ten_seconds() -> None:
    engine, _clock, _ = make(max_nodes=10)
    ahead = wire.accept(engine, [sample("node-1", T0 + 11)], Outcome())
    assert ahead.counts == {"future_timestamp": 1}
    assert wire.accept(engine, [sample("node-1", T0 + 5)], Outcome()).accepted == 1
