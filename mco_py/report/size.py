"""Keep the report under the Kubernetes API / etcd request size limit. Pure.

etcd refuses requests above 1.5 MiB (``--max-request-bytes`` default 1,572,864). The
whole object travels in one request, so the ``status`` must stay well below that; the
default budget leaves room for metadata and the JSON envelope.

Order of sacrifice, least useful first: the detail (``dimensions``, ``signals`` and
``reasons``; a node's ``dominant`` stays) of None nodes (lowest score first), then of Low,
Unknown, Medium and High nodes; only when even bare entries do not fit are whole nodes
left out (None nodes first, lowest score first). Stripped nodes are counted in
``status.summary.detailDropped``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from msgspec.structs import replace

from mco_py.model import Level, NodeAssessment, Report
from mco_py.report.cache import Record
from mco_py.report.document import Entry, Status, encoded_size, envelope, summary

if TYPE_CHECKING:
    from mco_py.report.shards import ShardPlan

#: etcd's default request size limit.
ETCD_REQUEST_LIMIT = 1_572_864
#: Default budget for the serialized status (the rest is for metadata and envelope).
DEFAULT_STATUS_BUDGET = 1_400_000

_STRIP_ORDER = (Level.NONE, Level.LOW, Level.UNKNOWN, Level.MEDIUM, Level.HIGH)
_STRIP_RANK_BY_TEXT = {level.value: i for i, level in enumerate(_STRIP_ORDER)}
_MARGIN = 32
"""Bytes kept free while giving detail back: the summary grows by a few digits at most."""


@dataclass(frozen=True, slots=True)
class Fitted:
    """A built status document and what fitting it took."""

    status: Status
    """The status document; its entries are shared with other reports."""
    size: int = 0
    """Encoded size of ``status``, bytes (0: not measured, no budget)."""
    detail_dropped: int = 0
    """Nodes shown without their detail."""
    nodes_dropped: tuple[str, ...] = ()
    """Nodes left out entirely (only when bare entries do not fit)."""
    shards: ShardPlan | None = None
    """A sharded report's shard writes (``status`` is then the report object's index)."""


class _SacrificeOrder:
    """Node indexes in sacrifice order (level as :data:`_STRIP_ORDER`, then score, then name), each
    level sorted only when reached: the fit walks from the most important end and usually stops
    within the first levels, so the thousands of None nodes are seldom sorted."""

    def __init__(self, nodes: Sequence[NodeAssessment]) -> None:
        self._nodes = nodes
        self._levels: list[list[int]] = [[] for _ in _STRIP_ORDER]
        levels, rank = self._levels, _STRIP_RANK_BY_TEXT  # by level text: hashing an enum member runs Python code
        for i, item in enumerate(nodes):
            levels[rank[item.level._value_]].append(i)

    def _sorted(self, indexes: list[int]) -> list[int]:
        nodes = self._nodes
        return sorted(indexes, key=lambda i: (nodes[i].score, nodes[i].name))

    def most_important_first(self) -> Iterator[int]:
        for indexes in reversed(self._levels):
            yield from reversed(self._sorted(indexes))

    def least_important_first(self) -> Iterator[int]:
        for indexes in self._levels:
            yield from self._sorted(indexes)


def _rest(records: Sequence[Record], indexes: Iterable[int], room: int) -> int:
    """Detail bytes of the records of ``indexes`` if they fit in ``room`` together (the whole report may
    still fit without the margin), else -1 — found out without sizing every record when they do not."""
    total = 0
    for i in indexes:
        total += records[i].detail
        if total > room:
            return -1
    return total


def fit(report: Report, records: Sequence[Record], budget: int) -> Fitted:
    """The status of ``report`` (``records``: one per node, in order) within ``budget`` bytes: every
    entry in full when that fits, else with detail stripped in sacrifice order.

    Equivalent to stripping in sacrifice order until the size fits, but computed from the
    other end: start from every entry stripped and give the detail back to the most
    important nodes while it fits, so the full entries (signals rounded, reasons formatted)
    of the nodes whose detail is dropped anyway are never made.
    """
    nodes = report.nodes
    head = envelope(report)
    size = encoded_size(replace(head, nodes=[rec.bare for rec in records]))  # every detail stripped
    order = _SacrificeOrder(nodes)
    detailed = [rec.has_detail for rec in records]
    keep = [not d for d in detailed]  # entries shown in full (without detail, bare is full)
    pending = 0  # detail bytes of the records not kept
    with_detail = (i for i in order.most_important_first() if detailed[i])
    for i in with_detail:
        detail = records[i].detail
        if size + detail + _MARGIN > budget:
            pending = _rest(records, itertools.chain((i,), with_detail), budget - size)
            break
        size += detail
        keep[i] = True
    full = size + pending if pending >= 0 else -1
    if 0 <= full <= budget:
        return Fitted(replace(head, nodes=[rec.full for rec in records]), full)
    entries = [rec.full if k else rec.bare for rec, k in zip(records, keep, strict=True)]
    stripped = len(keep) - sum(keep)
    dropped: tuple[str, ...] = ()
    if size + _MARGIN > budget:
        least_first = list(order.least_important_first())
        kept, size = _leave_out(least_first, entries, size, budget - _MARGIN)
        dropped = tuple(nodes[i].name for i in least_first if not kept[i])
        entries = [e for e, k in zip(entries, kept, strict=True) if k]
        counts = summary([n for n, k in zip(nodes, kept, strict=True) if k], stripped)
    else:  # every node stays: the envelope's counts, with the stripped ones
        counts = replace(head.summary, detail_dropped=stripped)
    status = replace(head, summary=counts, nodes=entries)
    return Fitted(status, size + len(str(stripped)), stripped, dropped)


def _leave_out(order: list[int], entries: list[Entry], size: int, limit: int) -> tuple[list[bool], int]:
    """Which entries stay when whole ones are left out in ``order`` until ``size`` is within ``limit``;
    and the size then."""
    kept = [True] * len(entries)
    for i in order:
        if size <= limit:
            break
        kept[i] = False
        size -= encoded_size(entries[i]) + 1
    return kept, size
