"""The sharded report: which shard holds a node, what to write each round, and how a reader puts the
report back together. Pure (no I/O, no clock: times are passed in).

A report whose entries, in full, fit the inline budget is one object, as always. A larger one
is split (docs/architecture.md, "The sharded report"):

- ``NodeInterferenceReportShard/<name>-g<generation>-<index>`` objects hold ``status.nodes``, a map
  of node name to the same entry as inline (:mod:`mco_py.report.document`), and ``status.version``;
- ``NodeInterferenceReport/<name>`` keeps the envelope (summary over every node, heartbeat,
  analyzer), ``nodes: []`` and ``shards``: the generation, the shard count, the version each
  shard must have reached, and ``changes``: the level of each node whose level differs from
  what its shard holds (``"High 87.5 io"``: level, score, dominant), or null for a node gone.

A node's shard is ``crc32(name) mod count`` (``count`` a power of two). The writer
(:class:`ShardPlanner`) writes a shard only whole: when a generation starts, then every
``refresh_seconds`` (staggered over the shards), and sooner for the shards holding most changes
when ``changes`` outgrows its budget. A level change is therefore one small line in the report
object, not a write of the shard: the API server's cost of a write grows with the object's
size, not with the change. A reader (:class:`ShardAssembler`) serves one generation at a time,
and only once each shard has reached its version, with ``changes`` laid over the shards' entries:
no node is ever missing or duplicated.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

from mco_py.errors import ReportError
from mco_py.model import NO_DIMENSIONS, Level, NodeAssessment, Report
from mco_py.report.cache import Record
from mco_py.report.document import assessment_of

#: Largest encoded shard content, bytes: a third of etcd's request limit, room for metadata and
#: for a shard that grows between two checks.
SHARD_LIMIT = 512 * 1024
#: A shard is written whole at least this often (seconds); level changes go to ``changes`` meanwhile.
DEFAULT_REFRESH_SECONDS = 60.0
#: Kind, plural and short name of the shard objects.
SHARD_KIND = "NodeInterferenceReportShard"
SHARD_PLURAL = "nodeinterferencereportshards"
#: Labels on each shard: the report it belongs to and its generation.
REPORT_LABEL = "mco.many-core.io/report"
GENERATION_LABEL = "mco.many-core.io/generation"


def shard_index(name: str, count: int) -> int:
    """The shard of node ``name`` among ``count`` (a power of two)."""
    return zlib.crc32(name.encode()) & (count - 1)


def shard_name(report: str, generation: int, index: int) -> str:
    """The object name of shard ``index`` of ``generation`` of report ``report``."""
    return f"{report}-g{generation}-{index}"


def change_of(item: NodeAssessment) -> str:
    """The ``changes`` line of ``item``: ``"<level> <score> <dominant>"`` (score with 2 decimals at most)."""
    score = round(item.score, 2)
    text = f"{item.level._value_} {int(score) if score == int(score) else score}"
    return f"{text} {item.dominant}" if item.dominant else text


def parse_change(name: str, text: object) -> NodeAssessment:
    """The assessment a ``changes`` line stands for (no signals, no reasons: those are in the shard).
    Raises :class:`ReportError`."""
    parts = text.split(" ") if isinstance(text, str) else []
    try:
        if len(parts) not in (2, 3):
            raise ValueError('expected "<level> <score> [dominant]"')
        level = Level.parse(parts[0])
        score = float(parts[1])
        if not 0.0 <= score <= 100.0:
            raise ValueError("score must be 0-100")
    except ValueError as exc:
        raise ReportError(f"status.shards.changes[{name}]: {text!r}: {exc}") from exc
    return NodeAssessment(name, level, score, {}, None, (), parts[2] if len(parts) == 3 else "", NO_DIMENSIONS)


@dataclass(frozen=True, slots=True)
class ShardIndex:
    """``status.shards`` of the report object: which generation readers serve, its shard count, the
    version each shard must have reached, and the level changes not yet in the shards."""

    generation: int
    count: int
    versions: tuple[int, ...] = ()
    changes: Mapping[str, str | None] = field(default_factory=dict)

    def as_status(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "count": self.count,
            "versions": list(self.versions),
            "changes": dict(self.changes),
        }


@dataclass(frozen=True, slots=True)
class ShardWrite:
    """One shard written whole: its ``status.nodes`` and new ``status.version``."""

    index: int
    version: int
    nodes: dict[str, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class ShardPlan:
    """One round's writes: the shards (in ``writes``, before the report object), then the report's index."""

    index: ShardIndex
    writes: tuple[ShardWrite, ...]
    new_generation: bool
    """Every shard is written: shards of other generations can go once the index names this one."""
    sizes: tuple[int, ...]
    """Encoded bytes of each shard's content now."""


def _power_of_two_at_least(n: int) -> int:
    count = 2
    while count < n:
        count *= 2
    return count


@dataclass(slots=True)
class _Scan:
    """One pass over the round's nodes: each one's name hash and entry size, in order."""

    hashes: list[int]
    sizes: list[int]
    total: int


class ShardPlanner:
    """Decides, each round, inline or sharded, the shard count, and what to write. One report thread.

    The planner assumes that what it planned was written; after a failed or skipped write call
    :meth:`reset`, so the next round starts a new generation and writes everything. Entries are
    made (``record``) only for the nodes written: at 65,000 nodes a round writes a tenth of them.
    """

    def __init__(
        self,
        inline_budget: int,
        *,
        shard_limit: int = SHARD_LIMIT,
        refresh_seconds: float = DEFAULT_REFRESH_SECONDS,
        changes_budget: int | None = None,
    ) -> None:
        self.inline_budget = inline_budget
        """Bytes the inline report's entries may take; above this the report is sharded."""
        self.shard_limit = shard_limit
        self.refresh_seconds = refresh_seconds
        self.changes_budget = inline_budget // 2 if changes_budget is None else changes_budget
        """Bytes ``changes`` may take in the report object; past it the shards holding most are written."""
        self._known: dict[str, tuple[int, int]] = {}
        """Each node's name hash and the encoded size of its entry (``"name":{...},``) when last made:
        an entry's size drifts by a few bytes as its values change, well inside the limit's margin."""
        self._index: ShardIndex | None = None
        """The generation written last (None: inline, or nothing written yet)."""
        self._last_generation = 0
        self._holds: dict[str, str] = {}
        """Level text of each node as its shard holds it."""
        self._changes: dict[str, str | None] = {}
        self._versions: list[int] = []
        self._refreshed: list[float] = []
        """When each shard was last written."""
        self._fresh = True

    def reset(self, min_generation: int = 0) -> None:
        """Forget what was written: the next sharded round writes a new generation whole, numbered
        ``min_generation`` or above (the store names the generation in use when it is ahead)."""
        self._fresh = True
        self._holds, self._changes = {}, {}
        self._last_generation = max(self._last_generation, min_generation - 1)

    @property
    def index(self) -> ShardIndex | None:
        return self._index

    def plan(
        self, nodes: Sequence[NodeAssessment], record: Callable[[NodeAssessment], Record], now: float
    ) -> ShardPlan | None:
        """This round's shard writes, or None when the report goes inline (every entry in full fits).
        ``record`` makes (or finds) a node's entries; it is asked only for the nodes written."""
        current = self._index.count if self._index else 0
        scan = self._scan(nodes, record, exact=current == 0)
        if scan.total <= self.inline_budget and (current == 0 or scan.total <= self.inline_budget // 2):
            self._index = None
            self._fresh = True
            return None
        count = self._count(scan, max(2, current))
        if self._fresh or count != current:
            self._last_generation = max(int(now), self._last_generation + 1)
            return self._start(nodes, record, scan, count, now)
        return self._update(nodes, record, scan, now)

    def _scan(
        self, nodes: Sequence[NodeAssessment], record: Callable[[NodeAssessment], Record], *, exact: bool
    ) -> _Scan:
        """``exact``: measure every entry (inline: a few thousand nodes, and whether to shard hangs on
        it); else only the new nodes', the others' as measured at their shard's last write."""
        known = self._known
        hashes, sizes = [], []
        total = 0
        for item in nodes:
            name = item.name
            seen = known.get(name)
            if seen is None or exact:
                h = zlib.crc32(name.encode()) if seen is None else seen[0]
                seen = known[name] = (h, record(item).size + len(name) + 4)
            hashes.append(seen[0])
            sizes.append(seen[1])
            total += seen[1]
        if len(known) > 2 * len(nodes) + 1024:  # forget the nodes long gone
            self._known = {item.name: known[item.name] for item in nodes}
        return _Scan(hashes, sizes, total)

    def _count(self, scan: _Scan, count: int) -> int:
        """The shard count: doubled while a shard passes the limit; halved while everything fits in a
        quarter of the shards' room and no shard would pass the limit (hysteresis)."""
        count = max(count, _power_of_two_at_least(-(-scan.total // self.shard_limit)))
        while max(self._shard_sizes(scan, count)) > self.shard_limit:
            count *= 2
        while count > 2 and scan.total * 4 <= count * self.shard_limit:
            if max(self._shard_sizes(scan, count // 2)) > self.shard_limit:
                break
            count //= 2
        return count

    @staticmethod
    def _shard_sizes(scan: _Scan, count: int) -> list[int]:
        out = [len('{"version":0,"nodes":{}}')] * count
        mask = count - 1
        for h, size in zip(scan.hashes, scan.sizes, strict=True):
            out[h & mask] += size
        return out

    @staticmethod
    def _groups(
        nodes: Sequence[NodeAssessment], scan: _Scan, shards: set[int], count: int
    ) -> dict[int, list[NodeAssessment]]:
        """The nodes of each shard in ``shards``."""
        groups: dict[int, list[NodeAssessment]] = {k: [] for k in shards}
        mask = count - 1
        for item, h in zip(nodes, scan.hashes, strict=True):
            group = groups.get(h & mask)
            if group is not None:
                group.append(item)
        return groups

    def _write(
        self, k: int, group: list[NodeAssessment], record: Callable[[NodeAssessment], Record], now: float
    ) -> ShardWrite:
        """Shard ``k`` written whole now: it holds its nodes' current levels; their changes are done."""
        self._versions[k] += 1
        self._refreshed[k] = now
        holds, changes, known = self._holds, self._changes, self._known
        entries = {}
        for item in group:
            name = item.name
            rec = record(item)
            holds[name] = item.level._value_
            changes.pop(name, None)
            entries[name] = rec.full
            known[name] = (known[name][0], rec.size + len(name) + 4)  # the entry is made: measure it again
        return ShardWrite(k, self._versions[k], entries)

    def _start(
        self,
        nodes: Sequence[NodeAssessment],
        record: Callable[[NodeAssessment], Record],
        scan: _Scan,
        count: int,
        now: float,
    ) -> ShardPlan:
        """A new generation: every shard whole; later whole writes staggered over ``refresh_seconds``."""
        groups = self._groups(nodes, scan, set(range(count)), count)
        self._holds, self._changes = {}, {}
        self._versions = [0] * count
        self._refreshed = [0.0] * count
        writes = tuple(self._write(k, groups[k], record, now) for k in range(count))
        self._refreshed = [now - self.refresh_seconds * k / count for k in range(count)]
        self._fresh = False
        self._index = ShardIndex(self._last_generation, count, tuple(self._versions), {})
        return ShardPlan(self._index, writes, True, tuple(self._shard_sizes(scan, count)))

    def _update(
        self, nodes: Sequence[NodeAssessment], record: Callable[[NodeAssessment], Record], scan: _Scan, now: float
    ) -> ShardPlan:
        """The same generation: level changes into ``changes``; due shards, and the shards holding most
        changes while ``changes`` is over its budget, written whole."""
        assert self._index is not None
        count = self._index.count
        mask = count - 1
        holds, changes = self._holds, self._changes
        for item in nodes:
            if holds.get(item.name) != item.level._value_:
                changes[item.name] = change_of(item)
            elif item.name in changes:
                del changes[item.name]  # back to the level its shard holds
        present = {item.name for item in nodes}
        for name in holds.keys() - present:
            changes[name] = None
        for name in [name for name in changes if name not in present and name not in holds]:
            del changes[name]  # came and went between two writes of its shard
        due = {k for k in range(count) if self._refreshed[k] <= now - self.refresh_seconds}
        due |= self._over_budget(due, mask)
        groups = self._groups(nodes, scan, due, count)
        writes = tuple(self._write(k, groups[k], record, now) for k in sorted(due))
        for name in [name for name, text in changes.items() if text is None]:
            if zlib.crc32(name.encode()) & mask in due:  # gone, and its shard no longer holds it
                del holds[name]
                del changes[name]
        self._index = ShardIndex(self._index.generation, count, tuple(self._versions), dict(changes))
        return ShardPlan(self._index, writes, False, tuple(self._shard_sizes(scan, count)))

    def _over_budget(self, due: set[int], mask: int) -> set[int]:
        """The shards to write besides ``due`` so that ``changes`` fits its budget: most changes first."""
        per_shard: dict[int, int] = {}
        known = self._known
        for name, text in self._changes.items():
            seen = known.get(name)
            k = (zlib.crc32(name.encode()) if seen is None else seen[0]) & mask
            per_shard[k] = per_shard.get(k, 0) + len(name) + (len(text) if text is not None else 2) + 6  # `"n":"t",`
        size = sum(b for k, b in per_shard.items() if k not in due)  # the due shards' changes go with them
        extra: set[int] = set()
        for k, bytes_ in sorted(per_shard.items(), key=lambda kv: -kv[1]):
            if size <= self.changes_budget:
                break
            if k not in due:
                extra.add(k)
                size -= bytes_
        return extra


# -- reading -------------------------------------------------------------------------------------


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

    __slots__ = ("_changed", "_len", "_mask", "_shards")

    def __init__(
        self, shards: Sequence[Mapping[str, NodeAssessment]], changed: Mapping[str, NodeAssessment | None]
    ) -> None:
        self._shards = tuple(shards)
        self._mask = len(self._shards) - 1
        self._changed = changed
        size = sum(len(m) for m in self._shards)
        for name, item in changed.items():
            present = name in self._shards[zlib.crc32(name.encode()) & self._mask]
            size += (item is not None) - present
        self._len = size

    def get(self, name: str, default: Any = None) -> Any:
        if name in self._changed:
            item = self._changed[name]
            return default if item is None else item
        return self._shards[zlib.crc32(name.encode()) & self._mask].get(name, default)

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
            changed = self._overlay(maps, index.changes, index.count - 1)
        except ReportError as exc:
            self.problem = str(exc)
            return
        envelope = Report(head.last_update_time, head.analyzer_identity, head.rules_version)
        self._served = (envelope, ShardedNodes(maps, changed))

    def _overlay(
        self, maps: list[Mapping[str, NodeAssessment]], changes: Mapping[str, str | None], mask: int
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
            old = maps[zlib.crc32(name.encode()) & mask].get(name)
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
