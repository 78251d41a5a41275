"""API errors rendered as Kubernetes ``Status`` objects, with the real server's wording."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

# field.ErrorType -> (text shown in messages, StatusCause reason), as in k8s.io/apimachinery.
_FIELD_ERROR_TYPES = {
    "Required": ("Required value", "FieldValueRequired"),
    "Invalid": ("Invalid value", "FieldValueInvalid"),
    "TypeInvalid": ("Invalid value", "FieldValueTypeInvalid"),
    "NotSupported": ("Unsupported value", "FieldValueNotSupported"),
    "TooLong": ("Too long", "FieldValueTooLong"),
    "TooMany": ("Too many", "FieldValueTooMany"),
    "Duplicate": ("Duplicate value", "FieldValueDuplicate"),
    "Forbidden": ("Forbidden", "FieldValueForbidden"),
}
_VALUELESS = {"Required", "TooLong", "Forbidden"}


class GoLiteral(str):
    """A bad value Go prints unquoted (e.g. ``0x0`` for an unset uint64)."""

    __slots__ = ()


def go_value(value: Any) -> str:  # noqa: PLR0911 - one return per Go print verb
    """Render a decoded JSON value the way Go's field.Error prints it (%q strings, %v numbers)."""
    if isinstance(value, GoLiteral):
        return str(value)
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def go_json_type(value: Any) -> str:
    """How Go's encoding/json names a JSON value's type in an UnmarshalTypeError."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), "null")


@dataclass(frozen=True)
class FieldError:
    """One field.Error: ``type`` is a key of the table above, ``field`` a path like ``status.nodes[0].level``."""

    type: str
    field: str
    value: Any = None
    detail: str = ""

    def body(self) -> str:
        text, _ = _FIELD_ERROR_TYPES[self.type]
        out = text if self.type in _VALUELESS else f"{text}: {go_value(self.value)}"
        return f"{out}: {self.detail}" if self.detail else out

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> Obj:
        return {"reason": _FIELD_ERROR_TYPES[self.type][1], "message": self.body(), "field": self.field}


@dataclass
class ApiError(Exception):
    """An error the server answers with: HTTP ``code`` and a Status body."""

    code: int
    reason: str
    message: str
    details: Obj | None = None
    """Sent when not None: the real server sends ``"details": {}`` for some errors and none for others."""

    def status(self) -> Obj:
        out: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": self.message}
        if self.reason:
            out["reason"] = self.reason
        if self.details is not None:
            out["details"] = self.details
        out["code"] = self.code
        return out


def _details(name: str, group: str, kind: str) -> Obj:
    out: Obj = {"name": name} if name else {}
    if group:
        out["group"] = group
    out["kind"] = kind
    return out


def not_found(group: str, plural: str, name: str) -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(404, "NotFound", f'{qualified} "{name}" not found', _details(name, group, plural))


def no_route() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(group: str, plural: str, name: str) -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(409, "AlreadyExists", f'{qualified} "{name}" already exists', _details(name, group, plural))


def conflict(group: str, plural: str, name: str, why: str) -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        409, "Conflict", f'Operation cannot be fulfilled on {qualified} "{name}": {why}', _details(name, group, plural)
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(group: str, kind: str, name: str, errors: list[FieldError]) -> ApiError:
    qualified = f"{kind}.{group}" if group else kind
    listed = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    details = _details(name, group, kind)
    details["causes"] = [e.cause() for e in errors]
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {listed}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})


def unsupported_media_type(accepted: list[str] | None = None) -> ApiError:
    """415: a content type the server knows nothing of, or (``accepted``) one this resource refuses."""
    if accepted is None:
        return ApiError(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: {', '.join(accepted)}",
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def internal(message: str) -> ApiError:
    """A 500 without a reason, as the real server answers some refusals (e.g. resourceVersion on create)."""
    return ApiError(500, "", message)


def unrecognized(kind: str, cause: str, body: bytes) -> ApiError:
    """A body the server could not decode into any kind (handlers.transformDecodeError)."""
    if not body:
        summary = "<empty>"
    elif body[:1] == b"{":
        summary = body.decode(errors="replace") if len(body) <= 30 else body[:30].decode(errors="replace") + " ..."
    else:
        summary = body.hex() if len(body) <= 30 else body[:30].hex() + " ..."
    return bad_request(f"the object provided is unrecognized (must be of type {kind}): {cause} ({summary})")


def cannot_handle(kind: str, version: str, cause: str) -> ApiError:
    """A body of a known kind the server could not decode (handlers.transformDecodeError)."""
    return bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: {cause}')


def apply_conflict(conflicts: list[tuple[str, tuple[str, ...]]]) -> ApiError:
    """409 of a server-side apply without force: (manager as printed, field path) per conflict."""
    causes = [
        {"reason": "FieldManagerConflict", "message": f"conflict with {m}", "field": _path(p)} for m, p in conflicts
    ]
    if len(conflicts) == 1:
        manager, path = conflicts[0]
        return ApiError(
            409, "Conflict", f"Apply failed with 1 conflict: conflict with {manager}: {_path(path)}", {"causes": causes}
        )
    lines = []
    for manager in sorted({m for m, _ in conflicts}):
        lines.append(f"conflicts with {manager}:")
        lines += [f"- {_path(p)}" for m, p in conflicts if m == manager]
    message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})


def _path(path: tuple[str, ...]) -> str:
    return "".join(f".{part}" for part in path)
