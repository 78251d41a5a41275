"""A sharded report read back: the report object's index, each shard object decoded once, and the
whole put together, by one-shot readers (:func:`compose`) and by watching ones
(:class:`ShardAssembler`). Pure. What is written, and why: :mod:`mco_py.report.shards`.

A state is whole when every shard of the generation the report object names has reached the
version it lists; ``changes`` are then laid over the shards' entries. A reader never uses a
state that is not whole, so no node is ever missing or duplicated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from mco_py.errors import ReportError
from mco_py.model import NO_DIMENSIONS, NodeAssessment, Report
from mco_py.report.document import Entry, ShardHead, ShardIndex, ShardStatus, Status, assessment_of, decode
from mco_py.report.shards import SHARD_KIND, parse_change, shard_index


def index_of(status: Status) -> ShardIndex | None:
    """The shard index of a report's status (None: the report is inline)."""
    shards = status.shards
    return shards if shards and shards.count else None


@dataclass(frozen=True, slots=True)
class Shard:
    """One shard object as a reader holds it: decoded once, when it arrives."""

    name: str
    generation: int
    index: int
    count: int
    version: int
    nodes: Mapping[str, NodeAssessment]
    """Node name -> assessment (never changed once made)."""
    problem: str = ""
    """Why the shard could not be decoded (its nodes are then empty); empty for a shard created and
    not yet written (version 0: behind any version a report names)."""


def shard_of(obj: object) -> Shard:
    """Decode a ``NodeInterferenceReportShard`` object (plain data); a bad one comes back with its
    ``problem`` set (and, when its spec could be read, its generation and index)."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = str(meta.get("name", "")) if isinstance(meta, Mapping) else ""
    try:
        spec = decode(obj, ShardHead, "").spec
    except ReportError as exc:
        return Shard(name, -1, -1, 0, 0, {}, f"{SHARD_KIND} {name}: {exc}")
    raw = obj.get("status") if isinstance(obj, Mapping) else None
    if not isinstance(raw, Mapping) or raw.get("nodes") is None:  # created, not written yet: behind, version 0
        return Shard(name, spec.generation, spec.index, spec.count, 0, {})
    try:
        status = decode(raw, ShardStatus, "status")
        nodes = {key: assessment_of(item, f"status.nodes[{key}]") for key, item in status.nodes.items()}
    except ReportError as exc:
        problem = f"{SHARD_KIND} {name}: {_bad_entry(raw.get('nodes')) or exc}"
        return Shard(name, spec.generation, spec.index, spec.count, 0, {}, problem)
    return Shard(name, spec.generation, spec.index, spec.count, status.version, nodes)


def _bad_entry(raw: object) -> str:
    """The first bad entry's problem, naming its node (msgspec names no map key); empty when the
    entries are not what is wrong."""
    if not isinstance(raw, Mapping):
        return ""
    for key, item in raw.items():
        try:
            decode(item, Entry, f"status.nodes[{key}]")
        except ReportError as exc:
            return str(exc)
    return ""


def _lacking(index: ShardIndex, mine: Mapping[int, Shard]) -> str:
    """Why ``index``'s generation cannot be served from ``mine`` (its shards by index); empty when it can."""
    bad = [s.problem for s in mine.values() if s.problem]
    if bad:
        return bad[0]
    behind = [k for k in range(index.count) if k not in mine or mine[k].version < index.versions[k]]
    if not behind:
        return ""
    shown = ", ".join(str(k) for k in behind[:8]) + (", ..." if len(behind) > 8 else "")
    return (
        f"report generation {index.generation} is incomplete: {len(behind)} of {index.count} shards missing "
        f"or older than the report names ({shown}); the analyzer may be writing them"
    )


def _of_generation(index: ShardIndex, shards: Iterable[Shard]) -> dict[int, Shard]:
    return {s.index: s for s in shards if s.generation == index.generation and s.count == index.count}


def _changed(old: NodeAssessment, change: NodeAssessment) -> NodeAssessment:
    """``old`` (its shard's entry) with the level, score and dominant dimension of ``change``. Its
    dimensions go: they are as old as the shard, and without them a pod's sensitivity is judged
    by the node score (:func:`~mco_py.analysis.policy.pod_interference`)."""
    return msgspec.structs.replace(
        old, level=change.level, score=change.score, dominant=change.dominant, dimensions=NO_DIMENSIONS
    )


Laid = dict[str, tuple[NodeAssessment | None, str, NodeAssessment]]
"""Each changed node's overlay: (its shard's entry, the change line, the result)."""


def lay(
    changes: Mapping[str, str | None], held: Callable[[str], NodeAssessment | None], last: Laid
) -> tuple[dict[str, NodeAssessment | None], Laid]:
    """The changed nodes: each one's shard entry (``held``) with the level, score and dominant dimension
    of its change line (:func:`_changed`), or None for a node gone; and what was laid, for the next
    call. A result in ``last`` is reused while its shard entry and change line are the same (a
    watching reader lays the changes again on every shard event; most did not move)."""
    laid: Laid = {}
    out: dict[str, NodeAssessment | None] = {}
    for name, text in changes.items():
        if text is None:
            out[name] = None
            continue
        old = held(name)
        kept = last.get(name)
        if kept is not None and kept[0] is old and kept[1] == text:
            result = kept[2]
        else:
            change = parse_change(name, text)
            result = change if old is None else _changed(old, change)
        out[name] = result
        laid[name] = (old, text, result)
    return out, laid


def gather(index: ShardIndex, shards: Iterable[Shard]) -> tuple[dict[str, NodeAssessment], str]:
    """The nodes of ``index``'s generation, by name, with its changes laid over, from the shards there
    are; and why they are not the whole report (empty when they are). Raises :class:`ReportError`
    for a bad change line."""
    mine = _of_generation(index, shards)
    problem = _lacking(index, mine)
    by_name = {n.name: n for s in mine.values() for n in s.nodes.values()}
    changed, _ = lay(index.changes, by_name.get, {})
    for name, item in changed.items():
        if item is None:
            by_name.pop(name, None)
        else:
            by_name[name] = item
    return by_name, problem


def compose(head: Report, index: ShardIndex, shards: Iterable[Shard]) -> Report:
    """The whole report: ``head`` (the report object's envelope) with the nodes of ``index``'s
    generation and its changes, sorted by name. Raises :class:`ReportError` when a shard is missing,
    behind or unreadable."""
    by_name, problem = gather(index, shards)
    if problem:
        raise ReportError(problem)
    nodes = sorted(by_name.values(), key=lambda n: n.name)
    return Report(head.last_update_time, head.analyzer_identity, head.rules_version, tuple(nodes), head.detail_dropped)


class ShardedNodes(Mapping[str, NodeAssessment]):
    """The nodes of a sharded report as one read-only map, without copying them: each shard's own map,
    found by the node name's hash, under the changes laid over them."""

    __slots__ = ("_changed", "_count", "_len", "_shards")

    def __init__(
        self,
        shards: Sequence[Mapping[str, NodeAssessment]],
        changed: Mapping[str, NodeAssessment | None],
        size: int | None = None,
    ) -> None:
        """``size``: the number of nodes, when the caller knows it (else counted from the changes)."""
        self._shards = tuple(shards)
        self._count = len(self._shards)
        self._changed = changed
        if size is None:
            size = sum(len(m) for m in self._shards)
            for name, item in changed.items():
                held = self._shards[shard_index(name, self._count)].get(name)
                size += (item is not None) - (held is not None)
        self._len = size

    def get(self, name: str, default: Any = None) -> Any:
        if name in self._changed:
            item = self._changed[name]
            return default if item is None else item
        return self._shards[shard_index(name, self._count)].get(name, default)

    def __getitem__(self, name: str) -> NodeAssessment:
        item = self.get(name)
        if item is None:
            raise KeyError(name)
        return item  # type: ignore[no-any-return]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[str]:
        changed = self._changed
        for m in self._shards:
            for name in m:
                if name not in changed:
                    yield name
        for name, item in changed.items():
            if item is not None:
                yield name

    def __len__(self) -> int:
        return self._len


@dataclass(frozen=True, slots=True)
class _Laid:
    """The changes of ``index`` laid over ``maps`` (each shard's nodes): the result by name, the
    changed names of each shard, and how many nodes each shard's changes add (or remove)."""

    index: ShardIndex
    maps: list[Mapping[str, NodeAssessment]]
    changed: dict[str, NodeAssessment | None]
    by_shard: dict[int, list[str]]
    delta: list[int]


_WHERE_LIMIT = 262_144
"""Names whose shard the assembler remembers before it starts afresh (four times the most nodes)."""


class ShardAssembler:
    """A reader's view of a sharded report: the newest complete generation, updated shard by shard.

    Feed it the report object's decoded envelope and index (:meth:`set_head`) and every shard
    object the reader holds (:meth:`set_shards`); :meth:`report` is then the report to serve. A
    state is served only when every shard of the index's generation has reached the version the
    index names; until then the last state served stays (never a node missing, never doubled),
    dated by the report object it came with, so a generation that never completes ages out
    with the reader's TTL. An update costs its shard's and the changes' size, never the whole
    report's. Not thread-safe: callers hold a lock.
    """

    def __init__(self) -> None:
        self._head: Report | None = None
        self._index: ShardIndex | None = None
        self._shards: Mapping[str, Shard] = {}
        self._served: tuple[Report, ShardedNodes] | None = None
        self._laid: Laid = {}
        """The changes laid last (:func:`lay`)."""
        self._where: dict[str, int] = {}
        """Shard of each changed node's name, for ``_where_count`` shards."""
        self._where_count = 0
        self._last: _Laid | None = None
        """The changes as laid for the state served last."""
        self.problem = ""
        """Why the newest state is not served (empty when it is)."""

    def set_head(self, head: Report, index: ShardIndex) -> None:
        self._head, self._index = head, index
        self._apply()

    def set_shards(self, shards: Mapping[str, Shard]) -> None:
        self._shards = shards
        self._apply()

    def report(self) -> tuple[Report, ShardedNodes] | None:
        """The served report's envelope (its ``nodes`` empty: they are in the map) and its nodes by
        name; None before a generation is complete."""
        return self._served

    def _apply(self) -> None:
        index, head = self._index, self._head
        if index is None or head is None:
            return
        mine = _of_generation(index, self._shards.values())
        self.problem = _lacking(index, mine)
        if self.problem:
            return
        maps = [mine[k].nodes for k in range(index.count)]
        try:
            laid = self._lay(index, maps)
        except ReportError as exc:
            self.problem = str(exc)
            return
        self._last = laid
        envelope = Report(head.last_update_time, head.analyzer_identity, head.rules_version)
        size = sum(len(m) for m in maps) + sum(laid.delta)
        self._served = (envelope, ShardedNodes(maps, laid.changed, size))

    def _lay(self, index: ShardIndex, maps: list[Mapping[str, NodeAssessment]]) -> _Laid:
        """The changes laid over ``maps``: all of them for a new index; for the same index, only those
        of the shards that changed since the last state served (a shard event costs its shard)."""
        count = len(maps)
        if count != self._where_count or len(self._where) > _WHERE_LIMIT:
            self._where, self._where_count = {}, count
        where = self._where

        def locate(name: str) -> int:
            k = where.get(name)
            if k is None:
                k = where[name] = shard_index(name, count)
            return k

        def held(name: str) -> NodeAssessment | None:
            return maps[locate(name)].get(name)

        last = self._last
        fresh = last is None or last.index is not index
        if last is not None and not fresh:
            dirty = [k for k in range(count) if maps[k] is not last.maps[k]]
            names = [name for k in dirty for name in last.by_shard.get(k, ())]
            news, laid = lay({name: index.changes[name] for name in names}, held, self._laid)
            self._laid.update(laid)
            changed = {**last.changed, **news}
            by_shard, delta = last.by_shard, list(last.delta)
            for k in dirty:
                delta[k] = 0
        else:
            news, self._laid = lay(index.changes, held, self._laid)
            changed, by_shard, delta = news, {}, [0] * count
        for name, item in news.items():
            k = locate(name)
            if fresh:
                by_shard.setdefault(k, []).append(name)
            delta[k] += (item is not None) - (maps[k].get(name) is not None)
        return _Laid(index, maps, changed, by_shard, delta)
