"""Detection rules: the shipped default is valid, bad documents name the field, format 1 converts."""

from __future__ import annotations

import textwrap

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from mco_py.analysis.rules import (
    RULES_FORMAT,
    default_rules,
    default_rules_text,
    parse_rules,
    rules_from_mapping,
    rules_to_mapping,
    rules_to_yaml,
)
from mco_py.errors import RulesError
from mco_py.model import DEFAULT_DIMENSIONS, SIGNAL_NAMES

FORMAT1 = """
version: "2026.11.1"
signals:
  psiCpuSomeAvg10: {warn: 20, critical: 50, weight: 1.0}
  psiMemoryFullAvg10: {warn: 1, critical: 5, weight: 1.5}
  psiIoSomeAvg10: {warn: 20, critical: 50}
  bioLatencyP99Ms: {warn: 5, critical: 20, minEvents: 20}
  cpuStealPercent: {warn: 5, critical: 15, weight: 0}
levels: {low: 25, medium: 50, high: 75}
smoothing: {method: ewma, alpha: 0.3}
hysteresis: {raiseAfter: 2, lowerAfter: 5}
"""


def test_default_rules_are_valid_and_group_the_fast_signals_by_resource() -> None:
    rules = default_rules()
    assert rules.format == RULES_FORMAT
    assert [d.name for d in rules.dimensions] == ["cpu", "memory", "io", "cache"]
    assert all(DEFAULT_DIMENSIONS[name] == rules.dimension_of[name] for name in rules.signals)
    # the scored PSI signals are the interval rates (fast), not the lagging avg10
    assert {"psiCpuSomeRate", "psiIoSomeRate", "psiMemoryFullRate"} <= set(rules.signals)
    assert not any(name.endswith("Avg10") for name in rules.signals)
    assert (rules.levels.low, rules.levels.medium, rules.levels.high) == (25, 50, 75)
    assert rules.signals["bioLatencyP99Ms"].min_events == 20
    assert rules.signals["cpuStealPercent"].max_score < rules.levels.high, "steal alone never makes High"
    assert rules.smoothing_of("oomKills").method == "window"
    assert rules.migration_notes == ()


def _problems(text: str) -> list[str]:
    with pytest.raises(RulesError) as info:
        parse_rules(textwrap.dedent(text))
    return info.value.problems


def test_a_version_longer_than_the_report_can_show_is_refused() -> None:
    """``analyzer.rulesVersion`` is at most 128 characters in the CRD: a longer one would make every
    report write fail in a cluster, and every reader refuse the standalone file."""
    long = FORMAT1.replace('version: "2026.11.1"', f'version: "{"v" * 129}"')
    assert _problems(long) == ["version: is 129 characters long; keep it within 128 (reports show it)"]
    assert parse_rules(FORMAT1.replace('version: "2026.11.1"', f'version: "{"v" * 128}"')).version == "v" * 128


def test_wrong_type_names_the_field() -> None:
    problems = _problems(
        """
        format: 2
        version: "1"
        dimensions:
          io:
            signals:
              psiIoSomeRate: {warn: "twenty", critical: 50}
        """
    )
    assert problems == ["dimensions.io.signals.psiIoSomeRate.warn: expected a number, got a string 'twenty'"]


def test_unknown_keys_suggest_the_fix() -> None:
    problems = _problems(
        """
        format: 2
        version: "1"
        dimensions:
          io:
            signals:
              psiIoSomeRat: {warn: 1, critical: 2}
          cpu:
            signals:
              psiCpuSomeRate: {warn: 1, critical: 2, maxScor: 3}
            signal: {}
        hysterisis: {}
        """
    )
    assert "dimensions.io.signals.psiIoSomeRat: unknown signal; did you mean 'psiIoSomeRate'?" in problems
    assert "dimensions.cpu.signals.psiCpuSomeRate.maxScor: unknown key; did you mean 'maxScore'?" in problems
    assert "dimensions.cpu.signal: unknown key; did you mean 'signals'?" in problems
    assert "hysterisis: unknown key; did you mean 'hysteresis'?" in problems


def test_every_problem_is_reported_at_once() -> None:
    problems = _problems(
        """
        format: 2
        dimensions:
          io:
            signals:
              psiIoSomeRate: {warn: 50, critical: 20, maxScore: 120}
          cpu:
            signals:
              psiIoSomeRate: {warn: 1, critical: 2}
          Bad-Name:
            signals: {}
        levels: {low: 60, medium: 50, high: 75}
        combine: sum
        smoothing: {method: median, alpha: 0}
        hysteresis: {raiseAfter: 0}
        staleness: {staleAfterSeconds: 30, forgetAfterSeconds: 10}
        """
    )
    joined = "\n".join(problems)
    for fragment in (
        "version: is required",
        "dimensions.io.signals.psiIoSomeRate: critical (20) must be greater than warn (50)",
        "dimensions.io.signals.psiIoSomeRate.maxScore: must be at most 100",
        "dimensions.cpu.signals.psiIoSomeRate: already in dimension io",
        "dimensions.Bad-Name: a dimension name is a letter",
        "levels: cut-offs must rise",
        "combine: must be one of compound, worst",
        "smoothing.method: must be one of ewma, window",
        "smoothing.alpha: must be greater than 0",
        "hysteresis.raiseAfter: must be at least 1",
        "staleness.forgetAfterSeconds: must be greater than staleAfterSeconds",
    ):
        assert fragment in joined


def test_not_yaml_not_a_mapping_unknown_format_and_nothing_to_score() -> None:
    assert _problems("signals: [unclosed")[0].startswith("not valid YAML")
    assert "must be a mapping" in _problems("- a\n- b\n")[0]
    assert "format: must be 2 (or 1 for the flat signals form), got 3" in _problems('format: 3\nversion: "1"\n')
    assert "dimensions: at least one dimension" in _problems('format: 2\nversion: "1"\n')[0]
    off = 'format: 2\nversion: "1"\ndimensions: {io: {signals: {psiIoSomeRate: {warn: 1, critical: 2, maxScore: 0}}}}'
    assert _problems(off) == ["dimensions: every maxScore is 0; let at least one signal score"]


def test_format_1_is_read_into_the_default_dimensions_with_notes() -> None:
    rules = parse_rules(FORMAT1)
    assert rules.format == 1
    assert {d.name: set(d.signals) for d in rules.dimensions} == {
        "cpu": {"psiCpuSomeAvg10"},
        "memory": {"psiMemoryFullAvg10"},
        "io": {"psiIoSomeAvg10", "bioLatencyP99Ms"},
    }
    assert (rules.hysteresis.raise_after, rules.hysteresis.lower_after) == (2, 5)
    notes = "\n".join(rules.migration_notes)
    assert "mco rules migrate" in notes
    assert "signals.cpuStealPercent: weight 0 switched the signal off" in notes
    assert "signals.psiMemoryFullAvg10: weight 1.5 dropped" in notes


def test_format_1_problems_still_name_their_fields() -> None:
    problems = _problems('version: "1"\nsignals:\n  psiIoSomeAvg10: {warn: 1, critical: 2, wieght: 0}\n')
    assert problems == ["signals.psiIoSomeAvg10.wieght: unknown key; did you mean 'weight'?"]
    problems = _problems('version: "1"\nsignals:\n  psiIoSomeAvg10: {warn: 1, critical: 2, weight: 0}\n')
    assert problems == ["signals: every weight is 0; give at least one signal a positive weight"]


def test_migrate_prints_an_equivalent_format_2_document() -> None:
    text = rules_to_yaml(parse_rules(FORMAT1), source="old.yaml")
    converted = parse_rules(text)
    assert converted.format == RULES_FORMAT
    assert converted.migration_notes == ()
    assert _fields(converted) == _fields(parse_rules(FORMAT1))
    assert "converted by `mco rules migrate` from old.yaml (format 1)" in text
    # a format-2 document goes through unchanged in meaning
    assert parse_rules(rules_to_yaml(converted)) == converted


def _fields(rules: object) -> dict[str, object]:
    keys = ("version", "dimensions", "levels", "combine", "smoothing", "hysteresis", "staleness")
    return {k: getattr(rules, k) for k in keys}


def test_the_default_document_round_trips_through_its_mapping() -> None:
    rules = default_rules()
    assert rules_from_mapping(rules_to_mapping(rules)) == rules
    assert rules_from_mapping(yaml.safe_load(default_rules_text())) == rules


@given(
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
        max_leaves=12,
    )
)
def test_arbitrary_documents_never_crash(doc: object) -> None:
    problems: list[str] = []
    try:
        rules_from_mapping(doc)
    except RulesError as exc:
        problems = exc.problems
    # A random document is either valid (then it has every required part) or says why not.
    assert problems or isinstance(doc, dict)


@given(
    st.sampled_from(SIGNAL_NAMES),
    st.floats(0, 1e6),
    st.floats(1e-3, 1e6),
    st.floats(0.1, 100),
    st.sampled_from(["cpu", "io", "gpu"]),
)
def test_valid_signal_rules_round_trip(name: str, warn: float, span: float, cap: float, dimension: str) -> None:
    doc = yaml.safe_load(default_rules_text())
    doc["dimensions"] = {dimension: {"signals": {name: {"warn": warn, "critical": warn + span, "maxScore": cap}}}}
    rules = rules_from_mapping(doc)
    assert rules.signals[name].critical > rules.signals[name].warn
    assert rules.dimension_of[name] == dimension
    assert rules_from_mapping(rules_to_mapping(rules)) == rules
