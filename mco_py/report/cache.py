"""Each node's entries, kept from one report to the next while the node's assessment stays the
very same object. Pure; not thread-safe (one report thread).

The scorer hands back the same :class:`~mco_py.model.NodeAssessment` for a node that had no
sample since the last report, so an unchanged node costs a lookup; a node with a new sample
gets new entries, made only when asked for (most nodes of a large cluster show only their
bare entry).
"""

from __future__ import annotations

from mco_py.model import NodeAssessment
from mco_py.report.document import Entry, detail_bytes, encoded_size, entry, has_detail


class Record:
    """One assessment's entries, made on first use. The entries are shared: never mutate them."""

    __slots__ = ("_bare", "_detail", "_full", "_has_detail", "_size", "item")

    def __init__(self, item: NodeAssessment) -> None:
        self.item = item
        self._full: Entry | None = None
        self._bare: Entry | None = None
        self._detail = -1
        self._has_detail: bool | None = None
        self._size = -1

    @property
    def has_detail(self) -> bool:
        """True when the full entry has dimensions, signals or reasons (the bare one has none)."""
        if self._has_detail is None:
            self._has_detail = has_detail(self.item)
        return self._has_detail

    @property
    def full(self) -> Entry:
        """The entry with its detail."""
        if self._full is None:
            self._full = entry(self.item)
        return self._full

    @property
    def bare(self) -> Entry:
        """The entry without its detail (the full one when there is no detail)."""
        if self._bare is None:
            self._bare = entry(self.item, detail=False) if self.has_detail else self.full
        return self._bare

    @property
    def size(self) -> int:
        """Encoded bytes of the full entry."""
        if self._size < 0:
            self._size = encoded_size(self.full)
        return self._size

    def size_if_known(self) -> int:
        """:attr:`size` when already measured, else -1 (measuring makes the entry)."""
        return self._size

    @property
    def detail(self) -> int:
        """Encoded bytes the detail adds to the bare entry (0 without detail)."""
        if self._detail < 0:
            self._detail = detail_bytes(self.full) if self.has_detail else 0
        return self._detail


class EntryCache:
    """Records by node name; a round keeps exactly the records asked for in it."""

    def __init__(self) -> None:
        self._kept: dict[str, Record] = {}
        self._used: dict[str, Record] = {}

    def record(self, item: NodeAssessment) -> Record:
        """The record of ``item``: the one made for this very assessment this round or kept from the
        last, else a new one."""
        rec = self._used.get(item.name)
        if rec is not None and rec.item is item:
            return rec
        rec = self._kept.get(item.name)
        if rec is None or rec.item is not item:
            rec = Record(item)
        self._used[item.name] = rec
        return rec

    def end_round(self) -> None:
        """Keep the records asked for since the last call for the next round; forget the others."""
        self._kept, self._used = self._used, {}
