"""The report builder equals the plain way of building the document, byte for byte."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from mco_py.analysis.rules import DetectionRules, Dimension, Hysteresis, Staleness, default_rules
from mco_py.analysis.scoring import Scorer
from mco_py.model import (
    SIGNAL_NAMES,
    DimensionScore,
    Level,
    NodeAssessment,
    Report,
    Sample,
    SignalReading,
    format_time,
    round_to,
)
from mco_py.report.builder import ReportBuilder
from mco_py.report.document import Status, decode_json, encoded_size, entry, status_of, to_builtins
from tests.report import oracle

times = st.one_of(
    st.floats(min_value=0, max_value=4_102_444_800),  # up to 2100
    st.integers(0, 4_102_444_800).map(lambda s: s + 0.9995),  # millisecond rounding edges
    st.integers(0, 4_102_444_800).map(lambda s: s + 0.9999995),  # microsecond carry into the next second
)


@settings(max_examples=500, deadline=None)
@given(ts=times)
def test_format_time_equals_the_plain_formatting(ts: float) -> None:
    assert format_time(ts) == oracle.format_time(ts)


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


assessments = st.builds(
    NodeAssessment,
    name=st.text(min_size=1, max_size=20),
    level=st.sampled_from(list(Level)),
    score=st.floats(min_value=0, max_value=100),
    # as the scorer makes them (NodeAssessment.signals): finite, within the samples' bounds, 4 decimals
    signals=st.dictionaries(
        st.sampled_from(SIGNAL_NAMES), st.floats(min_value=0, max_value=3_600_000).map(lambda v: round_to(v, 1e4))
    ),
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
@given(nodes=st.lists(assessments, max_size=8), updated=times, dropped=st.integers(0, 10))
def test_the_document_equals_the_plain_one(nodes: list[NodeAssessment], updated: float, dropped: int) -> None:
    report = Report(
        last_update_time=updated, analyzer_identity="a", rules_version="r", nodes=tuple(nodes), detail_dropped=dropped
    )
    reference = _dump(oracle.report_to_status(report))  # same keys, same order, same values
    assert _dump(status_of(report)) == reference
    assert _dump(ReportBuilder().build(report).status) == reference
    for item in nodes:
        assert to_builtins(entry(item, detail=False)) == oracle.assessment_to_dict(oracle.stripped(item))
    assert status_document_round_trips(status_of(report))


def status_document_round_trips(status: Status) -> bool:
    """The document decodes to what was encoded (one struct for both ways)."""
    return decode_json(msgspec.json.encode(status), Status, "status") == status


# --- a report built from cached assessments and entries equals one built from scratch ---

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


def _dump(status: object) -> bytes:
    """The document's JSON, keys in their order (structs and the oracle's dicts alike)."""
    return msgspec.json.encode(status)


@settings(max_examples=200, deadline=None)
@given(ops=operations)
def test_builds_equal_from_scratch(ops: list[tuple[Any, ...]]) -> None:
    """As the analyzer builds without a budget (standalone: reasons formatted at once) and with
    one; one builder throughout, so its cache meets every budget."""
    _builds_equal_from_scratch(ops, lazy=False)


@settings(max_examples=200, deadline=None)
@given(ops=operations)
def test_builds_with_lazy_reasons_equal_from_scratch(ops: list[tuple[Any, ...]]) -> None:
    """As the analyzer builds in cluster mode: reasons formatted only when an entry that keeps its detail reads them."""
    _builds_equal_from_scratch(ops, lazy=True)


def _builds_equal_from_scratch(ops: list[tuple[Any, ...]], *, lazy: bool) -> None:
    rule_sets = {
        "default": dataclasses.replace(default_rules(), staleness=Staleness(60.0, 600.0)),
        "strict": _strict_rules(),
    }
    cached, scratch = Scorer(rule_sets["default"]), Scorer(rule_sets["default"])
    builder = ReportBuilder()
    now = 1_800_000_000.0
    last_sample: dict[str, float] = {}
    for op in [*ops, ("report", 900)]:
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
                scorer.observe(Sample.of(node, t, signals.values()), now)
        elif op[0] == "wait":
            now += op[1]
        elif op[0] == "rules":
            for scorer in (cached, scratch):
                scorer.set_rules(rule_sets[op[1]])
        else:
            scratch.drop_kept_assessments()  # a build from scratch
            report, gone = cached.report(now, identity="a", lazy_reasons=lazy)
            reference, reference_gone = scratch.report(now, identity="a")
            assert gone == reference_gone
            budget: int | str | None = op[1]
            if isinstance(budget, str):
                budget = encoded_size(oracle.report_to_status(reference)) + int(budget)
            builder.budget = budget
            built = builder.build(report)
            shown = [v for entry in built.status.nodes for v in (entry.signals or {}).values()]
            assert all(math.isfinite(v) and v == round_to(v, 1e4) for v in shown), (
                "4 decimals, as the scorer keeps them"
            )
            if budget is None:
                assert _dump(built.status) == _dump(oracle.report_to_status(reference))
                assert (built.size, built.detail_dropped, built.nodes_dropped) == (0, 0, ())
            else:
                want = oracle.fit(reference, budget)
                assert _dump(built.status) == _dump(want.status)
                assert (built.size, list(built.nodes_dropped)) == (want.size, want.dropped)
                assert built.detail_dropped == want.report.detail_dropped
            assert report == reference  # lazily formatted reasons equal the formatted ones


def test_unchanged_entries_are_reused_and_changed_ones_rebuilt() -> None:
    scorer = Scorer(default_rules())
    builder = ReportBuilder()
    now = 1_800_000_000.0
    for name in NODE_NAMES:
        scorer.observe(Sample(name, now, {"psiCpuSomeAvg10": 3.0}), now)
    first = builder.build(scorer.report(now, identity="a")[0]).status
    scorer.observe(Sample("node-2", now + 1, {"psiCpuSomeAvg10": 90.0}), now + 1)
    second = builder.build(scorer.report(now + 1, identity="a")[0]).status
    assert second.nodes[0] is first.nodes[0]
    assert second.nodes[2] is not first.nodes[2]
    assert second.nodes[2].signals["psiCpuSomeAvg10"] > 3.0  # smoothed towards 90
    assert first.nodes[2].signals == {"psiCpuSomeAvg10": 3.0}  # earlier results are not mutated
