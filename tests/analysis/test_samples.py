"""Sample checks: every bad input is refused with a bounded reason code and a clear message."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mco_py.analysis.samples import MAX_VALUES, REJECT_REASONS, InvalidSample, check_sample, node_name_problem
from mco_py.model import Sample, SignalReading

NOW = 1_800_000_000.0


def one(name: str, value: float | None, *, node: str = "node-1", ts: float = NOW, events: int | None = None) -> Sample:
    return Sample.of(node, ts, [SignalReading(name, value, "procfs", events=events)])


@pytest.mark.parametrize(
    ("sample", "reason", "words"),
    [
        (one("psiIoSomeAvg10", math.nan), "non_finite_value", "psiIoSomeAvg10=nan"),
        (one("psiIoSomeAvg10", math.inf), "non_finite_value", "not a finite number"),
        (one("psiIoSomeAvg10", -1.0), "negative_value", "negative"),
        (one("psiIoSomeAvg10", 100.5), "out_of_range", "above its maximum 100"),
        (one("llcMissRate", 1.2), "out_of_range", "llcMissRate=1.2"),
        (one("psiIoSomeAvg10", 1.0, node=""), "invalid_node_name", "empty"),
        (one("psiIoSomeAvg10", 1.0, node="a" * 254), "invalid_node_name", "254 characters"),
        (one("psiIoSomeAvg10", 1.0, node="Node_1"), "invalid_node_name", "DNS-1123"),
        (one("psiIoSomeAvg10", 1.0, node="-bad"), "invalid_node_name", "DNS-1123"),
        (one("psiIoSomeAvg10", 1.0, ts=NOW + 301), "future_timestamp", "ahead"),
        (one("psiIoSomeAvg10", 1.0, ts=math.nan), "future_timestamp", "ahead"),
        (one("psiIoSomeAvg10", 1.0, ts=NOW - 301), "past_timestamp", "old"),
        (one("bioLatencyP99Ms", 1.0, events=-1), "invalid_events", "negative event count"),
    ],
)
def test_bad_samples_are_refused_with_reason(sample: Sample, reason: str, words: str) -> None:
    with pytest.raises(InvalidSample) as err:
        check_sample(sample, now=NOW)
    assert err.value.reason == reason
    assert reason in REJECT_REASONS
    assert words in str(err.value)


def test_good_samples_pass() -> None:
    check_sample(one("psiIoSomeAvg10", 100.0, node="worker-1.example.com"), now=NOW)
    check_sample(one("llcMissRate", None), now=NOW)
    check_sample(one("newSignalFromTheFuture", 1e9), now=NOW)  # unknown signals are allowed, not scored
    check_sample(one("oomKills", 0.0, ts=NOW + 299), now=NOW)


@settings(deadline=None)
@given(name=st.text(max_size=300))
def test_node_name_check_matches_dns1123(name: str) -> None:
    problem = node_name_problem(name)
    ok = (
        0 < len(name) <= 253
        and all(c.isascii() and (c.islower() or c.isdigit() or c in "-.") for c in name)
        and all(label and label[0].isalnum() and label[-1].isalnum() for label in name.split("."))
    )
    assert (problem is None) == ok


@settings(deadline=None)
@given(name=st.sampled_from(sorted(MAX_VALUES)), value=st.floats(allow_nan=True, allow_infinity=True))
def test_any_value_is_either_accepted_in_range_or_refused(name: str, value: float) -> None:
    if math.isfinite(value) and 0 <= value <= MAX_VALUES[name]:
        check_sample(one(name, value), now=NOW)
        return
    with pytest.raises(InvalidSample) as err:
        check_sample(one(name, value), now=NOW)
    assert err.value.reason in {"non_finite_value", "negative_value", "out_of_range"}
