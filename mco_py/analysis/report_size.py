"""Keep the report under the Kubernetes API / etcd request size limit. Pure.

etcd refuses requests above 1.5 MiB (``--max-request-bytes`` default 1,572,864). The
whole object travels in one request, so the ``status`` must stay well below that; the
default budget leaves room for metadata and the JSON envelope.

Order of sacrifice, least useful first: the detail (``dimensions``, ``signals`` and
``reasons``; a node's ``dominant`` stays) of None
nodes (lowest score first), then of Low, Unknown, Medium and High nodes; only when even
bare entries do not fit are whole nodes left out (None nodes first, lowest score first).
Stripped nodes are counted in ``Report.detail_dropped``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import msgspec

from mco_py.analysis.status import Cached, StatusCache, bare_entry, envelope, has_detail, new_assessment, summary
from mco_py.model import Level, NodeAssessment, Report

#: etcd's default request size limit.
ETCD_REQUEST_LIMIT = 1_572_864
#: Default budget for the serialized status (the rest is for metadata and envelope).
DEFAULT_STATUS_BUDGET = 1_400_000

_STRIP_ORDER = (Level.NONE, Level.LOW, Level.UNKNOWN, Level.MEDIUM, Level.HIGH)
_STRIP_RANK_BY_TEXT = {level.value: i for i, level in enumerate(_STRIP_ORDER)}


_NON_ASCII = bytes(range(128, 256))


def encoded_size(doc: object) -> int:
    """Bytes of ``doc`` as the Kubernetes client sends it (compact JSON, non-ASCII as ``\\uXXXX``).

    Encodes with msgspec (fast) and accounts for the escapes: each non-ASCII UTF-8 byte
    costs at most 2 more bytes once escaped (3-byte char -> 6, 2-byte -> 6, 4-byte -> 12).
    """
    data = msgspec.json.encode(doc)
    return len(data) + 2 * (len(data) - len(data.translate(None, _NON_ASCII)))


class Fitted:
    """The report that fits, and what it took."""

    __slots__ = ("_make", "_report", "detail_dropped", "nodes_dropped", "size", "status")

    def __init__(
        self,
        report: Report,
        size: int,
        nodes_dropped: tuple[str, ...] = (),
        status: dict[str, Any] | None = None,
    ) -> None:
        self._report: Report | None = report
        self._make: Callable[[], Report] | None = None
        self.size = size
        """Encoded size of the status, bytes."""
        self.nodes_dropped = nodes_dropped
        """Nodes left out entirely (only when bare entries do not fit)."""
        self.status = status
        """``report_to_status(report)``, already built while measuring (stores reuse it); None if not built."""
        self.detail_dropped = report.detail_dropped
        """``report.detail_dropped``."""

    @classmethod
    def deferred(
        cls,
        make: Callable[[], Report],
        size: int,
        nodes_dropped: tuple[str, ...],
        status: dict[str, Any],
        detail_dropped: int,
    ) -> Fitted:
        """A result whose ``report`` is made by ``make()`` when first asked for: the analyzer writes
        ``status`` and reads only ``detail_dropped``, so the stripped assessments of thousands of
        nodes need not be made every interval."""
        fitted: Fitted = cls.__new__(cls)
        fitted._report, fitted._make = None, make
        fitted.size, fitted.nodes_dropped, fitted.status = size, nodes_dropped, status
        fitted.detail_dropped = detail_dropped
        return fitted

    @property
    def report(self) -> Report:
        """The fitted report (stripped assessments where detail was dropped, nodes left out removed)."""
        report = self._report
        if report is None:
            assert self._make is not None  # one of the two is always set
            report = self._report = self._make()
            self._make = None
        return report


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


def _rest(record: Callable[[int], Cached], indexes: Iterable[int], sized: Callable[[object], int], room: int) -> int:
    """Detail bytes of the records of ``indexes`` if they fit in ``room`` together (the whole report may
    still fit without the margin), else -1 — found out without sizing every record when they do not."""
    total = 0
    for i in indexes:
        total += record(i).detail(sized)
        if total > room:
            return -1
    return total


def fit_report(
    report: Report,
    budget: int = DEFAULT_STATUS_BUDGET,
    *,
    cache: StatusCache | None = None,
    rounded: Sequence[dict[str, float] | None] | None = None,
    bare: Sequence[dict[str, Any]] | None = None,
) -> Fitted:
    """``report`` unchanged when its status fits ``budget`` bytes, else with detail stripped.

    With ``cache`` the full entries and detail sizes of unchanged assessments are reused from
    earlier calls (same result as without). ``rounded``: as for :meth:`StatusCache.records`.
    ``bare``: ``bare_entry(item)`` of each item of ``report.nodes``, in order, when the caller
    has them (:meth:`~mco_py.analysis.scoring.Scorer.assess` keeps them); else made here.

    Equivalent to stripping in sacrifice order until the size fits, but computed from the
    other end: start from every entry stripped and give the detail back to the most
    important nodes while it fits, so the full entries (signals rounded, reasons formatted)
    of the nodes whose detail is dropped anyway are never made.
    """
    cache = StatusCache() if cache is None else cache
    nodes = report.nodes
    if bare is None:
        bare = [bare_entry(item) for item in nodes]
    examined: dict[int, Cached] = {}  # full records, made only for the nodes whose detail is weighed

    def record(i: int) -> Cached:
        rec = examined.get(i)
        if rec is None:
            rec = examined[i] = cache.record(nodes[i], None if rounded is None else rounded[i])
        return rec

    head = envelope(report)
    margin = 32  # the summary grows by a few digits at most
    # size with every detail stripped (compact JSON: bare entries joined by commas)
    size = encoded_size({**head, "nodes": bare})
    order = _SacrificeOrder(nodes)
    detailed = [has_detail(item) for item in nodes]
    keep = [not d for d in detailed]  # entries shown in full (without detail the bare one is the full one)
    pending = 0  # detail bytes of the records not kept
    with_detail = (i for i in order.most_important_first() if detailed[i])
    for i in with_detail:
        detail = record(i).detail(encoded_size)
        if size + detail + margin > budget:
            pending = _rest(record, itertools.chain((i,), with_detail), encoded_size, budget - size)
            break
        size += detail
        keep[i] = True
    full = size + pending if pending >= 0 else -1
    if 0 <= full <= budget:
        status = {**head, "nodes": [record(i).entry if d else bare[i] for i, d in enumerate(detailed)]}
        cache.end_round()
        return Fitted(report, full, status=status)
    cache.end_round()
    entries = [examined[i].entry if k and d else bare[i] for i, (k, d) in enumerate(zip(keep, detailed, strict=True))]
    stripped = len(keep) - sum(keep)
    dropped: list[str] = []
    kept: list[bool] | None = None
    if size + margin > budget:
        least_first = list(order.least_important_first())
        kept, size = _leave_out(least_first, entries, size, budget - margin)
        dropped = [nodes[i].name for i in least_first if not kept[i]]
        entries = [e for e, k in zip(entries, kept, strict=True) if k]
        counts = summary([n for n, k in zip(nodes, kept, strict=True) if k], stripped)
    else:  # every node stays: the envelope's counts, with the stripped ones
        counts = {**head["summary"], "detailDropped": stripped}
    status = {**head, "summary": counts, "nodes": entries}

    def fitted() -> Report:  # the stripped assessments (same levels, names and order as the entries)
        items = [item if keep[i] else _stripped(item) for i, item in enumerate(nodes)]
        if kept is not None:
            items = [n for n, k in zip(items, kept, strict=True) if k]
        return dataclasses.replace(report, nodes=tuple(items), detail_dropped=stripped)

    return Fitted.deferred(fitted, size + len(str(stripped)), tuple(dropped), status, stripped)


def _leave_out(order: list[int], entries: list[dict[str, Any]], size: int, limit: int) -> tuple[list[bool], int]:
    """Which entries stay when whole ones are left out in ``order`` until ``size`` is within ``limit``;
    and the size then."""
    kept = [True] * len(entries)
    for i in order:
        if size <= limit:
            break
        kept[i] = False
        size -= encoded_size(entries[i]) + 1
    return kept, size


def _stripped(item: NodeAssessment) -> NodeAssessment:
    """``item`` without dimensions, signals and reasons (its dominant dimension stays)."""
    return new_assessment(
        item.name, item.level, item.score, last_sample_time=item.last_sample_time, dominant=item.dominant
    )
