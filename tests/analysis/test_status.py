"""The fast status builder equals the model's report_to_status, byte for byte."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from mco_py.analysis.status import fast_format_time, fast_status
from mco_py.model import SIGNAL_NAMES, Level, NodeAssessment, Report, format_time, report_to_status

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
)


@settings(max_examples=200, deadline=None)
@given(
    nodes=st.lists(assessments, max_size=8),
    updated=times,
    dropped=st.integers(0, 10),
)
def test_fast_status_equals_report_to_status(nodes: list[NodeAssessment], updated: float, dropped: int) -> None:
    report = Report(
        last_update_time=updated, analyzer_identity="a", rules_version="r", nodes=tuple(nodes), detail_dropped=dropped
    )
    fast, reference = fast_status(report), report_to_status(report)
    assert json.dumps(fast) == json.dumps(reference)  # same keys, same order, same values (NaN-safe)
    assert not any(math.isnan(v) for n in fast["nodes"] for v in n.get("signals", {}).values())
