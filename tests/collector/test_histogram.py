"""The kernel-layout latency histogram and its percentile."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mco_py.collector.histogram import latency_slot, percentile_us, slot_bounds


@given(st.integers(0, 2**40))
def test_slot_contains_value(us: int) -> None:
    low, high = slot_bounds(latency_slot(us))
    assert low <= us < high
    assert high - low <= max(1.0, us / 4 + 1)  # at most ~25 % wide


@given(st.integers(0, 2**40), st.integers(0, 2**40))
def test_slots_are_monotonic(a: int, b: int) -> None:
    if a <= b:
        assert latency_slot(a) <= latency_slot(b)


def test_known_slots() -> None:
    # Same numbers as the BPF program: 48 us -> slot 18 = [48, 56).
    assert latency_slot(48) == 18
    assert slot_bounds(18) == (48.0, 56.0)
    assert slot_bounds(latency_slot(3)) == (3.0, 4.0)


def test_percentile_interpolates_inside_slot() -> None:
    counts = {latency_slot(100): 99, latency_slot(10_000): 1}
    p99 = percentile_us(counts, 0.99)
    assert p99 is not None
    low, high = slot_bounds(latency_slot(100))
    assert low <= p99 <= high
    p100 = percentile_us(counts, 1.0)
    assert p100 is not None
    assert slot_bounds(latency_slot(10_000))[0] <= p100 <= slot_bounds(latency_slot(10_000))[1]
    assert percentile_us({}, 0.99) is None
    with pytest.raises(ValueError, match="quantile"):
        percentile_us(counts, 0.0)


@given(st.lists(st.integers(0, 10**7), min_size=1, max_size=300))
def test_percentile_close_to_exact(values: list[int]) -> None:
    counts: dict[int, int] = {}
    for v in values:
        counts[latency_slot(v)] = counts.get(latency_slot(v), 0) + 1
    estimate = percentile_us(counts, 0.99)
    assert estimate is not None
    exact = sorted(values)[max(0, -(-len(values) * 99 // 100) - 1)]
    low, high = slot_bounds(latency_slot(exact))
    assert low <= estimate <= high
