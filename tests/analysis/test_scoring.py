"""Scoring: sub-scores, dimensions and their combination, smoothing, hysteresis, staleness (properties and examples)."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import pickle
from collections import deque

import msgspec
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mco_py.analysis.reasons import hot_reasons, rule_texts, whole
from mco_py.analysis.rules import (
    RANKED_LEVELS,
    DetectionRules,
    Dimension,
    Hysteresis,
    LevelCutoffs,
    SignalRule,
    Smoothing,
    Staleness,
)
from mco_py.analysis.scoring import Scorer, combine_dimensions, reversals
from mco_py.model import DimensionScore, Level, Sample, SignalReading
from tests.analysis import oracle

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
    combine: str = "compound",
) -> DetectionRules:
    return DetectionRules(
        version="t1",
        dimensions=(
            Dimension(
                "io",
                {
                    "psiIoSomeAvg10": SignalRule(warn=20, critical=50),
                    "bioLatencyP99Ms": SignalRule(warn=5, critical=20, min_events=20),
                },
            ),
            Dimension(
                "cpu",
                {
                    "psiCpuSomeAvg10": SignalRule(warn=20, critical=50),
                    "cpuStealPercent": SignalRule(warn=5, critical=15, max_score=40),
                },
            ),
            Dimension("memory", {"oomKills": SignalRule(warn=0, critical=3, max_score=0)}),
        ),
        combine=combine,
        smoothing=Smoothing(method=method, alpha=alpha, window=window),
        hysteresis=Hysteresis(raise_after=raise_after, lower_after=lower_after),
        staleness=Staleness(stale_after_seconds=stale, forget_after_seconds=forget),
    )


def sample(node: str, t: float, **values: float | None) -> Sample:
    return Sample.of(
        node,
        t,
        (SignalReading(k, v, "procfs", "" if v is not None else "unsupported: no PSI") for k, v in values.items()),
    )


def assessment(scorer: Scorer, node: str, now: float):  # type: ignore[no-untyped-def]
    nodes, _ = scorer.assess(now)
    return next(n for n in nodes if n.name == node)


def score_of(values: dict[str, float], r: DetectionRules | None = None):  # type: ignore[no-untyped-def]
    scorer = Scorer(r or rules())
    scorer.observe(sample("n", T0, **values), T0)
    return assessment(scorer, "n", T0)


def test_sub_score_is_linear_between_warn_and_critical_clamped_and_capped() -> None:
    assert [score_of({"psiIoSomeAvg10": v}).score for v in (10, 20, 35, 50, 99)] == [0, 0, 50, 100, 100]
    # cpuStealPercent is capped at 40: alone it never makes more than Low
    steal = score_of({"cpuStealPercent": 99})
    assert (steal.score, steal.level) == (40, Level.LOW)


def test_levels_follow_the_documented_cutoffs() -> None:
    # io warn 20, critical 50: value = 20 + 0.3 * score
    scores = (0, 24.9, 25, 49.9, 50, 74.9, 75, 100)
    levels = [score_of({"psiIoSomeAvg10": 20 + 0.3 * s}).level for s in scores]
    assert levels == [Level.NONE] * 2 + [Level.LOW] * 2 + [Level.MEDIUM] * 2 + [Level.HIGH] * 2


def test_one_saturated_resource_is_not_diluted_by_calm_ones() -> None:
    # the six-CPU-hog case: one signal at critical, every other signal calm -> High
    calm = {"psiIoSomeAvg10": 0.0, "bioLatencyP99Ms": 0.1, "cpuStealPercent": 0.0}
    item = score_of({"psiCpuSomeAvg10": 65.0, **calm})
    assert (item.score, item.level, item.dominant) == (100, Level.HIGH, "cpu")
    assert set(item.dimensions) == {"cpu"}
    assert item.dimensions["cpu"].level is Level.HIGH


def test_several_elevated_dimensions_compound_and_worst_does_not() -> None:
    values = {"psiIoSomeAvg10": 35.0, "psiCpuSomeAvg10": 35.0}  # 50 and 50
    compound = score_of(values)
    assert (compound.score, compound.level) == (75, Level.HIGH)
    assert {n: d.level for n, d in compound.dimensions.items()} == {"io": Level.MEDIUM, "cpu": Level.MEDIUM}
    worst = score_of(values, rules(combine="worst"))
    assert (worst.score, worst.level) == (50, Level.MEDIUM)
    # a dimension below Low adds nothing
    assert score_of({"psiIoSomeAvg10": 35.0, "psiCpuSomeAvg10": 27.0}).score == 50


def test_reason_names_signal_value_threshold_and_dimension() -> None:
    scorer = Scorer(rules())
    change = scorer.observe(sample("n1", T0, psiIoSomeAvg10=61.2, cpuStealPercent=10.0), T0)
    assert change is not None
    assert change.new is Level.HIGH
    assert change.dominant == "io"
    assert "psiIoSomeAvg10=61.2 ≥ critical 50 (io sub-score 100)" in change.reasons
    assert "cpuStealPercent=10 > warn 5, < critical 15 (cpu sub-score 50, capped at 40)" in change.reasons
    assert "dimensions now: io High 100, cpu Low 40" in change.reasons[0]


def test_reasons_say_who_stalls_when_collectors_send_workload_classes() -> None:
    scorer = Scorer(rules())
    change = scorer.observe(
        sample("n1", T0, psiCpuSomeAvg10=70.0, psiOnlineCpuSomeRate=34.4, psiOfflineCpuSomeRate=61.0,
               psiOfflineIoSomeRate=12.0),
        T0,
    )  # fmt: skip
    assert change is not None
    assert change.reasons[1] == "stalled, online / offline: cpu 34 / 61 %, io - / 12 %"
    item = assessment(scorer, "n1", T0)
    assert item.signals["psiOnlineCpuSomeRate"] == 34.4, "shown in the report, not scored"
    assert item.dominant == "cpu"
    calm = Scorer(rules())
    calm.observe(sample("n2", T0, psiCpuSomeAvg10=1.0, psiOnlineCpuSomeRate=3.0), T0)
    assert assessment(calm, "n2", T0).reasons == (), "a calm node says nothing"


def test_absent_signal_drops_out_and_unknown_when_nothing_scorable() -> None:
    scorer = Scorer(rules())
    scorer.observe(sample("n1", T0, psiIoSomeAvg10=35.0, psiCpuSomeAvg10=None), T0)
    item = assessment(scorer, "n1", T0)
    assert item.score == 50
    assert item.level is Level.MEDIUM
    assert "psiCpuSomeAvg10" not in item.signals
    assert item.dominant == "io"
    scorer.observe(sample("n1", T0 + 1, psiIoSomeAvg10=None, psiCpuSomeAvg10=None), T0 + 1)
    item = assessment(scorer, "n1", T0 + 1)
    assert item.level is Level.UNKNOWN
    assert any("psiIoSomeAvg10 absent: unsupported: no PSI" in r for r in item.reasons)


def test_min_events_keeps_quiet_windows_out_of_the_score() -> None:
    scorer = Scorer(rules())
    quiet = Sample("n1", T0, {"bioLatencyP99Ms": 100.0, "psiIoSomeAvg10": 0.0}, {"bioLatencyP99Ms": 3})
    scorer.observe(quiet, T0)
    item = assessment(scorer, "n1", T0)
    assert item.score == 0
    assert item.level is Level.NONE
    assert "bioLatencyP99Ms" not in item.signals
    assert "bioLatencyP99Ms not judged: 3 events < minEvents 20" in item.reasons
    busy = dataclasses.replace(
        quiet,
        timestamp=T0 + 1,
        events={"bioLatencyP99Ms": 500},
    )
    scorer.observe(busy, T0 + 1)
    assert assessment(scorer, "n1", T0 + 1).score == 100, "judged now: the io dimension takes its worst signal"


def test_ewma_smooths_and_window_averages() -> None:
    ewma = Scorer(rules(alpha=0.5))
    ewma.observe(sample("n", T0, psiIoSomeAvg10=0.0), T0)
    ewma.observe(sample("n", T0 + 1, psiIoSomeAvg10=40.0), T0 + 1)
    assert assessment(ewma, "n", T0 + 1).signals["psiIoSomeAvg10"] == 20.0
    window = Scorer(rules(method="window", window=2))
    for i, v in enumerate((10.0, 20.0, 40.0)):
        window.observe(sample("n", T0 + i, psiIoSomeAvg10=v), T0 + i)
    assert assessment(window, "n", T0 + 2).signals["psiIoSomeAvg10"] == 30.0


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.one_of(st.floats(min_value=0, max_value=100), st.sampled_from([20.00003, 49.99997, 50.00004])),
            st.one_of(st.floats(min_value=0, max_value=3_600_000), st.sampled_from([5.00003, 19.99996])),
        ),
        min_size=1,
        max_size=6,
    ),
    method=st.sampled_from(["ewma", "window"]),
    alpha=st.sampled_from([1.0, 0.7, 0.3]),
)
def test_the_assessment_shows_the_smoothed_values_to_4_decimals_and_judges_them_unrounded(
    steps: list[tuple[float, float]], method: str, alpha: float
) -> None:
    scorer = Scorer(rules(method=method, alpha=alpha, window=3))
    plain: dict[str, float] = {}
    windows: dict[str, deque[float]] = {}
    for k, (psi, latency) in enumerate(steps):
        scorer.observe(sample("n", T0 + k, psiIoSomeAvg10=psi, bioLatencyP99Ms=latency), T0 + k)
        for name, sent in (("psiIoSomeAvg10", psi), ("bioLatencyP99Ms", latency)):
            if method == "ewma":
                prev = plain.get(name)
                plain[name] = sent if prev is None else prev + alpha * (sent - prev)
            else:
                windows.setdefault(name, deque(maxlen=3)).append(sent)
                plain[name] = sum(windows[name]) / len(windows[name])
    item = assessment(scorer, "n", T0 + len(steps) - 1)
    assert item.signals == {name: round(value * 1e4) / 1e4 for name, value in plain.items()}
    # judged and explained on the values unrounded
    assert item.score == oracle.node_score(plain, scorer.rules)
    dims = {name: score for name, score in oracle.dimension_scores(plain, scorer.rules).items() if score > 0}
    assert {name: d.score for name, d in item.dimensions.items()} == dims
    lines = [r for r in item.reasons if not r.startswith("level ")]  # the headline quotes the level, not values
    assert lines == oracle.reason_lines(plain, scorer.rules)


def test_hysteresis_needs_consecutive_assessments() -> None:
    scorer = Scorer(rules(raise_after=2, lower_after=3))
    scorer.observe(sample("n", T0, psiIoSomeAvg10=0.0), T0)
    assert scorer.observe(sample("n", T0 + 1, psiIoSomeAvg10=60.0), T0 + 1) is None
    change = scorer.observe(sample("n", T0 + 2, psiIoSomeAvg10=60.0), T0 + 2)
    assert change is not None
    assert (change.old, change.new) == (Level.NONE, Level.HIGH)
    assert any(
        "raised after 2 assessment(s) above None, most of the newest 1 at or above High" in r for r in change.reasons
    )
    for i in (3, 4):
        assert scorer.observe(sample("n", T0 + i, psiIoSomeAvg10=0.0), T0 + i) is None
    change = scorer.observe(sample("n", T0 + 5, psiIoSomeAvg10=0.0), T0 + 5)
    assert change is not None
    assert change.new is Level.NONE


def test_a_held_level_reports_its_cut_off_until_it_falls() -> None:
    scorer = Scorer(rules(raise_after=2, lower_after=4))
    for i in range(3):
        scorer.observe(sample("n", T0 + i, psiIoSomeAvg10=60.0), T0 + i)
    assert (assessment(scorer, "n", T0 + 2).level, assessment(scorer, "n", T0 + 2).score) == (Level.HIGH, 100)
    # the guard acts: the raw score falls to Medium (50) while the hysteresis holds High
    for i in range(3, 6):
        scorer.observe(sample("n", T0 + i, psiIoSomeAvg10=35.0), T0 + i)
        item = assessment(scorer, "n", T0 + i)
        assert (item.level, item.score) == (Level.HIGH, 75), "never below High's cut-off while High"
        assert item.dimensions["io"] == DimensionScore(Level.MEDIUM, 50), "the dimensions stay raw"
    assert "score 50.0 now (raw level Medium), reported as 75 while the level holds" in item.reasons[0]
    scorer.observe(sample("n", T0 + 6, psiIoSomeAvg10=35.0), T0 + 6)
    item = assessment(scorer, "n", T0 + 6)
    assert (item.level, item.score) == (Level.MEDIUM, 50), "lowered after 4: the raw score again"
    assert "reported as" not in item.reasons[0]


def levels_of(scorer: Scorer, series: list[float], signal: str = "psiCpuSomeAvg10") -> list[Level]:
    out = []
    for i, value in enumerate(series):
        scorer.observe(sample("n", T0 + i, **{signal: value}), T0 + i)
        out.append(assessment(scorer, "n", T0 + i).level)
    return out


def test_a_sustained_antagonist_rises_once_straight_to_high_even_after_a_partial_first_sample() -> None:
    # the first elevated sample covers a third of an interval (Medium), the rest are critical
    levels = levels_of(Scorer(rules(raise_after=8, lower_after=10)), [0.0] * 3 + [38.0] + [80.0] * 12 + [0.0] * 12)
    changes = [(a, b) for a, b in itertools.pairwise(levels) if a is not b]
    assert changes == [(Level.NONE, Level.HIGH), (Level.HIGH, Level.NONE)]
    assert levels.index(Level.HIGH) == 3 + 7, "the 8th elevated assessment raises the level"


def test_a_load_that_builds_up_or_dips_once_still_rises_once() -> None:
    for series in (
        [38.0, 30.0] + [80.0] * 12,  # a partial first sample, then a second one still building up
        [38.0, 80.0, 80.0, 80.0, 30.0] + [80.0] * 9,  # a dip in the middle of the run
    ):
        levels = levels_of(Scorer(rules(raise_after=8, lower_after=10)), [0.0] * 3 + series + [0.0] * 12)
        changes = [(a, b) for a, b in itertools.pairwise(levels) if a is not b]
        assert changes == [(Level.NONE, Level.HIGH), (Level.HIGH, Level.NONE)], series


def test_a_burst_that_touches_fewer_than_raise_after_samples_never_raises_the_level() -> None:
    for partial in (0.0, 15.0, 38.0, 60.0):  # where the burst starts and ends within an interval
        series = [0.0] * 3 + [partial] + [80.0] * 6 + [partial] + [0.0] * 15  # about 6 s of load
        levels = levels_of(Scorer(rules(raise_after=9, lower_after=10)), series)
        assert set(levels) == {Level.NONE}, partial
    series = [0.0] * 3 + [38.0] + [80.0] * 5 + [38.0] + [0.0] * 15  # 7 samples touched
    assert set(levels_of(Scorer(rules(raise_after=8, lower_after=10)), series)) == {Level.NONE}


def test_rules_change_switches_version_and_thresholds() -> None:
    scorer = Scorer(rules())
    scorer.observe(sample("n", T0, psiIoSomeAvg10=30.0), T0)
    assert assessment(scorer, "n", T0).level is Level.LOW
    strict = dataclasses.replace(
        rules(), version="t2", dimensions=(Dimension("io", {"psiIoSomeAvg10": SignalRule(warn=5, critical=10)}),)
    )
    scorer.set_rules(strict)
    scorer.observe(sample("n", T0 + 1, psiIoSomeAvg10=30.0), T0 + 1)
    report, _ = scorer.report(T0 + 1, identity="a")
    assert report.rules_version == "t2"
    assert report.nodes[0].level is Level.HIGH


def test_per_signal_smoothing_overrides_the_document() -> None:
    base = rules(alpha=1.0)
    oom = SignalRule(warn=0, critical=1, smoothing=Smoothing(method="window", window=4))
    r = dataclasses.replace(base, dimensions=(*base.dimensions[:2], Dimension("memory", {"oomKills": oom})))
    scorer = Scorer(r)
    for i, kills in enumerate((1.0, 0.0, 0.0, 1.0)):
        scorer.observe(sample("n", T0 + i, oomKills=kills, psiIoSomeAvg10=30.0 if i < 3 else 40.0), T0 + i)
    item = assessment(scorer, "n", T0 + 3)
    assert item.signals["oomKills"] == 0.5, "a moving mean over 4 samples"
    assert item.signals["psiIoSomeAvg10"] == 40.0, "the document's alpha 1: no smoothing"


# ---- properties ----------------------------------------------------------------------------------

values = st.floats(min_value=0, max_value=100, allow_nan=False)
signal_names = ("psiIoSomeAvg10", "psiCpuSomeAvg10")
vectors = st.fixed_dictionaries({n: values for n in signal_names})


@given(
    seq=st.lists(st.tuples(vectors, vectors), min_size=1, max_size=30),
    raise_after=st.integers(1, 9),
    lower_after=st.integers(1, 6),
    alpha=st.floats(min_value=0.05, max_value=1.0),
)
@settings(max_examples=150, deadline=None)
def test_a_worse_signal_never_lowers_score_or_level(  # monotone in every signal, hysteresis included
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
    raise_after=st.integers(1, 9),
    lower_after=st.integers(1, 5),
)
@settings(max_examples=150, deadline=None)
def test_hysteresis_bounds_flips_on_noisy_input(noise: list[float], raise_after: int, lower_after: int) -> None:
    scorer = Scorer(rules(raise_after=raise_after, lower_after=lower_after))
    levels = []
    for i, v in enumerate(noise):
        scorer.observe(sample("n", T0 + i, psiIoSomeAvg10=v), T0 + i)
        levels.append(assessment(scorer, "n", T0 + i).level)
    # a rise needs all but one of its newest raiseAfter - 1 assessments (all of them when fewer than
    # three) at or above the new level and a fall lowerAfter at or below it, so direction changes
    # are spaced at least min() apart
    height = max(1, raise_after - 1)
    odd = 1 if height >= 3 else 0
    assert reversals(levels) <= len(noise) // max(1, min(height - odd, lower_after - odd))
    changes = sum(1 for a, b in itertools.pairwise(levels) if a is not b)
    assert changes <= 3 * (reversals(levels) + 1)


scored_names = ("psiIoSomeAvg10", "psiCpuSomeAvg10", "cpuStealPercent", "bioLatencyP99Ms", "oomKills")
value_maps = st.dictionaries(st.sampled_from(scored_names), st.floats(min_value=0, max_value=120))


@given(given_values=value_maps, combine=st.sampled_from(["compound", "worst"]))
@settings(max_examples=200, deadline=None)
def test_scores_and_dimensions_are_the_oracles(given_values: dict[str, float], combine: str) -> None:
    r = rules(combine=combine)
    item = score_of(given_values, r)
    expected = oracle.node_score(given_values, r)
    if expected is None:
        assert item.level is Level.UNKNOWN
        return
    assert abs(item.score - expected) < 1e-9
    assert item.level is oracle.level_of(expected, r.levels)
    dims = oracle.dimension_scores(given_values, r)
    assert {n: d.score for n, d in item.dimensions.items()} == {n: v for n, v in dims.items() if v > 0}
    assert all(d.level is oracle.level_of(d.score, r.levels) for d in item.dimensions.values())
    if item.dimensions:
        assert item.dimensions[item.dominant].score == max(dims.values())
    else:
        assert item.dominant == ""


@given(st.lists(st.floats(min_value=0, max_value=100), max_size=6), st.booleans())
def test_combination_is_the_oracles(scores: list[float], compound: bool) -> None:
    cut = LevelCutoffs()
    expected = oracle.combine(scores, cut, compound=compound)
    assert abs(combine_dimensions(scores, cut, compound=compound) - expected) < 1e-9


@given(
    st.lists(st.floats(min_value=0, max_value=100), min_size=1, max_size=6),
    st.integers(0, 5),
    st.floats(min_value=0, max_value=100),
    st.booleans(),
)
def test_combination_is_monotone_and_a_missing_dimension_never_raises_it(
    scores: list[float], which: int, more: float, compound: bool
) -> None:
    cut = LevelCutoffs()
    i = which % len(scores)
    base = combine_dimensions(scores, cut, compound=compound)
    worse = [*scores[:i], max(scores[i], more), *scores[i + 1 :]]
    assert combine_dimensions(worse, cut, compound=compound) >= base - 1e-9
    assert combine_dimensions(scores[:i] + scores[i + 1 :], cut, compound=compound) <= base + 1e-9
    assert base >= max(scores) - 1e-9


@given(given_values=value_maps, critical=st.sampled_from(["psiIoSomeAvg10", "psiCpuSomeAvg10", "bioLatencyP99Ms"]))
def test_one_critical_dimension_makes_the_node_high(given_values: dict[str, float], critical: str) -> None:
    r = rules()
    assert score_of({**given_values, critical: r.signals[critical].critical}, r).level is Level.HIGH


@given(
    seq=st.lists(st.tuples(value_maps, st.sets(st.sampled_from(scored_names))), min_size=1, max_size=25),
    raise_after=st.integers(1, 5),
    lower_after=st.integers(1, 6),
)
@settings(max_examples=150, deadline=None)
def test_a_missing_signal_never_raises_the_score_or_level(
    seq: list[tuple[dict[str, float], set[str]]], raise_after: int, lower_after: int
) -> None:
    # unsmoothed: a missing sample also changes a moving average's history, which is not the point here
    r = rules(alpha=1.0, raise_after=raise_after, lower_after=lower_after)
    full, fewer = Scorer(r), Scorer(r)
    for i, (values, missing) in enumerate(seq):
        t = T0 + i
        full.observe(sample("n", t, **values), t)
        fewer.observe(sample("n", t, **{k: v for k, v in values.items() if k not in missing}), t)
        x, y = assessment(full, "n", t), assessment(fewer, "n", t)
        if Level.UNKNOWN in (x.level, y.level):
            continue  # nothing scorable in one of them: no level to compare
        assert y.score <= x.score + 1e-9
        assert RANKED_LEVELS.index(y.level) <= RANKED_LEVELS.index(x.level)


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


@given(st.fixed_dictionaries({n: st.floats(min_value=0, max_value=120) for n in scored_names}))
def test_fast_reason_lines_are_the_oracles(given_values: dict[str, float]) -> None:
    r = rules()
    assert hot_reasons(given_values.items(), rule_texts(r)) == oracle.reason_lines(given_values, r)


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
            scorer.observe(Sample.of("n", now, signals.values()), now)
        pairs.append((lazy.assess(now + 0.5, lazy_reasons=True)[0], eager.assess(now + 0.5)[0]))
    for got, expected in pairs:  # read only now: every node state has moved on since
        assert got == expected
        assert expected == got
        assert [n.reasons for n in got] == [n.reasons for n in expected]
    for item, expected in zip(*pairs[-1], strict=True):
        assert pickle.loads(pickle.dumps(item)) == expected
        assert copy.copy(item) == expected
        assert msgspec.structs.replace(item, signals={}) == msgspec.structs.replace(expected, signals={})


@given(
    st.one_of(
        st.floats(min_value=0, max_value=100),
        st.integers(0, 199).map(lambda k: k / 2),
        st.floats(allow_nan=False, allow_infinity=False),  # outside the table
    )
)
@example(-0.0)
def test_whole_numbers_from_the_table_equal_zero_decimal_formatting(x: float) -> None:
    assert whole(x) == (f"{x:.0f}" if x != 0 else "0")  # -0.0 too: a reason never says "-0"
