"""Extender request decoding and reply encoding (Volcano and kube-scheduler wire formats).

Requests are decoded the way Go's ``encoding/json`` does: object keys match
field names case-insensitively (an exact match is preferred) and unknown keys
are ignored. Wrong types never raise out of here: what cannot be read is
treated as unknown, and the caller fails open.

One decoder, :class:`MsgspecDecoder`, produces the plain data: typed ``msgspec``
Structs that declare only the fields the policy needs, with the exact key
spellings Volcano and kube-scheduler send; everything else is skipped without
building objects (large predicate bodies are read with simdjson instead, which
validates a whole document several times faster than msgspec skips it). If a
required key is missing or has the wrong type after this fast pass, the request
is decoded again on the case-insensitive path (:class:`Walk` over objects decoded
as ``dict[str, Raw]`` one level at a time), so a missing key is never taken as a
pass. The tests hold both against a standard-library reading of the same walk.

See ``docs/extender.md`` and the project's shared reference ``volcano-extender.md``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
import simdjson

from mco_py.errors import DecodeError

# ---------------------------------------------------------------------------
# Plain data handed to the policy


@dataclass(frozen=True, slots=True)
class PodRef:
    """What the policy needs from the pod being scheduled."""

    namespace: str = ""
    name: str = ""
    runtime_class: str | None = None
    """``spec.runtimeClassName``; None when absent or not decodable (Kata rule not applied)."""
    sensitive_to: str | None = None
    """The ``mco.many-core.io/sensitive-to`` annotation (read for scoring only); None when absent."""


#: Pod annotation naming the interference dimensions a pod cares about (see :mod:`mco_py.analysis.policy`).
SENSITIVE_TO = "mco.many-core.io/sensitive-to"


@dataclass(frozen=True, slots=True)
class NodeRef:
    """One candidate node."""

    name: str
    labels: Mapping[str, str] | None = None
    """``metadata.labels``; None when the node object was not sent or not decodable."""
    raw: object = None
    """kube-scheduler only: the node object as received, echoed back for survivors."""


@dataclass(frozen=True, slots=True)
class VolcanoPredicate:
    pod: PodRef
    node: NodeRef | None
    slow_path: bool = False


@dataclass(frozen=True, slots=True)
class VolcanoPrioritize:
    pod: PodRef
    nodes: tuple[str, ...]
    slow_path: bool = False


@dataclass(frozen=True, slots=True)
class KubeArgs:
    pod: PodRef
    nodes: tuple[NodeRef, ...] | None
    """From ``Nodes.items`` (None when not sent)."""
    node_names: tuple[str, ...] | None
    """From ``NodeNames`` (None when not sent; sent when ``nodeCacheCapable``)."""
    slow_path: bool = False


class Decoder(Protocol):
    """Turns request bodies into plain data; raises :class:`DecodeError` only for a body that is not JSON."""

    name: str

    def volcano_predicate(self, body: bytes | bytearray) -> VolcanoPredicate: ...

    def volcano_prioritize(self, body: bytes | bytearray) -> VolcanoPrioritize: ...

    def kube_args(self, body: bytes | bytearray) -> KubeArgs: ...

    def encode(self, obj: object) -> bytes: ...


# ---------------------------------------------------------------------------
# Case-insensitive (Go-like) walk: the decoder's slow path, and the tests' reference reading


def fold_get(obj: Mapping[str, Any], name: str) -> Any:
    """``obj[name]`` matched like Go: the exact key if present, else the last case-insensitive match."""
    if name in obj:
        return obj[name]
    folded = name.casefold()
    size = len(name)
    found: Any = None
    for key, value in obj.items():
        # Go folds rune by rune (simple folding), so a match has as many characters
        if len(key) == size and key.casefold() == folded:
            found = value
    return found


class Walk:
    """Reads a decoded JSON tree like Go's ``encoding/json``, leniently: anything of the wrong type reads as
    None. Subclasses say what an object, a list and a string are in their tree."""

    def obj(self, value: Any) -> Mapping[str, Any] | None:
        raise NotImplementedError

    def seq(self, value: Any) -> Sequence[Any] | None:
        raise NotImplementedError

    def text(self, value: Any) -> str | None:
        raise NotImplementedError

    def null(self, value: Any) -> bool:
        """Absent or JSON ``null``."""
        return value is None

    def get(self, value: Any, *path: str) -> Any:
        for key in path:
            mapping = self.obj(value)
            if mapping is None:
                return None
            value = fold_get(mapping, key)
        return value

    def labels(self, value: Any) -> dict[str, str] | None:
        mapping = self.obj(value)
        if mapping is None:
            return None
        out: dict[str, str] = {}
        for key, item in mapping.items():
            text = self.text(item)
            if text is not None:
                out[key] = text
        return out

    def pod(self, value: Any, *, with_hint: bool = False) -> PodRef:
        sensitive_to = None
        if with_hint:  # annotations are a map: its keys match exactly, unlike struct fields
            annotations = self.obj(self.get(value, "metadata", "annotations"))
            sensitive_to = self.text(annotations.get(SENSITIVE_TO)) if annotations else None
        return PodRef(
            namespace=self.text(self.get(value, "metadata", "namespace")) or "",
            name=self.text(self.get(value, "metadata", "name")) or "",
            runtime_class=self.text(self.get(value, "spec", "runtimeClassName")) or None,
            sensitive_to=sensitive_to,
        )

    def volcano_node(self, value: Any, *, with_labels: bool) -> NodeRef | None:
        """A Volcano ``NodeInfo``: ``Name`` (or ``Node.metadata.name``), labels from ``Node.metadata.labels``."""
        node = self.get(value, "Node")
        name = self.text(self.get(value, "Name")) or self.text(self.get(node, "metadata", "name"))
        if not name:
            return None
        labels = self.labels(self.get(node, "metadata", "labels")) if with_labels else None
        if with_labels and labels is None and self.obj(self.get(node, "metadata")) is not None:
            labels = {}  # the node object is there and simply has no labels
        return NodeRef(name=name, labels=labels)

    def kube_node(self, value: Any) -> NodeRef:
        """A v1.Node from ``Nodes.items``; one without a readable name keeps ``name=""`` and is echoed as passing."""
        name = self.text(self.get(value, "metadata", "name"))
        if not name:
            return NodeRef(name="", labels=None, raw=value)
        labels = self.labels(self.get(value, "metadata", "labels"))
        return NodeRef(name=name, labels=labels if labels is not None else {}, raw=value)

    def names(self, value: Any) -> tuple[str, ...] | None:
        items = self.seq(value)
        if items is None:
            return None
        return tuple(t for t in (self.text(i) for i in items) if t)

    # Whole requests -----------------------------------------------------

    def volcano_predicate(self, top: Any) -> VolcanoPredicate:
        return VolcanoPredicate(
            pod=self.pod(self.get(top, "task", "Pod")),
            node=self.volcano_node(self.get(top, "node"), with_labels=True),
            slow_path=True,
        )

    def volcano_prioritize(self, top: Any) -> VolcanoPrioritize:
        nodes = self.seq(self.get(top, "nodes")) or ()
        names = tuple(n.name for n in (self.volcano_node(item, with_labels=False) for item in nodes) if n)
        return VolcanoPrioritize(
            pod=self.pod(self.get(top, "task", "Pod"), with_hint=True), nodes=names, slow_path=True
        )

    def kube_args(self, top: Any) -> KubeArgs:
        """:class:`DecodeError` when the node list cannot be read: no reply could echo the candidates,
        and null lists would filter out every node (an ``Error`` makes kube-scheduler skip an
        ignorable extender instead)."""
        sent_nodes = self.get(top, "Nodes")
        items = self.seq(self.get(sent_nodes, "items"))
        if items is None and not self.null(sent_nodes):
            raise DecodeError("Nodes is not an object with an items list; expected a v1.NodeList or null")
        sent_names = self.get(top, "NodeNames")
        names = self.names(sent_names)
        if names is None and not self.null(sent_names):
            raise DecodeError("NodeNames is not a list of node names")
        if items is None and names is None:
            raise DecodeError("the request names no nodes: expected Nodes.items or NodeNames")
        return KubeArgs(
            pod=self.pod(self.get(top, "Pod"), with_hint=True),
            nodes=None if items is None else tuple(self.kube_node(i) for i in items),
            node_names=names,
            slow_path=True,
        )


_RawDict = dict[str, msgspec.Raw]
_UNDECODABLE = (msgspec.DecodeError, RecursionError)
"""What msgspec raises for a body it cannot read (RecursionError: nested deeper than it recurses)."""
_raw_dict_decoder = msgspec.json.Decoder(_RawDict)
_raw_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_any_decoder = msgspec.json.Decoder()


class _RawWalk(Walk):
    """Walks ``msgspec.Raw`` values one level at a time (never builds the skipped parts)."""

    def null(self, value: Any) -> bool:
        return value is None or (isinstance(value, msgspec.Raw) and bytes(value).strip() == b"null")

    def obj(self, value: Any) -> Mapping[str, Any] | None:
        if isinstance(value, dict):
            return value
        if isinstance(value, msgspec.Raw):
            try:
                return _raw_dict_decoder.decode(value)
            except _UNDECODABLE:
                return None
        return None

    def seq(self, value: Any) -> Sequence[Any] | None:
        if isinstance(value, list):
            return value
        if isinstance(value, msgspec.Raw):
            try:
                return _raw_list_decoder.decode(value)
            except _UNDECODABLE:
                return None
        return None

    def text(self, value: Any) -> str | None:
        if isinstance(value, str):
            return value
        if isinstance(value, msgspec.Raw):
            raw = bytes(value)
            if raw[:1] != b'"':
                return None
            try:
                decoded = _any_decoder.decode(raw)
            except _UNDECODABLE:
                return None
            return decoded if isinstance(decoded, str) else None
        return None


_RAW_WALK = _RawWalk()


# ---------------------------------------------------------------------------
# Fast path: typed Structs with the exact spellings peers send


class _Pod(msgspec.Struct):
    metadata: _RawDict | None = None
    spec: _RawDict | None = None


class _Task(msgspec.Struct):
    Pod: _Pod | None = None


class _NodeMeta(msgspec.Struct):
    name: str | None = None
    labels: dict[str, str] | None = None


class _Node(msgspec.Struct):
    metadata: _NodeMeta | None = None


class _NodeInfo(msgspec.Struct):
    Name: str | None = None
    Node: _Node | None = None


class _NodeInfoName(msgspec.Struct):
    Name: str | None = None


class _PredicateRequest(msgspec.Struct):
    task: _Task | None = None
    node: _NodeInfo | None = None


class _PrioritizeRequest(msgspec.Struct):
    task: _Task | None = None
    nodes: list[_NodeInfoName] | None = None


class _KubeNodeList(msgspec.Struct):
    items: list[msgspec.Raw] | None = None


class _KubeArgs(msgspec.Struct):
    Pod: _Pod | None = None
    Nodes: _KubeNodeList | None = None
    NodeNames: list[str] | None = None


_STR = msgspec.json.Decoder(str)


def _fast_text(obj: _RawDict, key: str) -> str | None:
    """``obj[key]`` as a string: exact key first, then Go's case-insensitive match; None if absent or not a string."""
    raw = obj.get(key)
    if raw is None:
        raw = fold_get(obj, key)
        if raw is None:
            return None
    try:
        return _STR.decode(raw)
    except _UNDECODABLE:
        return None


def _fast_hint(metadata: _RawDict) -> str | None:
    """The pod's :data:`SENSITIVE_TO` annotation (None when absent or not a string)."""
    raw = metadata.get("annotations")
    if raw is None:
        raw = fold_get(metadata, "annotations")
        if raw is None:
            return None
    try:
        annotations = _raw_dict_decoder.decode(raw)
    except _UNDECODABLE:
        return None
    value = annotations.get(SENSITIVE_TO)
    return None if value is None else _RAW_WALK.text(value)


def _fast_pod(pod: _Pod | None, *, with_hint: bool = False) -> PodRef | None:
    """The pod from the fast pass, or None when its keys are not the expected spelling."""
    if pod is None or pod.metadata is None or pod.spec is None:
        return None
    return PodRef(
        namespace=_fast_text(pod.metadata, "namespace") or "",
        name=_fast_text(pod.metadata, "name") or "",
        runtime_class=_fast_text(pod.spec, "runtimeClassName") or None,
        sensitive_to=_fast_hint(pod.metadata) if with_hint else None,
    )


_PREDICATE = msgspec.json.Decoder(_PredicateRequest)
_PRIORITIZE = msgspec.json.Decoder(_PrioritizeRequest)
_KUBE = msgspec.json.Decoder(_KubeArgs)


def _top(body: bytes | bytearray) -> _RawDict:
    """The top-level object for the slow path; :class:`DecodeError` if the body is not a JSON object."""
    try:
        return _raw_dict_decoder.decode(body)
    except _UNDECODABLE as exc:
        try:
            _any_decoder.decode(body)
        except _UNDECODABLE as inner:
            raise DecodeError(f"request body is not valid JSON: {inner}") from inner
        raise DecodeError("request body is JSON but not an object") from exc


# ---------------------------------------------------------------------------
# Large predicate bodies: simdjson validates the whole document several times
# faster than msgspec can skip what the typed pass does not need (a node's
# ``Tasks`` with every running Pod is most of a predicate body).

SIMDJSON_MIN_BYTES = 128 * 1024
"""Predicate bodies from this size up are parsed with simdjson (below it, msgspec's typed pass is as fast)."""
SIMDJSON_MAX_BYTES = 8 * 1024 * 1024
"""...and up to this size: the parser keeps a buffer as large as the largest document it parsed."""


class _NotExact(Exception):
    """A key on the path is duplicated or spelled with other letter case: decode on the generic path."""


_Simd = simdjson.Object | simdjson.Array | str | int | float | bool | None


def _simd_fields(obj: _Simd, *names: str) -> list[_Simd]:
    """The values of ``names`` in ``obj`` (None when absent or when ``obj`` is not an object).

    Exact keys only: a duplicated key (simdjson returns the first, the generic
    path the last) or a key that matches only case-insensitively raises
    :class:`_NotExact`.
    """
    if not isinstance(obj, simdjson.Object):
        return [None] * len(names)
    keys = list(obj)
    if len(set(keys)) != len(keys):
        raise _NotExact
    out: list[_Simd] = []
    for name in names:
        if name in keys:
            out.append(obj[name])
            continue
        folded = name.casefold()
        size = len(name)
        for key in keys:
            if len(key) == size and key.casefold() == folded:
                raise _NotExact
        out.append(None)
    return out


def _simd_text(value: _Simd) -> str | None:
    return value if isinstance(value, str) else None


def _simd_read_predicate(doc: simdjson.Object) -> VolcanoPredicate:
    """The same reading as :meth:`Walk.volcano_predicate`, on exact keys."""
    task, node_info = _simd_fields(doc, "task", "node")
    (pod,) = _simd_fields(task, "Pod")
    metadata, spec = _simd_fields(pod, "metadata", "spec")
    namespace, pod_name = _simd_fields(metadata, "namespace", "name")
    (runtime_class,) = _simd_fields(spec, "runtimeClassName")
    pod_ref = PodRef(
        namespace=_simd_text(namespace) or "",
        name=_simd_text(pod_name) or "",
        runtime_class=_simd_text(runtime_class) or None,
    )
    info_name, node = _simd_fields(node_info, "Name", "Node")
    (node_meta,) = _simd_fields(node, "metadata")
    meta_name, raw_labels = _simd_fields(node_meta, "name", "labels")
    name = _simd_text(info_name) or _simd_text(meta_name)
    if not name:
        return VolcanoPredicate(pod=pod_ref, node=None)
    labels: dict[str, str] | None = None
    if isinstance(raw_labels, simdjson.Object):
        # a plain dict keeps the last of duplicated keys, as the generic path does
        labels = {key: value for key, value in dict(raw_labels.items()).items() if isinstance(value, str)}
    elif isinstance(node_meta, simdjson.Object):
        labels = {}  # the node object is there and simply has no labels
    return VolcanoPredicate(pod=pod_ref, node=NodeRef(name=name, labels=labels))


_SIMD_LOCAL = threading.local()


def _simd_predicate(body: bytes | bytearray) -> VolcanoPredicate | None:
    """The predicate read with simdjson, or None when the generic rules must decide (a document simdjson
    refuses, not an object, a duplicated or differently cased key on the path)."""
    parser: simdjson.Parser | None = getattr(_SIMD_LOCAL, "parser", None)
    if parser is None:
        parser = _SIMD_LOCAL.parser = simdjson.Parser()
    try:
        doc = parser.parse(body)
    except RuntimeError:  # big integers, or a proxy of an earlier document still alive: a fresh parser next time
        _SIMD_LOCAL.parser = None
        return None
    except ValueError:  # not JSON, or a number/escape simdjson refuses: msgspec decides and explains
        return None
    try:
        return _simd_read_predicate(doc) if isinstance(doc, simdjson.Object) else None
    except _NotExact:
        return None
    finally:
        del doc  # the parser refuses a new document while a proxy of this one lives


class MsgspecDecoder:
    """Fast typed decode; falls back to the case-insensitive walk when a needed key is missing."""

    name = "msgspec"

    def __init__(self) -> None:
        self._encoder = msgspec.json.Encoder()

    def volcano_predicate(self, body: bytes | bytearray) -> VolcanoPredicate:
        if SIMDJSON_MIN_BYTES <= len(body) <= SIMDJSON_MAX_BYTES:
            simd = _simd_predicate(body)
            if simd is not None:
                return simd
        try:
            req = _PREDICATE.decode(body)
        except _UNDECODABLE:
            req = None
        if req is not None and req.task is not None and req.node is not None:
            pod = _fast_pod(req.task.Pod)
            info = req.node
            meta = info.Node.metadata if info.Node is not None else None
            if pod is not None and info.Name and meta is not None and meta.labels is not None:
                return VolcanoPredicate(pod=pod, node=NodeRef(name=info.Name, labels=meta.labels))
        return _RAW_WALK.volcano_predicate(_top(body))

    def volcano_prioritize(self, body: bytes | bytearray) -> VolcanoPrioritize:
        try:
            req = _PRIORITIZE.decode(body)
        except _UNDECODABLE:
            req = None
        if req is not None and req.task is not None and req.nodes is not None:
            pod = _fast_pod(req.task.Pod, with_hint=True)
            names = [n.Name for n in req.nodes]
            if pod is not None and all(names):
                return VolcanoPrioritize(pod=pod, nodes=tuple(n for n in names if n))
        return _RAW_WALK.volcano_prioritize(_top(body))

    def kube_args(self, body: bytes | bytearray) -> KubeArgs:
        try:
            req = _KUBE.decode(body)
        except _UNDECODABLE:
            req = None
        if req is not None and (req.Nodes is not None or req.NodeNames is not None):
            pod = _fast_pod(req.Pod, with_hint=True)
            nodes: tuple[NodeRef, ...] | None = None
            complete = pod is not None
            if req.Nodes is not None:
                if req.Nodes.items is None:
                    complete = False
                else:
                    nodes = tuple(_RAW_WALK.kube_node(item) for item in req.Nodes.items)
                    complete = complete and all(n.name for n in nodes)
            if complete and pod is not None:
                names = tuple(n for n in req.NodeNames if n) if req.NodeNames is not None else None
                return KubeArgs(pod=pod, nodes=nodes, node_names=names)
        return _RAW_WALK.kube_args(_top(body))

    def encode(self, obj: object) -> bytes:
        return self._encoder.encode(obj)


# ---------------------------------------------------------------------------
# Replies


def volcano_predicate_reply(version: str, reason: str | None) -> dict[str, Any]:
    """Predicate reply for Volcano ``version`` (``1.9`` or ``1.10``); ``reason=None`` is a pass.

    v1.9: ``status`` is a list of ``{Code, Reason}`` (null = pass). v1.10 and later:
    ``status`` is a string (empty = pass) plus an int ``code`` (2 = Unschedulable).
    """
    if version == "1.9":
        return {"status": None} if reason is None else {"status": [{"Code": 2, "Reason": reason}]}
    return {"status": ""} if reason is None else {"status": reason, "code": 2}


def volcano_prioritize_reply(scores: Mapping[str, float]) -> dict[str, Any]:
    """Always a complete, non-null, non-negative ``nodeScore`` and an empty ``errorMessage``."""
    clean = {name: (v if math.isfinite(v) and v > 0.0 else 0.0) for name, v in scores.items()}
    return {"nodeScore": clean, "errorMessage": ""}


def kube_filter_reply(
    args: KubeArgs, passed: Iterable[str], failed: Mapping[str, str], *, error: str = ""
) -> dict[str, Any]:
    """``ExtenderFilterResult`` echoing the survivors in the shape they were sent."""
    keep = set(passed)
    out: dict[str, Any] = {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": dict(failed),
        "FailedAndUnresolvableNodes": {},
        "Error": error,
    }
    if args.nodes is not None:
        out["Nodes"] = {"metadata": {}, "items": [n.raw for n in args.nodes if n.name in keep]}
    if args.node_names is not None:
        out["NodeNames"] = [n for n in args.node_names if n in keep]
    return out


def kube_prioritize_reply(scores: Mapping[str, int]) -> list[dict[str, Any]]:
    """``HostPriorityList``: ``[{"Host": name, "Score": 0..10}]``."""
    return [{"Host": name, "Score": int(score)} for name, score in scores.items()]
