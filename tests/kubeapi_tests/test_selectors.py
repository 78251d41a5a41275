"""Label and field selector parsing against a direct model of the semantics (property-based).

Emulator only: unit tests of tests/kubeapi/selectors.py (the selectors over HTTP are in test_core).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kubeapi.errors import ApiError
from tests.kubeapi.selectors import OWN_FIELD_ERROR, field_matcher, label_matcher

KEYS = st.sampled_from(["app", "tier", "example.com/role", "a_b"])
VALUES = st.sampled_from(["web", "db", "x.y", "v-1", ""])
LABELS = st.dictionaries(KEYS, VALUES, max_size=4)


@st.composite
def requirement(draw: st.DrawFn) -> tuple[str, object]:
    key = draw(KEYS)
    op = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!exists"]))
    if op in ("in", "notin"):
        values = draw(st.lists(VALUES.filter(bool), min_size=1, max_size=3))
        return f"{key} {op} ({','.join(values)})", (key, op, set(values))
    if op == "exists":
        return key, (key, op, None)
    if op == "!exists":
        return f"!{key}", (key, op, None)
    value = draw(VALUES)
    return f"{key}{op}{value}", (key, op, value)


def _model(labels: dict[str, str], req: tuple[str, str, object]) -> bool:
    key, op, value = req
    have = labels.get(key)
    return {
        "=": lambda: have == value,
        "==": lambda: have == value,
        "!=": lambda: have != value,
        "in": lambda: have in value,  # type: ignore[operator]
        "notin": lambda: have not in value,  # type: ignore[operator]
        "exists": lambda: key in labels,
        "!exists": lambda: key not in labels,
    }[op]()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(labels=LABELS, reqs=st.lists(requirement(), min_size=1, max_size=3))
def test_label_selector_matches_the_model(labels: dict[str, str], reqs: list[tuple[str, object]]) -> None:
    selector = ",".join(text for text, _ in reqs)
    expected = all(_model(labels, r) for _, r in reqs)  # type: ignore[arg-type]
    assert label_matcher(selector)({"metadata": {"labels": labels}}) == expected, selector


@pytest.mark.parametrize("bad", ["app in (a", "=x", "app >< b", "app in a"])
def test_bad_label_selectors_are_400(bad: str) -> None:
    with pytest.raises(ApiError) as refused:
        label_matcher(bad)
    assert refused.value.code == 400


def test_field_selector_supports_only_declared_fields() -> None:
    match = field_matcher(
        "metadata.name=a,metadata.namespace!=kube-system", frozenset({"metadata.name", "metadata.namespace"})
    )
    assert match({"metadata": {"name": "a", "namespace": "default"}})
    assert not match({"metadata": {"name": "a", "namespace": "kube-system"}})
    with pytest.raises(ApiError) as refused:
        field_matcher("spec.x=1", frozenset({"metadata.name"}))
    assert refused.value.message == '"spec.x" is not a known field selector: only "metadata.name", "metadata.namespace"'
    with pytest.raises(ApiError) as refused:
        field_matcher("spec.x=1", frozenset({"metadata.name"}), OWN_FIELD_ERROR)
    assert refused.value.message == "field label not supported: spec.x"
