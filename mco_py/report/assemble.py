"""A sharded report read back: the report object's index, each shard object decoded once, and the
whole put together, by one-shot readers (:func:`compose`) and by watching ones
(:class:`ShardAssembler`). Pure. What is written, and why: :mod:`mco_py.report.shards`.

A state is whole when every shard of the generation the report object names has reached the
version it lists; ``changes`` are then laid over the shards' entries. A reader never uses a
state that is not whole, so no node is ever missing or duplicated.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeGuard

from mco_py.errors import ReportError
from mco_py.model import NO_DIMENSIONS, NodeAssessment, Report
from mco_py.report.document import assessment_of
from mco_py.report.shards import SHARD_KIND, ShardIndex, parse_change, shard_index


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def index_of(status: Mapping[str, Any]) -> ShardIndex | None:
    """The ``status.shards`` of a report object (None: the report is inline). Raises :class:`ReportError`."""
    raw = status.get("shards")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ReportError("status.shards: expected an object with generation, count, versions and changes")
    generation, count = raw.get("generation"), raw.get("count")
    if not _whole(generation):
        raise ReportError("status.shards.generation: expected a whole number >= 0")
    if not _whole(count) or count & (count - 1):
        raise ReportError("status.shards.count: expected 0 or a power of two")
    if not count:
        return None
    versions = raw.get("versions")
    if not isinstance(versions, list) or len(versions) != count or not all(_whole(v) for v in versions):
        raise ReportError(f"status.shards.versions: expected {count} whole numbers, one per shard")
    changes = raw.get("changes") or {}
    if not isinstance(changes, Mapping) or not all(v is None or isinstance(v, str) for v in changes.values()):
        raise ReportError('status.shards.changes: expected an object of node name -> "level score [dominant]" or null')
    return ShardIndex(generation, count, tuple(versions), changes)


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
    """Why the shard could not be decoded (its nodes are then empty)."""


def shard_of(obj: Mapping[str, Any]) -> Shard:
    """Decode a ``NodeInterferenceReportShard`` object; a bad one comes back with its ``problem`` set."""
    meta = obj.get("metadata")
    name = str(meta.get("name", "")) if isinstance(meta, Mapping) else ""
    spec = obj.get("spec")
    numbers = [spec.get(key) for key in ("generation", "index", "count")] if isinstance(spec, Mapping) else []
    whole = [n for n in numbers if _whole(n)]
    if len(whole) != 3:
        return Shard(
            name, -1, -1, 0, 0, {}, f"{SHARD_KIND} {name}: spec: generation, index and count must be whole numbers >= 0"
        )
    generation, index, count = whole
    status = obj.get("status")
    raw = status.get("nodes") if isinstance(status, Mapping) else None
    if raw is None or not isinstance(status, Mapping):  # created, status not written yet
        return Shard(name, generation, index, count, 0, {}, f"{SHARD_KIND} {name} has no status yet")
    version = status.get("version")
    try:
        if not _whole(version):
            raise ReportError("status.version: expected a whole number >= 0")
        if not isinstance(raw, Mapping):
            raise ReportError("status.nodes: expected an object of node name -> entry")
        nodes = {str(key): assessment_of(entry, f"status.nodes[{key}]") for key, entry in raw.items()}
    except ReportError as exc:
        return Shard(name, generation, index, count, 0, {}, f"{SHARD_KIND} {name}: {exc}")
    return Shard(name, generation, index, count, int(version), nodes)


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
    return replace(old, level=change.level, score=change.score, dominant=change.dominant, dimensions=NO_DIMENSIONS)


def overlay(by_name: dict[str, NodeAssessment], changes: Mapping[str, str | None]) -> None:
    """Lay ``changes`` over the shards' nodes (in place): a changed node keeps its shard's signals and
    reasons with its new level, score and dominant dimension (:func:`_changed`); null removes it."""
    for name, text in changes.items():
        if text is None:
            by_name.pop(name, None)
            continue
        change = parse_change(name, text)
        old = by_name.get(name)
        by_name[name] = change if old is None else _changed(old, change)


def compose(head: Report, index: ShardIndex, shards: Iterable[Shard]) -> Report:
    """The whole report: ``head`` (the report object's envelope) with the nodes of ``index``'s
    generation and its changes, sorted by name. Raises :class:`ReportError` when a shard is missing,
    behind or unreadable."""
    mine = _of_generation(index, shards)
    problem = _lacking(index, mine)
    if problem:
        raise ReportError(problem)
    by_name = {n.name: n for s in mine.values() for n in s.nodes.values()}
    overlay(by_name, index.changes)
    nodes = sorted(by_name.values(), key=lambda n: n.name)
    return Report(head.last_update_time, head.analyzer_identity, head.rules_version, tuple(nodes), head.detail_dropped)


class ShardedNodes(Mapping[str, NodeAssessment]):
    """The nodes of a sharded report as one read-only map, without copying them: each shard's own map,
    found by the node name's hash, under the changes laid over them."""

    __slots__ = ("_changed", "_count", "_len", "_shards")

    def __init__(
        self, shards: Sequence[Mapping[str, NodeAssessment]], changed: Mapping[str, NodeAssessment | None]
    ) -> None:
        self._shards = tuple(shards)
        self._count = len(self._shards)
        self._changed = changed
        size = sum(len(m) for m in self._shards)
        for name, item in changed.items():
            present = name in self._shards[shard_index(name, self._count)]
            size += (item is not None) - present
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
        self._laid: dict[str, tuple[NodeAssessment | None, str, NodeAssessment]] = {}
        """Each changed node's last overlay: (shard entry, change line, result), reused while both hold."""
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
            changed = self._overlay(maps, index.changes, index.count)
        except ReportError as exc:
            self.problem = str(exc)
            return
        envelope = Report(head.last_update_time, head.analyzer_identity, head.rules_version)
        self._served = (envelope, ShardedNodes(maps, changed))

    def _overlay(
        self, maps: list[Mapping[str, NodeAssessment]], changes: Mapping[str, str | None], count: int
    ) -> dict[str, NodeAssessment | None]:
        """The changed nodes as :func:`overlay` makes them, each result reused while its shard entry and
        change line are the same (every shard event lays the changes again; most did not move)."""
        laid: dict[str, tuple[NodeAssessment | None, str, NodeAssessment]] = {}
        last = self._laid
        out: dict[str, NodeAssessment | None] = {}
        for name, text in changes.items():
            if text is None:
                out[name] = None
                continue
            old = maps[shard_index(name, count)].get(name)
            kept = last.get(name)
            if kept is not None and kept[0] is old and kept[1] == text:
                result = kept[2]
            else:
                change = parse_change(name, text)
                result = change if old is None else _changed(old, change)
            out[name] = result
            laid[name] = (old, text, result)
        self._laid = laid
        return out
