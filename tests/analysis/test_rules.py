"""Detection rules: the shipped default is valid, bad documents name the field."""

from __future__ import annotations

import textwrap

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from mco_py.analysis.rules import default_rules, default_rules_text, parse_rules, rules_from_mapping
from mco_py.errors import RulesError
from mco_py.model import SIGNAL_NAMES


def test_default_rules_are_valid_and_cover_every_signal() -> None:
    rules = default_rules()
    assert set(rules.signals) == set(SIGNAL_NAMES)
    assert (rules.levels.low, rules.levels.medium, rules.levels.high) == (25, 50, 75)
    assert rules.staleness.stale_after_seconds == 30
    # Calibrated from reference/host-signals.md.
    assert (rules.signals["psiIoSomeAvg10"].warn, rules.signals["psiIoSomeAvg10"].critical) == (20, 50)
    assert rules.signals["bioLatencyP99Ms"].min_events == 20


def _problems(text: str) -> list[str]:
    with pytest.raises(RulesError) as info:
        parse_rules(textwrap.dedent(text))
    return info.value.problems


def test_wrong_type_names_the_field() -> None:
    problems = _problems(
        """
        version: "1"
        signals:
          psiIoSomeAvg10: {warn: "twenty", critical: 50}
        """
    )
    assert problems == ["signals.psiIoSomeAvg10.warn: expected a number, got a string 'twenty'"]


def test_unknown_keys_suggest_the_fix() -> None:
    problems = _problems(
        """
        version: "1"
        signals:
          psiIoSomeAvg: {warn: 1, critical: 2}
          psiCpuSomeAvg10: {warn: 1, critical: 2, wieght: 3}
        hysterisis: {}
        """
    )
    assert "signals.psiIoSomeAvg: unknown key; did you mean 'psiIoSomeAvg10'?" in problems
    assert "signals.psiCpuSomeAvg10.wieght: unknown key; did you mean 'weight'?" in problems
    assert "hysterisis: unknown key; did you mean 'hysteresis'?" in problems


def test_every_problem_is_reported_at_once() -> None:
    problems = _problems(
        """
        signals:
          psiIoSomeAvg10: {warn: 50, critical: 20}
        levels: {low: 60, medium: 50, high: 75}
        smoothing: {method: median, alpha: 0}
        hysteresis: {raiseAfter: 0}
        staleness: {staleAfterSeconds: 30, forgetAfterSeconds: 10}
        """
    )
    joined = "\n".join(problems)
    for fragment in (
        "version: is required",
        "signals.psiIoSomeAvg10: critical (20) must be greater than warn (50)",
        "levels: cut-offs must rise",
        "smoothing.method: must be one of ewma, window",
        "smoothing.alpha: must be greater than 0",
        "hysteresis.raiseAfter: must be at least 1",
        "staleness.forgetAfterSeconds: must be greater than staleAfterSeconds",
    ):
        assert fragment in joined


def test_not_yaml_and_not_a_mapping() -> None:
    assert _problems("signals: [unclosed")[0].startswith("not valid YAML")
    assert "must be a mapping" in _problems("- a\n- b\n")[0]


def test_all_weights_zero_is_rejected() -> None:
    problems = _problems('version: "1"\nsignals:\n  psiIoSomeAvg10: {warn: 1, critical: 2, weight: 0}\n')
    assert problems == ["signals: every weight is 0; give at least one signal a positive weight"]


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


@given(st.sampled_from(SIGNAL_NAMES), st.floats(0, 1e6), st.floats(1e-3, 1e6), st.floats(0, 10))
def test_valid_signal_rules_round_trip(name: str, warn: float, span: float, weight: float) -> None:
    doc = yaml.safe_load(default_rules_text())
    doc["signals"] = {name: {"warn": warn, "critical": warn + span, "weight": weight + 0.1}}
    rules = rules_from_mapping(doc)
    assert rules.signals[name].critical > rules.signals[name].warn
