"""Label selectors (=, ==, !=, in, notin, exists, !exists) and field selectors (=, ==, !=)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.kubeapi.errors import bad_request

Obj = dict[str, Any]
Matcher = Callable[[Obj], bool]

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_CMP = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*([-A-Za-z0-9_.]*)\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p for p in parts if p.strip()]


def _label_requirement(text: str) -> Callable[[dict[str, str]], bool]:
    if m := _SET.match(text):
        key, op = m[1], m[2]
        values = {v.strip() for v in m[3].split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m := _CMP.match(text):
        key, op, value = m[1], m[2], m[3]
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if m := _EXISTS.match(text):
        negate, key = m[1] == "!", m[2]
        return lambda labels: (key in labels) != negate
    raise bad_request(f"unable to parse requirement: {text.strip()!r} is not a valid label selector requirement")


def label_matcher(selector: str | None) -> Matcher:
    """A predicate on objects for a labelSelector query value; bad syntax is 400 BadRequest."""
    if not selector:
        return lambda _obj: True
    requirements = [_label_requirement(p) for p in _split(selector)]

    def match(obj: Obj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(req(labels) for req in requirements)

    return match


def field_value(obj: Obj, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def field_matcher(selector: str | None, supported: frozenset[str]) -> Matcher:
    """A predicate for a fieldSelector; fields outside ``supported`` are 400 like the real server."""
    if not selector:
        return lambda _obj: True
    checks: list[tuple[str, bool, str]] = []
    for part in _split(selector):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not m:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")
        if m[1] not in supported:
            raise bad_request(f"field label not supported: {m[1]}")
        checks.append((m[1], m[2] != "!=", m[3]))

    def match(obj: Obj) -> bool:
        return all((field_value(obj, f) == v) == eq for f, eq, v in checks)

    return match
