"""Checks on incoming samples: what the analyzer refuses to score, and why. Pure.

Each rejection carries a reason code from :data:`REJECT_REASONS` (a bounded set, used
as a metric label) and a message naming the node, the signal and the value.
"""

from __future__ import annotations

import functools
import math
import re
import sys

from mco_py.errors import MCOError
from mco_py.model import CLASS_SIGNALS, Sample

#: Every reason code a sample can be rejected with (metric label values).
REJECT_REASONS: tuple[str, ...] = (
    "invalid_node_name",
    "non_finite_value",
    "negative_value",
    "out_of_range",
    "future_timestamp",
    "past_timestamp",
    "out_of_order",
    "duplicate_signal",
    "unauthorized_node",
    "invalid_events",
    "too_many_nodes",
    "oversize_message",
    "malformed_sample",
)

#: Upper bounds per signal (inclusive); every signal must also be >= 0.
MAX_VALUES: dict[str, float] = {
    "psiCpuSomeAvg10": 100.0,
    "psiMemorySomeAvg10": 100.0,
    "psiMemoryFullAvg10": 100.0,
    "psiIoSomeAvg10": 100.0,
    "psiIoFullAvg10": 100.0,
    "psiCpuSomeRate": 100.0,
    "psiMemorySomeRate": 100.0,
    "psiMemoryFullRate": 100.0,
    "psiIoSomeRate": 100.0,
    "psiIoFullRate": 100.0,
    "llcMissRate": 1.0,
    "bioLatencyP99Ms": 3_600_000.0,
    "cpuStealPercent": 100.0,
    "oomKills": 1_000_000.0,
    **dict.fromkeys(CLASS_SIGNALS, 100.0),
}

_LARGEST = sys.float_info.max
"""The bound of a signal not in :data:`MAX_VALUES` (so infinity fails the one-comparison check)."""

MAX_NODE_NAME = 253
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class InvalidSample(MCOError):
    """A sample the analyzer will not score. ``reason`` is one of :data:`REJECT_REASONS`."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


def node_name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid Kubernetes node name (DNS-1123 subdomain), or None.

    Cached (hot path) only for names of valid length: at most 65,536 names of at most 253
    characters (≈ 20 MB at worst), whatever names a peer sends.
    """
    if len(name) > MAX_NODE_NAME:
        return f"node name is {len(name)} characters long; at most {MAX_NODE_NAME} are allowed"
    return _short_name_problem(name)


@functools.lru_cache(maxsize=65536)
def _short_name_problem(name: str) -> str | None:
    if not name:
        return "node name is empty; set the collector's --node-name"
    if not _DNS1123_SUBDOMAIN.fullmatch(name):
        return (
            f"node name {name[:80]!r} is not a DNS-1123 subdomain "
            "(lower-case letters, digits, '-' and '.', starting and ending with a letter or digit)"
        )
    return None


def _check_head(node: str, ts: float, *, now: float, max_future: float, max_age: float) -> None:
    """The checks of :func:`check_sample` on a sample's node name and time."""
    problem = node_name_problem(node)
    if problem:
        raise InvalidSample("invalid_node_name", problem)
    if not math.isfinite(ts) or ts > now + max_future:
        raise InvalidSample(
            "future_timestamp",
            f"node {node}: sample time is {ts - now:.0f}s ahead of the analyzer clock "
            f"(at most {max_future:g}s allowed); check the node's clock (NTP)",
        )
    if ts < now - max_age:
        raise InvalidSample(
            "past_timestamp",
            f"node {node}: sample is {now - ts:.0f}s old (at most {max_age:g}s allowed); "
            "check the node's clock or the collector's send buffer",
        )


def check_sample(sample: Sample, *, now: float, max_future: float = 300.0, max_age: float = 300.0) -> None:
    """Raise :class:`InvalidSample` if ``sample`` must not be scored.

    ``now`` is the analyzer's clock; samples more than ``max_future`` seconds ahead of it
    or more than ``max_age`` seconds behind it are refused. Unknown signal names are
    allowed (newer collectors) and ignored by scoring.
    """
    _check_head(sample.node, sample.timestamp, now=now, max_future=max_future, max_age=max_age)
    for name, count in sample.events.items():
        if count < 0:
            raise InvalidSample("invalid_events", f"node {sample.node}: {name} has a negative event count")
    limits = MAX_VALUES
    for name, value in sample.values.items():
        # one comparison in the common case (NaN fails it too); explain only on failure
        if 0.0 <= value <= limits.get(name, _LARGEST):
            continue
        if not math.isfinite(value):
            raise InvalidSample("non_finite_value", f"node {sample.node}: {name}={value} is not a finite number")
        if value < 0:
            raise InvalidSample("negative_value", f"node {sample.node}: {name}={value:g} is negative")
        limit = MAX_VALUES.get(name)
        if limit is not None and value > limit:
            raise InvalidSample("out_of_range", f"node {sample.node}: {name}={value:g} is above its maximum {limit:g}")
