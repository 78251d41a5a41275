"""Scoring: sub-scores, weighted mean, smoothing, hysteresis, staleness (properties and examples)."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from mco_py.analysis.rules import DetectionRules, Hysteresis, SignalRule, Smoothing, Staleness, default_rules
from mco_py.analysis.scoring import (
    RANKED_LEVELS,
    Scorer,
    _hot_reasons,
    _rule_texts,
    level_for_score,
    reversals,
    score_signals,
    sub_score,
)
from mco_py.model import Level, Sample, SignalReading

T0 = 1_800_000_000.0


def rules(
    *,
    alpha: float = 1.0,
    method: str = "ewma",
    window: int = 3,
    raise_after: int = 1,
    lower_after: int = 1,
    stale: float = 30.0,
    forget: float = 600.0,
) -> DetectionRules:
    return DetectionRules(
        version="t1",
        signals={
            "psiIoSomeAvg10": SignalRule(warn=20, critical=50, weight=1.0),
            "psiCpuSomeAvg10": SignalRule(warn=20, critical=50, weight=3.0),
            "bioLatencyP99Ms": SignalRule(warn=5, critical=20, weight=1.0, min_events=20),
            "cpuStealPercent": SignalRule(warn=5, critical=15, weight=0.0),
        },
        smoothing=Smoothing(method=method, alpha=alpha, window=window),
        hysteresis=Hysteresis(raise_after=raise_after, lower_after=lower_after),
        staleness=Staleness(stale_after_seconds=stale, forget_after_seconds=forget),
    )


def sample(node: str, t: float, **values: float | None) -> Sample:
    return Sample(
        node=node,
        timestamp=t,
        signals={
            k: SignalReading(k, v, "procfs", "" if v is not None else "unsupported: no PSI") for k, v in values.items()
        },
    )


def assessment(scorer: Scorer, node: str, now: float):  # type: ignore[no-untyped-def]
    nodes, _ = scorer.assess(now)
    return next(n for n in nodes if n.name == node)


def test_sub_score_is_linear_between_warn_and_critical_and_clamped() -> None:
    rule = SignalRule(warn=20, critical=50)
    assert sub_score(10, rule) == 0
    assert sub_score(20, rule) == 0
    assert sub_score(35, rule) == 50
    assert sub_score(50, rule) == 100
    assert sub_score(99, rule) == 100


def test_levels_follow_the_documented_cutoffs() -> None:
    cut = default_rules().levels
    assert [level_for_score(s, cut) for s in (0, 24.9, 25, 49.9, 50, 74.9, 75, 100)] == [
        Level.NONE,
        Level.NONE,
        Level.LOW,
        Level.LOW,
        Level.MEDIUM,
        Level.MEDIUM,
        Level.HIGH,
        Level.HIGH,
    ]


def test_weighted_mean_over_present_signals_renormalises() -> None:
    r = rules()
    # io 35 -> 50 (weight 1); cpu 50 -> 100 (weight 3): (50 + 300) / 4
    score, parts = score_signals({"psiIoSomeAvg10": 35, "psiCpuSomeAvg10": 50}, r)
    assert score == 87.5
    assert {p.name for p in parts} == {"psiIoSomeAvg10", "psiCpuSomeAvg10"}
    # cpu absent: only io counts, weight renormalised to 1
    assert score_signals({"psiIoSomeAvg10": 35}, r)[0] == 50
    # weight 0 and unknown signals do not count; nothing scorable -> None
    assert score_signals({"cpuStealPercent": 99, "somethingNew": 5}, r) == (None, [])


def test_reason_names_signal_value_and_threshold() -> None:
    scorer = Scorer(rules())
    change = scorer.observe(sample("n1", T0, psiIoSomeAvg10=61.2), T0)
    assert change is not None
    assert change.new is Level.HIGH
    assert "psiIoSomeAvg10=61.2 ≥ critical 50 (sub-score 100, weight 1)" in change.reasons


def test_absent_signal_drops_out_and_unknown_when_nothing_scorable() -> None:
    scorer = Scorer(rules())
    scorer.observe(sample("n1", T0, psiIoSomeAvg10=35.0, psiCpuSomeAvg10=None), T0)
    item = assessment(scorer, "n1", T0)
    assert item.score == 50
    assert item.level is Level.MEDIUM
    assert "psiCpuSomeAvg10" not in item.signals
    scorer.observe(sample("n1", T0 + 1, psiIoSomeAvg10=None, psiCpuSomeAvg10=None), T0 + 1)
    item = assessment(scorer, "n1", T0 + 1)
    assert item.level is Level.UNKNOWN
    assert any("psiIoSomeAvg10 absent: unsupported: no PSI" in r for r in item.reasons)


def test_min_events_keeps_quiet_windows_out_of_the_score() -> None:
    scorer = Scorer(rules())
    quiet = Sample(
        "n1",
        T0,
        {
            "bioLatencyP99Ms": SignalReading("bioLatencyP99Ms", 100.0, "libbpf", events=3),
            "psiIoSomeAvg10": SignalReading("psiIoSomeAvg10", 0.0, "procfs"),
        },
    )
    scorer.observe(quiet, T0)
    item = assessment(scorer, "n1", T0)
    assert item.score == 0
    assert item.level is Level.NONE
    assert "bioLatencyP99Ms" not in item.signals
    assert "bioLatencyP99Ms not judged: 3 events < minEvents 20" in item.reasons
    busy = dataclasses.replace(
        quiet,
        timestamp=T0 + 1,
        signals={**quiet.signals, "bioLatencyP99Ms": SignalReading("bioLatencyP99Ms", 100.0, "libbpf", events=500)},
    )
    scorer.observe(busy, T0 + 1)
    assert assessment(scorer, "n1", T0 + 1).score == 50


def test_ewma_smooths_and_window_averages() -> None:
    ewma = Scorer(rules(alpha=0.5))
    ewma.observe(sample("n", T0, psiIoSomeAvg10=0.0), T0)
    ewma.observe(sample("n", T0 + 1, psiIoSomeAvg10=40.0), T0 + 1)
    assert assessment(ewma, "n", T0 + 1).signals["psiIoSomeAvg10"] == 20.0
    window = Scorer(rules(method="window", window=2))
    for i, v in enumerate((10.0, 20.0, 40.0)):
        window.observe(sample("n", T0 + i, psiIoSomeAvg10=v), T0 + i)
    assert assessment(window, "n", T0 + 2).signals["psiIoSomeAvg10"] == 30.0


def test_hysteresis_needs_consecutive_assessments() -> None:
    scorer = Scorer(rules(raise_after=2, lower_after=3))
    scorer.observe(sample("n", T0, psiIoSomeAvg10=0.0), T0)
    assert scorer.observe(sample("n", T0 + 1, psiIoSomeAvg10=60.0), T0 + 1) is None
    change = scorer.observe(sample("n", T0 + 2, psiIoSomeAvg10=60.0), T0 + 2)
    assert change is not None
    assert (change.old, change.new) == (Level.NONE, Level.HIGH)
    assert any("raised after 2 assessment(s)" in r for r in change.reasons)
    for i in (3, 4):
        assert scorer.observe(sample("n", T0 + i, psiIoSomeAvg10=0.0), T0 + i) is None
    change = scorer.observe(sample("n", T0 + 5, psiIoSomeAvg10=0.0), T0 + 5)
    assert change is not None
    assert change.new is Level.NONE


def test_stale_node_is_unknown_then_forgotten_then_fresh_again() -> None:
    scorer = Scorer(rules(stale=10, forget=100))
    scorer.observe(sample("n", T0, psiIoSomeAvg10=60.0), T0)
    assert assessment(scorer, "n", T0 + 10).level is Level.HIGH
    stale = assessment(scorer, "n", T0 + 11)
    assert stale.level is Level.UNKNOWN
    assert "no sample for 11s" in stale.reasons[0]
    nodes, forgotten = scorer.assess(T0 + 101)
    assert nodes == []
    assert forgotten == ["n"]
    change = scorer.observe(sample("n", T0 + 200, psiIoSomeAvg10=0.0), T0 + 200)
    assert change is not None
    assert (change.old, change.new) == (None, Level.NONE)


def test_resumed_after_stale_starts_fresh() -> None:
    scorer = Scorer(rules(stale=10, forget=100, raise_after=3, lower_after=3))
    scorer.observe(sample("n", T0, psiIoSomeAvg10=60.0), T0)
    change = scorer.observe(sample("n", T0 + 50, psiIoSomeAvg10=0.0), T0 + 50)
    assert change is not None
    assert change.new is Level.NONE, "no hysteresis across a silence: old state is not trusted"


def test_rules_change_switches_version_and_thresholds() -> None:
    scorer = Scorer(rules())
    scorer.observe(sample("n", T0, psiIoSomeAvg10=30.0), T0)
    assert assessment(scorer, "n", T0).level is Level.LOW
    strict = dataclasses.replace(
        rules(), version="t2", signals={"psiIoSomeAvg10": SignalRule(warn=5, critical=10, weight=1.0)}
    )
    scorer.set_rules(strict)
    scorer.observe(sample("n", T0 + 1, psiIoSomeAvg10=30.0), T0 + 1)
    report, _ = scorer.report(T0 + 1, identity="a")
    assert report.rules_version == "t2"
    assert report.nodes[0].level is Level.HIGH


# ---- properties ----------------------------------------------------------------------------------

values = st.floats(min_value=0, max_value=100, allow_nan=False)
signal_names = ("psiIoSomeAvg10", "psiCpuSomeAvg10")
vectors = st.fixed_dictionaries({n: values for n in signal_names})


@given(
    seq=st.lists(st.tuples(vectors, vectors), min_size=1, max_size=30),
    raise_after=st.integers(1, 4),
    lower_after=st.integers(1, 6),
    alpha=st.floats(min_value=0.05, max_value=1.0),
)
@settings(max_examples=150, deadline=None)
def test_a_worse_signal_never_lowers_score_or_level(
    seq: list[tuple[dict[str, float], dict[str, float]]], raise_after: int, lower_after: int, alpha: float
) -> None:
    r = rules(alpha=alpha, raise_after=raise_after, lower_after=lower_after)
    base, worse = Scorer(r), Scorer(r)
    for i, (a, b) in enumerate(seq):
        t = T0 + i
        bad = {k: max(a[k], b[k]) for k in a}
        base.observe(sample("n", t, **a), t)
        worse.observe(sample("n", t, **bad), t)
        x, y = assessment(base, "n", t), assessment(worse, "n", t)
        assert y.score >= x.score - 1e-9
        assert RANKED_LEVELS.index(y.level) >= RANKED_LEVELS.index(x.level)


@given(
    noise=st.lists(values, min_size=1, max_size=80),
    raise_after=st.integers(1, 5),
    lower_after=st.integers(1, 5),
)
@settings(max_examples=150, deadline=None)
def test_hysteresis_bounds_flips_on_noisy_input(noise: list[float], raise_after: int, lower_after: int) -> None:
    scorer = Scorer(rules(raise_after=raise_after, lower_after=lower_after))
    levels = []
    for i, v in enumerate(noise):
        scorer.observe(sample("n", T0 + i, psiIoSomeAvg10=v), T0 + i)
        levels.append(assessment(scorer, "n", T0 + i).level)
    # a rise needs raiseAfter fresh assessments at or above the new level and a fall
    # lowerAfter at or below it, so direction changes are spaced at least min() apart
    assert reversals(levels) <= len(noise) // min(raise_after, lower_after)
    changes = sum(1 for a, b in itertools.pairwise(levels) if a is not b)
    assert changes <= 3 * (reversals(levels) + 1)


@given(present=st.lists(st.booleans(), min_size=2, max_size=2), v=st.tuples(values, values))
@settings(max_examples=100, deadline=None)
def test_score_is_the_renormalised_mean_of_present_signals(present: list[bool], v: tuple[float, float]) -> None:
    r = rules()
    given_values = {name: val for name, val, p in zip(signal_names, v, present, strict=True) if p}
    score, _ = score_signals(given_values, r)
    if not given_values:
        assert score is None
        return
    weights = {n: r.signals[n].weight for n in given_values}
    expected = sum(sub_score(val, r.signals[n]) * weights[n] for n, val in given_values.items()) / sum(weights.values())
    assert score is not None
    assert abs(score - expected) < 1e-9
    assert 0 <= score <= 100


@given(
    silence=st.floats(min_value=0, max_value=1000),
    stale=st.floats(min_value=1, max_value=100),
    extra=st.floats(min_value=1, max_value=500),
)
@settings(max_examples=100, deadline=None)
def test_staleness_unknown_then_forgotten(silence: float, stale: float, extra: float) -> None:
    forget = stale + extra
    scorer = Scorer(rules(stale=stale, forget=forget))
    scorer.observe(sample("n", T0, psiIoSomeAvg10=10.0), T0)
    nodes, forgotten = scorer.assess(T0 + silence)
    silence = (T0 + silence) - T0  # what the scorer sees after float rounding
    if silence > forget:
        assert nodes == []
        assert forgotten == ["n"]
        assert len(scorer) == 0
    elif silence > stale:
        assert nodes[0].level is Level.UNKNOWN
    else:
        assert nodes[0].level is Level.NONE


@given(st.fixed_dictionaries({n: values for n in ("psiIoSomeAvg10", "psiCpuSomeAvg10", "cpuStealPercent")}))
def test_fast_reason_lines_match_the_contributions(given_values: dict[str, float]) -> None:
    r = rules()
    _, parts = score_signals(given_values, r)
    above_warn = sorted((c for c in parts if c.value > c.rule.warn), key=lambda c: c.sub_score, reverse=True)
    assert _hot_reasons(given_values, _rule_texts(r)) == [c.describe() for c in above_warn]


lazy_values = st.one_of(st.none(), st.floats(min_value=0, max_value=120), st.sampled_from([0.0, 20.0, 50.0]))


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.fixed_dictionaries(
                {n: lazy_values for n in ("psiIoSomeAvg10", "psiCpuSomeAvg10", "cpuStealPercent")},
                optional={"bioLatencyP99Ms": st.floats(min_value=0, max_value=40)},
            ),
            st.sampled_from([1.0, 40.0]),  # fresh, or stale at the next assessment
            st.integers(0, 40),  # events behind bioLatencyP99Ms (minEvents 20)
        ),
        min_size=1,
        max_size=8,
    ),
    raise_after=st.integers(1, 3),
)
def test_lazy_reasons_are_the_eager_ones_of_the_assessment_time(
    steps: list[tuple[dict[str, float | None], float, int]], raise_after: int
) -> None:
    """Reasons formatted when first read, after the node moved on, are those it had when assessed."""
    lazy, eager = Scorer(rules(raise_after=raise_after)), Scorer(rules(raise_after=raise_after))
    now = T0
    pairs = []
    for values, gap, events in steps:
        now += gap
        signals = {k: SignalReading(k, v, "procfs", "" if v is not None else "absent") for k, v in values.items()}
        if "bioLatencyP99Ms" in signals:
            signals["bioLatencyP99Ms"] = dataclasses.replace(signals["bioLatencyP99Ms"], events=events)
        for scorer in (lazy, eager):
            scorer.observe(Sample("n", now, signals), now)
        pairs.append((lazy.assess(now + 0.5, lazy_reasons=True)[0], eager.assess(now + 0.5)[0]))
    for got, expected in pairs:  # read only now: every node state has moved on since
        assert got == expected
        assert expected == got
        assert [n.reasons for n in got] == [n.reasons for n in expected]
    for item, expected in zip(*pairs[-1], strict=True):
        assert pickle.loads(pickle.dumps(item)) == expected
        assert copy.copy(item) == expected
        assert dataclasses.replace(item, signals={}) == dataclasses.replace(expected, signals={})
        assert dataclasses.replace(item, reasons=("x",)).reasons == ("x",)
