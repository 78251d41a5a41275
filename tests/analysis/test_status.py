"""The fast status builder equals the model's report_to_status, byte for byte."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mco_py.analysis.report_size import encoded_size, fit_report
from mco_py.analysis.rules import DetectionRules, Dimension, Hysteresis, Smoothing, Staleness, default_rules
from mco_py.analysis.scoring import _PERCENTS, Scorer
from mco_py.analysis.status import StatusCache, envelope, fast_format_time
from mco_py.model import (
    ROUNDER,
    SIGNAL_NAMES,
    DimensionScore,
    Level,
    NodeAssessment,
    Report,
    Sample,
    SignalReading,
    assessment_to_dict,
    format_time,
    report_to_status,
    round_to,
)

times = st.one_of(
    st.floats(min_value=0, max_value=4_102_444_800),  # up to 2100
    st.integers(0, 4_102_444_800).map(lambda s: s + 0.9995),  # millisecond rounding edges
    st.integers(0, 4_102_444_800).map(lambda s: s + 0.9999995),  # microsecond carry into the next second
)


@settings(max_examples=500, deadline=None)
@given(ts=times)
def test_fast_format_time_equals_model(ts: float) -> None:
    assert fast_format_time(ts) == format_time(ts)


assessments = st.builds(
    NodeAssessment,
    name=st.text(min_size=1, max_size=20),
    level=st.sampled_from(list(Level)),
    score=st.floats(min_value=0, max_value=100),
    signals=st.dictionaries(st.sampled_from(SIGNAL_NAMES), st.floats(allow_nan=True, allow_infinity=True)),
    last_sample_time=st.one_of(st.none(), times),
    reasons=st.lists(st.text(max_size=30), max_size=3).map(tuple),
    dominant=st.sampled_from(["", "cpu", "io"]),
    dimensions=st.dictionaries(
        st.sampled_from(["cpu", "memory", "io", "cache"]),
        st.builds(
            DimensionScore,
            level=st.sampled_from([Level.NONE, Level.LOW, Level.MEDIUM, Level.HIGH]),
            score=st.floats(min_value=0, max_value=100),
        ),
    ),
)


@settings(max_examples=200, deadline=None)
@given(
    nodes=st.lists(assessments, max_size=8),
    updated=times,
    dropped=st.integers(0, 10),
)
def test_status_cache_equals_report_to_status(nodes: list[NodeAssessment], updated: float, dropped: int) -> None:
    report = Report(
        last_update_time=updated, analyzer_identity="a", rules_version="r", nodes=tuple(nodes), detail_dropped=dropped
    )
    fast, reference = StatusCache().build(report), report_to_status(report)
    assert json.dumps(fast) == json.dumps(reference)  # same keys, same order, same values (NaN-safe)
    assert not any(math.isnan(v) for n in fast["nodes"] for v in n.get("signals", {}).values())


# --- caching: a report built from cached assessments and entries equals one built from scratch ---

SIGNAL_VALUES = st.one_of(st.none(), st.floats(min_value=0, max_value=120), st.sampled_from([0.0, 20.0, 50.0]))
NODE_NAMES = [f"node-{i}" for i in range(5)]
operations = st.lists(
    st.one_of(
        st.tuples(  # a sample for one node
            st.just("sample"),
            st.sampled_from(NODE_NAMES),
            st.dictionaries(st.sampled_from(SIGNAL_NAMES), SIGNAL_VALUES, max_size=len(SIGNAL_NAMES)),
        ),
        st.tuples(st.just("wait"), st.sampled_from([0.5, 20.0, 70.0, 700.0])),  # fresh, stale, forgotten
        st.tuples(st.just("rules"), st.sampled_from(["default", "strict"])),
        st.tuples(st.just("report"), st.sampled_from([None, 400, 900, 3000, 100_000])),  # budget in bytes
        st.tuples(st.just("report"), st.integers(-400, 40).map(str)),  # budget relative to the full size
    ),
    max_size=40,
)


def _strict_rules() -> DetectionRules:
    base = default_rules()
    return dataclasses.replace(
        base,
        version="strict",
        dimensions=tuple(
            Dimension(
                d.name,
                {k: dataclasses.replace(r, warn=r.warn / 2, critical=r.critical / 2) for k, r in d.signals.items()},
            )
            for d in base.dimensions
        ),
        hysteresis=Hysteresis(raise_after=1, lower_after=2),
        staleness=Staleness(stale_after_seconds=60.0, forget_after_seconds=600.0),
    )


def _reference_fit(report: Report, budget: int) -> tuple[Report, int, list[str], dict[str, Any]]:
    """The size fitting done the plain way: strip in sacrifice order from the full status until it fits."""
    status = report_to_status(report)
    size = encoded_size(status)
    if size <= budget:
        return report, size, [], status
    order = sorted(
        range(len(report.nodes)),
        key=lambda i: (
            [Level.NONE, Level.LOW, Level.UNKNOWN, Level.MEDIUM, Level.HIGH].index(report.nodes[i].level),
            report.nodes[i].score,
            report.nodes[i].name,
        ),
    )
    nodes, entries = list(report.nodes), status["nodes"]
    stripped = 0
    for i in order:
        if size + 32 <= budget:
            break
        if not entries[i].get("dimensions") and not entries[i].get("signals") and not entries[i]["reasons"]:
            continue
        size -= encoded_size(entries[i])
        nodes[i] = dataclasses.replace(nodes[i], dimensions={}, signals={}, reasons=())
        entries[i] = assessment_to_dict(nodes[i])
        size += encoded_size(entries[i])
        stripped += 1
    dropped: list[str] = []
    for i in order:
        if size + 32 <= budget:
            break
        size -= encoded_size(entries[i]) + 1
        dropped.append(nodes[i].name)
    fitted = dataclasses.replace(
        report, nodes=tuple(n for n in nodes if n.name not in dropped), detail_dropped=stripped
    )
    return fitted, size + len(str(stripped)), dropped, report_to_status(fitted)


def _dump(status: object) -> str:
    return json.dumps(status, sort_keys=False)


@settings(max_examples=150, deadline=None)
@given(ops=operations)
def test_cached_build_equals_from_scratch(ops: list[tuple[Any, ...]]) -> None:
    _cached_build_equals_from_scratch(ops, hinted=False)


@settings(max_examples=150, deadline=None)
@given(ops=operations)
def test_cached_build_with_the_scorers_rounded_values_equals_from_scratch(ops: list[tuple[Any, ...]]) -> None:
    """As the analyzer builds: the signals rounded while smoothing, taken for the fresh assessments."""
    _cached_build_equals_from_scratch(ops, hinted=True)


@settings(max_examples=150, deadline=None)
@given(ops=operations)
def test_cached_build_with_lazy_reasons_equals_from_scratch(ops: list[tuple[Any, ...]]) -> None:
    """Reasons formatted only when the status or the fit reads them, the rounded signals handed over in
    a list by the scorer (as the analyzer builds in cluster mode; in standalone mode without lazy reasons)."""
    _cached_build_equals_from_scratch(ops, hinted=False, lazy=True)


@settings(max_examples=150, deadline=None)
@given(ops=operations)
def test_cached_build_with_the_rounded_values_listed_equals_from_scratch(ops: list[tuple[Any, ...]]) -> None:
    """The rounded signals handed over in a list by the scorer."""
    _cached_build_equals_from_scratch(ops, hinted=False, listed=True)


@settings(max_examples=150, deadline=None)
@given(ops=operations)
def test_entries_kept_by_the_scorer_equal_from_scratch(ops: list[tuple[Any, ...]]) -> None:
    """As the analyzer builds in standalone mode: every entry from the scorer, kept with the node's assessment."""
    _cached_build_equals_from_scratch(ops, hinted=False, entries=True)


@settings(max_examples=150, deadline=None)
@given(ops=operations)
def test_fit_with_bare_entries_kept_by_the_scorer_equals_from_scratch(ops: list[tuple[Any, ...]]) -> None:
    """As the analyzer builds in cluster mode: lazy reasons, rounded signals and bare entries listed by the scorer."""
    _cached_build_equals_from_scratch(ops, hinted=False, lazy=True, bare=True)


def _cached_build_equals_from_scratch(
    ops: list[tuple[Any, ...]],
    *,
    hinted: bool,
    lazy: bool = False,
    listed: bool = False,
    entries: bool = False,
    bare: bool = False,
) -> None:
    """``lazy``: lazy reasons and the rounded signals listed; ``listed``: the rounded signals listed;
    ``entries``: the unbudgeted status from the entries :meth:`Scorer.report` lists (no :class:`StatusCache`);
    ``bare``: the bare entries listed by :meth:`Scorer.report` and handed to the size fit."""
    listed = listed or lazy
    rule_sets = {
        "default": dataclasses.replace(default_rules(), staleness=Staleness(60.0, 600.0)),
        "strict": _strict_rules(),
    }
    cached, scratch = Scorer(rule_sets["default"]), Scorer(rule_sets["default"])
    cache = StatusCache(rounded=cached.rounded_signals if hinted else None)
    now = 1_800_000_000.0
    last_sample: dict[str, float] = {}
    for op in ops:
        if op[0] == "sample":
            _, node, values = op
            now += 0.25
            t = max(now, last_sample.get(node, 0.0) + 0.001)
            last_sample[node] = t
            signals = {
                k: SignalReading(k, v, "procfs", reason="" if v is not None else "not measured")
                for k, v in values.items()
            }
            for scorer in (cached, scratch):
                scorer.observe(Sample(node, t, signals), now)
        elif op[0] == "wait":
            now += op[1]
        elif op[0] == "rules":
            for scorer in (cached, scratch):
                scorer.set_rules(rule_sets[op[1]])
        else:
            budget: int | str | None = op[1]
            scratch.drop_kept_assessments()  # a build from scratch
            rounded: list[dict[str, float] | None] | None = [] if listed else None
            listed_entries: list[dict[str, Any]] | None = [] if entries or bare else None
            report, gone = cached.report(
                now, identity="a", lazy_reasons=lazy, rounded=rounded, entries=listed_entries, detail=not bare
            )
            reference_report, reference_gone = scratch.report(now, identity="a")
            assert gone == reference_gone
            if not lazy:  # (lazily: compared after the build, so the build reads the reasons first)
                assert report == reference_report
            if isinstance(budget, str):  # the edges: around the full size and the 32-byte margin
                budget = encoded_size(report_to_status(reference_report)) + int(budget)
            if bare:
                assert listed_entries == [
                    assessment_to_dict(dataclasses.replace(n, dimensions={}, signals={}, reasons=()))
                    for n in reference_report.nodes
                ]
            elif listed_entries is not None:  # whatever the budget
                status = envelope(report)
                status["nodes"] = listed_entries
                assert _dump(status) == _dump(report_to_status(reference_report))
            if budget is None:
                assert _dump(cache.build(report, rounded)) == _dump(report_to_status(reference_report))
            else:
                fitted = fit_report(report, budget, cache=cache, rounded=rounded, bare=listed_entries if bare else None)
                ref_report, ref_size, ref_dropped, ref_status = _reference_fit(reference_report, budget)
                assert fitted.report == ref_report
                assert _dump(fitted.status) == _dump(ref_status)
                assert (fitted.size, list(fitted.nodes_dropped)) == (ref_size, ref_dropped)
            assert report == reference_report


def test_cache_reuses_unchanged_entries_and_rebuilds_changed_ones() -> None:
    scorer = Scorer(default_rules())
    cache = StatusCache()
    now = 1_800_000_000.0
    for name in NODE_NAMES:
        scorer.observe(Sample(name, now, {"psiCpuSomeAvg10": SignalReading("psiCpuSomeAvg10", 3.0)}), now)
    first = cache.build(scorer.report(now, identity="a")[0])
    assert cache.rebuilt == len(NODE_NAMES)
    scorer.observe(Sample("node-2", now + 1, {"psiCpuSomeAvg10": SignalReading("psiCpuSomeAvg10", 90.0)}), now + 1)
    second = cache.build(scorer.report(now + 1, identity="a")[0])
    assert cache.rebuilt == 1
    assert second["nodes"][0] is first["nodes"][0]
    assert second["nodes"][2] is not first["nodes"][2]
    assert second["nodes"][2]["signals"]["psiCpuSomeAvg10"] > 3.0  # smoothed towards 90
    assert first["nodes"][2]["signals"] == {"psiCpuSomeAvg10": 3.0}  # earlier results are not mutated


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(
        st.dictionaries(st.sampled_from(SIGNAL_NAMES), st.floats(allow_nan=True, allow_infinity=True)), max_size=4
    ),
    window=st.booleans(),
)
def test_values_rounded_while_smoothing_equal_the_status_rounding(values: list[dict[str, float]], window: bool) -> None:
    """Any float the scorer may hold (NaN, infinities, huge ones): rounded at ingest as report_to_status rounds."""
    rules = default_rules()
    if window:
        rules = dataclasses.replace(rules, smoothing=Smoothing(method="window", window=2))
    scorer = Scorer(rules)
    now = 1_800_000_000.0
    for k, given_values in enumerate(values):
        signals = {name: SignalReading(name, v, "procfs") for name, v in given_values.items()}
        scorer.observe(Sample("node-1", now + k, signals), now + k)
    report, _ = scorer.report(now + len(values), identity="a")
    for item in report.nodes:
        hint = scorer.rounded_signals(item)
        assert hint is not None
        assert _dump(hint) == _dump(assessment_to_dict(item).get("signals", {}))
    assert _dump(StatusCache(rounded=scorer.rounded_signals).build(report)) == _dump(report_to_status(report))


@settings(max_examples=1000, deadline=None)
@given(value=st.floats(allow_nan=True, allow_infinity=True), scale=st.sampled_from([100.0, 1e4]))
def test_round_to_equals_round_half_even_of_the_scaled_value(value: float, scale: float) -> None:
    try:
        expected = round(value * scale) / scale
    except (OverflowError, ValueError):
        expected = value
    got = round_to(value, scale)
    assert (got == expected and math.copysign(1, got) == math.copysign(1, expected)) or (
        math.isnan(got) and math.isnan(expected)
    )


@given(st.one_of(st.floats(min_value=0, max_value=100), st.integers(0, 199).map(lambda k: k / 2)))
def test_percent_table_equals_zero_decimal_formatting(sub: float) -> None:
    assert _PERCENTS[int(sub + ROUNDER - ROUNDER)] == f"{sub:.0f}"
