"""Strict checks of replies, decoded the way Volcano's and kube-scheduler's Go code would.

Go's ``encoding/json``: keys match case-insensitively, unknown keys are ignored,
a value of the wrong JSON type is an error (the call counts as failed), ``null``
leaves the zero value. On top of what Go accepts we assert what keeps Volcano
safe: never an ``errorMessage``, never a null ``nodeScore``, no negative score.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any


class GoDecodeError(AssertionError):
    """The Go side would fail to decode this reply."""


def _field(obj: dict[str, Any], name: str) -> Any:
    if name in obj:
        return obj[name]
    found = None
    for key, value in obj.items():
        if key.casefold() == name.casefold():
            found = value
    return found


def _go_int(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise GoDecodeError(f"{where}: {value!r} does not decode into a Go int")
    return value


def _go_string(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise GoDecodeError(f"{where}: {value!r} does not decode into a Go string")
    return value


def _object(raw: bytes, where: str) -> dict[str, Any]:
    doc = json.loads(raw)
    if not isinstance(doc, dict):
        raise GoDecodeError(f"{where}: reply is not a JSON object")
    return doc


@dataclass(frozen=True)
class PredicateResult:
    passed: bool
    reason: str
    code: int


def volcano_predicate_v19(raw: bytes) -> PredicateResult:
    """``PredicateResponse{Status []*api.Status}`` with ``api.Status{Code int; Reason string}``."""
    doc = _object(raw, "v1.9 predicate")
    status = _field(doc, "status")
    if status is None:
        return PredicateResult(True, "", 0)
    if not isinstance(status, list):
        raise GoDecodeError(f"v1.9 status must be null or a list of {{Code, Reason}}, got {status!r}")
    decoded = []
    for i, item in enumerate(status):
        if item is None:
            continue
        if not isinstance(item, dict):
            raise GoDecodeError(f"v1.9 status[{i}] must be an object, got {item!r}")
        decoded.append(
            (
                _go_int(_field(item, "Code"), f"status[{i}].Code"),
                _go_string(_field(item, "Reason"), f"status[{i}].Reason"),
            )
        )
    rejected = [(c, r) for c, r in decoded if c != 0]
    if not rejected:
        return PredicateResult(True, "", 0)
    return PredicateResult(False, rejected[0][1], rejected[0][0])


def volcano_predicate_v110(raw: bytes) -> PredicateResult:
    """``PredicateResponse{Status string `json:"status"`; Code int `json:"code"`}`` (v1.10 and later)."""
    doc = _object(raw, "v1.10 predicate")
    status = _go_string(_field(doc, "status"), "v1.10 status")
    code = _go_int(_field(doc, "code"), "v1.10 code")
    if status == "":
        return PredicateResult(True, "", code)
    return PredicateResult(False, status, code or 1)


def volcano_prioritize(raw: bytes) -> dict[str, float]:
    """``PrioritizeResponse{NodeScore map[string]float64; ErrorMessage string}`` plus our safety rules."""
    doc = _object(raw, "prioritize")
    scores = _field(doc, "nodeScore")
    message = _go_string(_field(doc, "errorMessage"), "errorMessage")
    if message:
        raise GoDecodeError(f"errorMessage must be empty (Volcano may crash), got {message!r}")
    if scores is None:
        raise GoDecodeError("nodeScore must not be null or missing (Volcano may crash)")
    if not isinstance(scores, dict):
        raise GoDecodeError(f"nodeScore must be an object, got {scores!r}")
    out = {}
    for name, value in scores.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise GoDecodeError(f"nodeScore[{name}] = {value!r} is not a float64")
        if value < 0:
            raise GoDecodeError(f"nodeScore[{name}] = {value} is negative")
        out[name] = float(value)
    return out


@dataclass(frozen=True)
class KubeFilterResult:
    node_items: list[dict[str, Any]] | None
    node_names: list[str] | None
    failed: dict[str, str]
    error: str


def kube_filter(raw: bytes) -> KubeFilterResult:
    """``ExtenderFilterResult{Nodes *v1.NodeList; NodeNames *[]string; FailedNodes map; ...; Error string}``."""
    doc = _object(raw, "kube filter")
    nodes = _field(doc, "Nodes")
    items = None
    if nodes is not None:
        if not isinstance(nodes, dict):
            raise GoDecodeError("Nodes must be a NodeList object")
        raw_items = _field(nodes, "items")
        if raw_items is not None and not isinstance(raw_items, list):
            raise GoDecodeError("Nodes.items must be a list")
        items = list(raw_items or [])
    names = _field(doc, "NodeNames")
    if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
        raise GoDecodeError("NodeNames must be a list of strings")
    failed = _field(doc, "FailedNodes") or {}
    if not isinstance(failed, dict) or not all(isinstance(v, str) for v in failed.values()):
        raise GoDecodeError("FailedNodes must map names to strings")
    unresolvable = _field(doc, "FailedAndUnresolvableNodes") or {}
    if not isinstance(unresolvable, dict):
        raise GoDecodeError("FailedAndUnresolvableNodes must be an object")
    return KubeFilterResult(items, names, failed, _go_string(_field(doc, "Error"), "Error"))


def kube_prioritize(raw: bytes) -> dict[str, int]:
    """``HostPriorityList``: ``[{Host string; Score int64}]`` with 0 <= Score <= 10."""
    doc = json.loads(raw)
    if not isinstance(doc, list):
        raise GoDecodeError("HostPriorityList must be a list")
    out = {}
    for item in doc:
        if not isinstance(item, dict):
            raise GoDecodeError("HostPriority must be an object")
        host = _go_string(_field(item, "Host"), "Host")
        score = _go_int(_field(item, "Score"), "Score")
        if not 0 <= score <= 10:
            raise GoDecodeError(f"Score {score} outside 0..10")
        out[host] = score
    return out
