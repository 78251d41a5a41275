"""The report document: the ``status`` of the ``NodeInterferenceReport`` CR, the body of the
standalone report file and the ``status`` of each ``NodeInterferenceReportShard``. The
structs below mirror the CRD schemas (``mco_py/data/crds/``): the same fields, types, enums,
lengths and score ranges (``tests/contracts/test_crd.py`` compares them). Not mirrored: each
signal's value range and the time format (the API server checks them; the reader parses the
times), nor the report object's entry cap (the standalone file has none). msgspec encodes the structs and decodes them,
checking every constraint in C. This module is the one place that says what the document
looks like.

An entry (``status.nodes[]``; in a shard, ``status.nodes[name]``), keys in this order,
optional ones left out when empty::

    name, level, score (2 decimals), dominant?, dimensions? {name: {level, score}},
    signals? {name: value (4 decimals: the assessment's own)}, lastSampleTime?, reasons (always; [] when none)

A *bare* entry is the same without ``dimensions``, ``signals`` and ``reasons`` (``reasons: []``):
what the size limit leaves of a node (:mod:`mco_py.report.size`).

Documents are frozen and entries are shared between reports by the builder: never mutate one
(make a new one with :func:`msgspec.structs.replace`). The ``kubernetes`` client sends plain
data only: :func:`to_builtins`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

from mco_py.errors import ReportError
from mco_py.model import (
    GROUP,
    KIND,
    NO_DIMENSIONS,
    VERSION,
    DimensionScore,
    Level,
    NodeAssessment,
    Report,
    format_time,
    parse_time,
    round_to,
)

LevelText = Literal["None", "Low", "Medium", "High", "Unknown"]
DimensionLevel = Literal["None", "Low", "Medium", "High"]
Score = Annotated[float, Meta(ge=0, le=100)]
Count = Annotated[int, Meta(ge=0)]
T = TypeVar("T")
MAX_SHARDS = 65536
"""Most shards a report may have (the CRD's ``status.shards.count`` maximum)."""
MAX_ENTRIES = 20000
"""Most entries one object may hold (the CRDs' ``status.nodes`` maximum)."""


class Dimension(Struct, frozen=True, gc=False):
    """``dimensions[name]``: one resource dimension's level and score."""

    level: DimensionLevel
    score: Score


class Entry(Struct, frozen=True, kw_only=True, gc=False, rename="camel"):
    """One node's entry (``status.nodes[]``); optional fields left out when unset."""

    name: Annotated[str, Meta(min_length=1, max_length=253)]
    level: LevelText
    score: Score
    dominant: Annotated[str, Meta(max_length=32)] | UnsetType = UNSET
    dimensions: Annotated[dict[str, Dimension], Meta(max_length=8)] | UnsetType = UNSET
    signals: dict[str, float] | UnsetType = UNSET
    last_sample_time: str | UnsetType = UNSET
    reasons: Annotated[list[Annotated[str, Meta(max_length=512)]], Meta(max_length=32)] = []


class Analyzer(Struct, frozen=True, gc=False, rename="camel"):
    """``status.analyzer``: who wrote the report, with which rules."""

    identity: Annotated[str, Meta(min_length=1, max_length=253)] = ""
    rules_version: Annotated[str, Meta(max_length=128)] = ""


class Summary(Struct, frozen=True, gc=False, rename="camel"):
    """``status.summary``: the node count, ``detailDropped`` and the count of each level."""

    nodes: Count = 0
    detail_dropped: Count = 0
    none: Count = 0
    low: Count = 0
    medium: Count = 0
    high: Count = 0
    unknown: Count = 0


class ShardIndex(Struct, frozen=True, gc=False):
    """``status.shards`` of a sharded report: which generation readers serve, its shard count, the
    version each shard must have reached, and the level changes not yet in the shards (node name ->
    ``"level score [dominant]"``, or None for a node gone; :mod:`mco_py.report.shards`)."""

    generation: Count
    count: Annotated[int, Meta(ge=0, le=MAX_SHARDS)]
    versions: Annotated[tuple[Count, ...], Meta(max_length=MAX_SHARDS)] = ()
    changes: dict[str, Annotated[str, Meta(max_length=64)] | None] = {}

    def __post_init__(self) -> None:
        if self.count & (self.count - 1):
            raise ValueError(f"shards.count must be 0 or a power of two, not {self.count}")
        if len(self.versions) != self.count:
            raise ValueError(f"shards.versions must hold {self.count} versions, one per shard")


class Status(Struct, frozen=True, kw_only=True, gc=False, rename="camel"):
    """The report object's ``status`` (and the report file's): the envelope and the inline entries,
    or, sharded, no entries and the shard index."""

    last_update_time: str
    analyzer: Analyzer = field(default_factory=Analyzer)
    summary: Summary = field(default_factory=Summary)
    nodes: list[Entry] = []
    """Uncapped here: the API server holds a report object to the CRD's 20,000 (a larger report is
    sharded), and the standalone file has no limit."""
    shards: ShardIndex | UnsetType = UNSET


class ObjectMeta(Struct, frozen=True, gc=False):
    name: str = ""


class ReportObject(Struct, frozen=True, kw_only=True, gc=False, rename="camel"):
    """A whole ``NodeInterferenceReport`` object: the standalone report file."""

    api_version: str = f"{GROUP}/{VERSION}"
    kind: str = KIND
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    status: Status


class ServedIndex(Struct, frozen=True, gc=False):
    """Only the shard index of a report object's ``status`` (what a writer needs of the served one)."""

    shards: ShardIndex | UnsetType = UNSET


class ShardStatus(Struct, frozen=True, gc=False):
    """A shard's ``status``: its entries by node name and the version the writer gave them."""

    version: Count
    nodes: Annotated[dict[str, Entry], Meta(max_length=MAX_ENTRIES)]


class ShardSpec(Struct, frozen=True, gc=False):
    """A shard's ``spec``: its report, generation, index and the generation's shard count."""

    generation: Count
    index: Count
    count: Annotated[int, Meta(ge=1, le=MAX_SHARDS)]
    report: Annotated[str, Meta(min_length=1, max_length=253)] = ""


class ShardHead(Struct, frozen=True, gc=False):
    """A ``NodeInterferenceReportShard`` without its status."""

    spec: ShardSpec
    metadata: ObjectMeta = field(default_factory=ObjectMeta)


_LEVEL_KEY = {level.value: level.value.lower() for level in Level}
"""Summary key by level text. (Hot loops read ``level._value_``: hashing an enum member runs Python code.)"""
_LEVEL_OF = {level.value: level for level in Level}


def entry(item: NodeAssessment, *, detail: bool = True) -> Entry:
    """The ``status.nodes[]`` entry of ``item``; ``detail=False``: its bare entry."""
    dims: dict[str, Dimension] | UnsetType = UNSET
    signals: dict[str, float] | UnsetType = UNSET
    if detail:
        if item.dimensions:
            dims = {n: Dimension(d.level._value_, round_to(d.score, 100.0)) for n, d in item.dimensions.items()}  # type: ignore[arg-type]
        if item.signals:
            s = item.signals  # as the scorer rounded them: shared, never mutated
            signals = s if isinstance(s, dict) else dict(s)
    return Entry(
        name=item.name,
        level=item.level._value_,
        score=round_to(item.score, 100.0),
        dominant=item.dominant or UNSET,
        dimensions=dims,
        signals=signals,
        last_sample_time=UNSET if item.last_sample_time is None else format_time(item.last_sample_time),
        reasons=list(item.reasons) if detail else [],
    )


def has_detail(item: NodeAssessment) -> bool:
    """True when the entry of ``item`` has dimensions, signals or reasons to strip."""
    return bool(item.dimensions or item.signals or item.reasons)


_encode = msgspec.json.Encoder().encode
_NON_ASCII = bytes(range(128, 256))


def encoded_size(doc: object) -> int:
    """Bytes of ``doc`` as compact JSON with non-ASCII as ``\\uXXXX``: a bound of what the stores send
    (UTF-8) and of what the API server keeps (a client may escape).

    Encodes with msgspec (fast) and accounts for the escapes: each non-ASCII UTF-8 byte
    costs at most 2 more bytes once escaped (3-byte char -> 6, 2-byte -> 6, 4-byte -> 12).
    """
    data = _encode(doc)
    return len(data) + 2 * (len(data) - len(data.translate(None, _NON_ASCII)))


def detail_bytes(full: Entry) -> int:
    """Encoded bytes the detail adds to the full entry ``full`` (0 without detail)."""
    saved = 0
    if full.dimensions:  # `"dimensions":{...},` (never the last key)
        saved += len('"dimensions":,') + encoded_size(full.dimensions)
    if full.signals:  # `"signals":{...},` (never the last key)
        saved += len('"signals":,') + encoded_size(full.signals)
    if full.reasons:  # the content of `"reasons":[...]`
        saved += encoded_size(full.reasons) - len("[]")
    return saved


def summary(nodes: Sequence[NodeAssessment], detail_dropped: int) -> Summary:
    """``status.summary`` of ``nodes``."""
    counts = dict.fromkeys(_LEVEL_KEY, 0)
    for item in nodes:
        counts[item.level._value_] += 1
    return Summary(len(nodes), detail_dropped, **{key: counts[text] for text, key in _LEVEL_KEY.items()})


def envelope(report: Report) -> Status:
    """The status document of ``report`` without its ``nodes``."""
    return Status(
        last_update_time=format_time(report.last_update_time),
        analyzer=Analyzer(report.analyzer_identity, report.rules_version),
        summary=summary(report.nodes, report.detail_dropped),
    )


def status_of(report: Report) -> Status:
    """The whole status document of ``report``, every entry in full (no size limit, no cache:
    the analyzer builds with :class:`~mco_py.report.builder.ReportBuilder`)."""
    return msgspec.structs.replace(envelope(report), nodes=[entry(item) for item in report.nodes])


def to_builtins(doc: object) -> Any:
    """``doc`` as dicts, lists and scalars (what the ``kubernetes`` client serializes)."""
    return msgspec.to_builtins(doc)


def decode(raw: object, kind: type[T], where: str) -> T:
    """``raw`` (plain data, e.g. from the ``kubernetes`` client) as a ``kind`` document, every
    constraint checked; raises :class:`~mco_py.errors.ReportError` naming ``where`` and the field."""
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        raise ReportError(_located(exc, where)) from exc


def decode_json(data: bytes | str, kind: type[T], where: str) -> T:
    """JSON text as a ``kind`` document; raises :class:`~mco_py.errors.ReportError`."""
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as exc:
        raise ReportError(_located(exc, where)) from exc
    except msgspec.DecodeError as exc:
        raise ReportError(f"{where}: not valid JSON: {exc}") from exc


def _located(exc: msgspec.ValidationError, where: str) -> str:
    """msgspec's message after ``where``, its path from inside the document: "status: Expected
    `float` <= 100.0 - at `nodes[3].score`"."""
    text = str(exc).replace("`$.", "`").replace("`$[", "`[")
    return f"{where}: {text}" if where else text


def assessment_of(item: Entry, where: str) -> NodeAssessment:
    """The assessment an entry stands for (``where`` names the entry in errors: ``status.nodes[3]``);
    raises :class:`~mco_py.errors.ReportError` for a bad time."""
    dims = item.dimensions
    stamp = item.last_sample_time
    try:
        sample_time = parse_time(stamp) if stamp else None
    except ReportError as exc:
        raise ReportError(f"{where}.lastSampleTime: {exc}") from exc
    return NodeAssessment(
        item.name,
        _LEVEL_OF[item.level],
        item.score,
        item.signals or {},
        sample_time,
        tuple(item.reasons),
        item.dominant or "",
        {n: DimensionScore(_LEVEL_OF[d.level], d.score) for n, d in dims.items()} if dims else NO_DIMENSIONS,
    )


def report_of(status: Status) -> Report:
    """The report a status document stands for; raises :class:`~mco_py.errors.ReportError`."""
    try:
        updated = parse_time(status.last_update_time)
    except ReportError as exc:
        raise ReportError(f"status.lastUpdateTime: {exc}") from exc
    return Report(
        last_update_time=updated,
        analyzer_identity=status.analyzer.identity,
        rules_version=status.analyzer.rules_version,
        nodes=tuple(assessment_of(item, f"status.nodes[{i}]") for i, item in enumerate(status.nodes)),
        detail_dropped=status.summary.detail_dropped,
    )
