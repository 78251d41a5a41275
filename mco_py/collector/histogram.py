"""Latency histogram in the kernel's layout (pure): log2 buckets of microseconds,
each split into 4 linear sub-buckets (``SUB_BITS`` = 2, about 19 % resolution).

``latency_slot`` mirrors ``latency_slot()`` in ``bpf/biolatency.bpf.c``; the
tracefs backend buckets with it too, so both backends quantise the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

SUB_BITS = 2
_SUB = 1 << SUB_BITS


def latency_slot(us: int) -> int:
    """Histogram slot of a latency in whole microseconds."""
    if us < _SUB:
        return max(us, 0)
    lg = us.bit_length() - 1
    return ((lg - SUB_BITS + 1) << SUB_BITS) | ((us >> (lg - SUB_BITS)) & (_SUB - 1))


def slot_bounds(slot: int) -> tuple[float, float]:
    """``[low, high)`` microseconds covered by ``slot``."""
    if slot < _SUB:
        return float(slot), float(slot + 1)
    lg = (slot >> SUB_BITS) + SUB_BITS - 1
    width = 1 << (lg - SUB_BITS)
    low = (1 << lg) + (slot & (_SUB - 1)) * width
    return float(low), float(low + width)


def percentile_us(counts: Mapping[int, int], quantile: float) -> float | None:
    """The ``quantile`` (0-1] of a slot -> count histogram, interpolated inside its slot; None if empty."""
    if not 0.0 < quantile <= 1.0:
        raise ValueError(f"quantile {quantile} must be in (0, 1]")
    total = sum(c for c in counts.values() if c > 0)
    if total == 0:
        return None
    rank = max(1, math.ceil(quantile * total))
    seen = 0
    for slot in sorted(counts):
        count = counts[slot]
        if count <= 0:
            continue
        if seen + count >= rank:
            low, high = slot_bounds(slot)
            return low + (high - low) * (rank - seen) / count
        seen += count
    raise AssertionError("unreachable: rank <= total")  # pragma: no cover


def merge(into: dict[int, int], other: Mapping[int, int]) -> None:
    """Add ``other``'s counts to ``into``."""
    for slot, count in other.items():
        into[slot] = into.get(slot, 0) + count
