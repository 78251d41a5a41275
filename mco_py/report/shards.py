"""The sharded report, written: which shard holds a node and what to write each round. Pure (no
I/O, no clock: times are passed in). Read back: :mod:`mco_py.report.assemble`.

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
size, not with the change. A reader serves one generation at a time, and only once each shard
has reached its version, with ``changes`` laid over the shards' entries: no node is ever
missing or duplicated.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mco_py.errors import ReportError
from mco_py.model import NO_DIMENSIONS, Level, NodeAssessment
from mco_py.report.cache import Record
from mco_py.report.document import Entry, ShardIndex

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
class ShardWrite:
    """One shard written whole: its ``status.nodes`` and new ``status.version``."""

    index: int
    version: int
    nodes: dict[str, Entry]


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
    made (``record``) only for the nodes written: at 65,000 nodes a round writes a small share of
    them (docs/benchmarks.md, "Sharded report").
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
            if shard_index(name, count) in due:  # gone, and its shard no longer holds it
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
