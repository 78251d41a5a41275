"""The extender policy: pure decisions from report, time, settings, pod and node."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mco_py.analysis.policy import (
    KATA_LABEL,
    Fallback,
    PolicySettings,
    filter_node,
    index_report,
    kube_score,
    node_score,
    parse_sensitivity,
    pod_interference,
    report_state,
    volcano_score,
)
from mco_py.analysis.rules import default_rules
from mco_py.analysis.scoring import Scorer
from mco_py.model import SIGNAL_NAMES, DimensionScore, Level, NodeAssessment, Report, Sample, SignalReading

NOW = 1_000_000.0
SETTINGS = PolicySettings()


def report(*nodes: NodeAssessment, updated: float = NOW) -> Report:
    return Report(last_update_time=updated, analyzer_identity="a", rules_version="1", nodes=nodes)


def node(name: str, level: Level = Level.NONE, score: float = 0.0, **signals: float) -> NodeAssessment:
    return NodeAssessment(name=name, level=level, score=score, signals=signals)


def state_of(rep: Report | None, now: float = NOW, settings: PolicySettings = SETTINGS, **kw):
    return report_state(index_report(rep) if rep else None, now=now, settings=settings, **kw)


NOISY = report(
    node("w1", Level.HIGH, 81.5, psiIoSomeAvg10=61.2), node("w2"), node("w3", Level.UNKNOWN, 99, psiIoSomeAvg10=99.0)
)


def test_rejection_reason_names_node_signal_threshold_and_age():
    verdict = filter_node(state_of(NOISY, now=NOW + 3), node="w1", labels={}, runtime_class=None, settings=SETTINGS)
    assert not verdict.passed
    assert verdict.reason == "mco: node w1 psiIoSomeAvg10=61.2 > threshold 20 (report 3s old)"
    assert verdict.rule == "constraint"


def test_value_equal_to_threshold_passes_and_absent_signal_passes():
    rep = report(node("a", psiIoSomeAvg10=20.0), node("b", Level.HIGH, 90))
    st_ = state_of(rep)
    assert filter_node(st_, node="a", labels={}, runtime_class=None, settings=SETTINGS).passed
    assert filter_node(st_, node="b", labels={}, runtime_class=None, settings=SETTINGS).rule == "ok"


def test_unknown_and_absent_nodes_pass_as_no_data():
    st_ = state_of(NOISY)
    for name in ("w3", "absent"):
        verdict = filter_node(st_, node=name, labels={}, runtime_class=None, settings=SETTINGS)
        assert verdict.passed
        assert verdict.rule == "no-data"


@pytest.mark.parametrize(
    ("rep", "now", "kw", "fallback"),
    [
        (None, NOW, {}, Fallback.MISSING),
        (NOISY, NOW, {"unreadable": True, "problem": "bad"}, Fallback.UNREADABLE),
        (NOISY, NOW + 30.5, {}, Fallback.STALE),
        (NOISY, NOW - 5.5, {}, Fallback.FUTURE),
    ],
)
def test_basic_mode_passes_everything_except_kata(rep, now, kw, fallback):
    st_ = state_of(rep, now=now, **kw)
    assert st_.basic_mode
    assert st_.fallback is fallback
    verdict = filter_node(st_, node="w1", labels={}, runtime_class=None, settings=SETTINGS)
    assert verdict.passed
    assert verdict.rule == "fallback"
    kata = filter_node(st_, node="w1", labels={}, runtime_class="kata-qemu", settings=SETTINGS)
    assert not kata.passed
    assert kata.rule == "kata"
    assert len({volcano_score(st_, n, SETTINGS) for n in ("w1", "w2", "x")}) == 1
    assert len({kube_score(st_, n, SETTINGS) for n in ("w1", "w2", "x")}) == 1


def test_ttl_boundary_and_skew():
    assert not state_of(NOISY, now=NOW + 30).basic_mode
    assert not state_of(NOISY, now=NOW - 5).basic_mode


def test_outdated_report_in_use_when_fallback_disabled():
    settings = PolicySettings(fallback_when_outdated=False)
    st_ = state_of(NOISY, now=NOW + 600, settings=settings)
    assert not st_.basic_mode
    assert st_.outdated_in_use
    assert not filter_node(st_, node="w1", labels={}, runtime_class=None, settings=settings).passed
    # a future-dated report is a clock problem: still basic mode
    assert state_of(NOISY, now=NOW - 600, settings=settings).basic_mode


def test_kata_rule():
    st_ = state_of(NOISY)
    kata_labels = {KATA_LABEL: "true"}
    assert filter_node(st_, node="w2", labels=kata_labels, runtime_class="kata-clh", settings=SETTINGS).passed
    assert not filter_node(st_, node="w2", labels={KATA_LABEL: "false"}, runtime_class="kata", settings=SETTINGS).passed
    assert filter_node(st_, node="w2", labels={}, runtime_class="runc", settings=SETTINGS).passed
    # labels unknown: the Kata rule fails open, the report still applies
    unknown = filter_node(st_, node="w2", labels=None, runtime_class="kata", settings=SETTINGS)
    assert unknown.passed
    assert unknown.rule == "labels-unknown"
    assert not filter_node(st_, node="w1", labels=None, runtime_class="kata", settings=SETTINGS).passed
    # a Kata node with high interference is still rejected by the constraint
    assert not filter_node(st_, node="w1", labels=kata_labels, runtime_class="kata", settings=SETTINGS).passed


def test_scores():
    settings = PolicySettings(score_weight=0.5, unknown_score=30)
    st_ = state_of(NOISY)
    assert volcano_score(st_, "w2", settings) == 50.0
    assert volcano_score(st_, "w1", settings) == pytest.approx(9.25)
    assert volcano_score(st_, "w3", settings) == 15.0
    assert kube_score(st_, "w1", settings) == 2
    assert kube_score(st_, "w2", settings) == 10
    assert kube_score(st_, "w3", settings) == 3


def test_unknown_signal_in_settings_is_refused():
    with pytest.raises(ValueError, match="psiBogus"):
        PolicySettings(hard_constraints={"psiBogus": 1.0})


finite = st.floats(allow_nan=True, allow_infinity=True)


@given(
    score=finite,
    level=st.sampled_from(list(Level)),
    weight=st.floats(min_value=0, max_value=1000),
    unknown=st.floats(min_value=0, max_value=100),
    signals=st.dictionaries(st.sampled_from(SIGNAL_NAMES), finite, max_size=4),
    age=st.floats(min_value=-100, max_value=100),
)
def test_scores_always_in_range_and_filter_never_raises(*, score, level, weight, unknown, signals, age):
    settings = PolicySettings(score_weight=weight, unknown_score=unknown)
    st_ = state_of(report(node("n", level, score, **signals)), now=NOW + age, settings=settings)
    v = volcano_score(st_, "n", settings)
    assert math.isfinite(v)
    assert 0.0 <= v <= 100.0 * weight + 1e-9
    assert 0 <= kube_score(st_, "n", settings) <= 10
    verdict = filter_node(st_, node="n", labels=None, runtime_class="kata", settings=settings)
    assert verdict.passed or verdict.reason.startswith("mco: node n ")


# -- scoring by the dimensions a pod names ------------------------------------------


def dims(**scores: float) -> dict[str, DimensionScore]:
    return {name: DimensionScore(Level.HIGH if s >= 75 else Level.LOW, s) for name, s in scores.items()}


def test_sensitivity_parses_names_and_relative_weights():
    assert parse_sensitivity("cpu").weights == (("cpu", 1.0),)
    assert parse_sensitivity(" cpu , io ").weights == (("cpu", 1.0), ("io", 1.0))
    assert parse_sensitivity("cpu=2,io=1").weights == (("cpu", 1.0), ("io", 0.5))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "names no dimension"),
        ("cpu=0", "must be a positive number"),
        ("cpu=x", "is not a number"),
        ("cpu=nan", "must be a positive number"),
        ("CPU", "is not a dimension name"),
        ("cpu;io", "is not a dimension name"),
        (",".join(f"d{i}" for i in range(9)), "at most 8"),
        ("c" * 300, "longer than 256"),
    ],
)
def test_sensitivity_errors_say_what_is_wrong(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_sensitivity(text)


def test_a_pod_is_scored_by_the_worst_dimension_it_names():
    busy_cpu = NodeAssessment("n1", Level.HIGH, 100.0, dominant="cpu", dimensions=dims(cpu=100.0, io=10.0))
    busy_io = NodeAssessment("n2", Level.MEDIUM, 60.0, dominant="io", dimensions=dims(io=60.0))
    calm = NodeAssessment("n3", Level.NONE, 0.0)
    old_analyzer = NodeAssessment("n4", Level.LOW, 30.0)  # a report without dimensions
    st_ = state_of(report(busy_cpu, busy_io, calm, old_analyzer))
    io_bound = parse_sensitivity("io")
    assert volcano_score(st_, "n1", SETTINGS, io_bound) == 90.0  # its cpu is busy, its io is not
    assert volcano_score(st_, "n2", SETTINGS, io_bound) == 40.0
    assert volcano_score(st_, "n3", SETTINGS, io_bound) == 100.0
    assert volcano_score(st_, "n4", SETTINGS, io_bound) == 70.0, "the node score stands in for each dimension"
    # weights: cpu counts half
    mixed = parse_sensitivity("io=2,cpu=1")
    assert volcano_score(st_, "n1", SETTINGS, mixed) == 50.0
    assert kube_score(st_, "n1", SETTINGS, mixed) == 5
    # without a sensitivity: the node score, as before
    assert volcano_score(st_, "n1", SETTINGS) == 0.0


@given(
    scores=st.dictionaries(st.sampled_from(["cpu", "memory", "io", "cache"]), st.floats(0, 100), min_size=1),
    names=st.lists(st.sampled_from(["cpu", "memory", "io", "cache", "gpu"]), min_size=1, max_size=4, unique=True),
)
def test_a_sensitive_pod_never_sees_more_interference_than_the_node_has(scores, names):
    worst = max(scores.values())
    item = NodeAssessment("n", Level.HIGH, worst, dimensions=dims(**scores))
    assert 0.0 <= pod_interference(item, parse_sensitivity(",".join(names))) <= worst


@given(
    # an antagonist (critical for at least raiseAfter samples), then anything: the guard acting, the end
    burst=st.lists(st.floats(50, 100), min_size=8, max_size=12),
    after=st.lists(st.floats(0, 100), min_size=1, max_size=24),
    quiet=st.lists(st.floats(0, 19), min_size=1, max_size=36),
)
@settings(max_examples=100, deadline=None)
def test_the_score_a_scheduler_reads_never_contradicts_the_held_level(burst, after, quiet):
    """The report scores a node by its held level too: while hysteresis holds a node at High after its
    raw score fell (the guard acting), a pod that names no dimension still scores it no better than
    High's cut-off, so a held-High node loses to a None one by at least high - low points."""
    rules = default_rules()
    cut = rules.levels
    floor = {Level.NONE: 0.0, Level.LOW: cut.low, Level.MEDIUM: cut.medium, Level.HIGH: cut.high}
    scorer = Scorer(rules)
    hot = burst + after
    now = NOW
    for i in range(len(hot)):
        now = NOW + i
        scorer.observe(Sample.of("hot", now, [SignalReading("psiCpuSomeRate", hot[i % len(hot)], "procfs")]), now)
        scorer.observe(Sample.of("quiet", now, [SignalReading("psiCpuSomeRate", quiet[i % len(quiet)], "procfs")]), now)
        rep, _ = scorer.report(now, identity="a")
        state = state_of(rep, now=now)
        for item in rep.nodes:
            if item.level is not Level.UNKNOWN:
                assert node_score(state, item.name, SETTINGS) <= 100.0 - floor[item.level]
        levels = {item.name: item.level for item in rep.nodes}
        if levels.get("hot") is Level.HIGH and levels.get("quiet") is Level.NONE:
            gap = node_score(state, "quiet", SETTINGS) - node_score(state, "hot", SETTINGS)
            assert gap >= cut.high - cut.low - 1e-9
