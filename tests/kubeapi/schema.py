"""Structural-schema handling of custom resources: prune, default, validate.

Follows the apiextensions-apiserver order (prune unknown fields, drop non-nullable
nulls, apply defaults, validate) and its error wording (kube-openapi errors
converted to field errors). Formats checked: the ones kube-openapi's registry
knows and that matter here (date-time, date, uuid, ipv4, ipv6, cidr, byte);
other formats pass unchecked. CEL rules (x-kubernetes-validations) are not evaluated.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import re
from datetime import date
from typing import Any

from tests.kubeapi.errors import FieldError
from tests.kubeapi.jsonutil import clone

Schema = dict[str, Any]

_DATE_TIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
_ROOT_KEEP = {"apiVersion", "kind", "metadata"}


def _valid_date(y: str, m: str, d: str) -> bool:
    try:
        date(int(y), int(m), int(d))
    except ValueError:
        return False
    return True


def _format_ok(fmt: str, value: str) -> bool:  # noqa: PLR0911 - one branch per format
    if fmt in ("date-time", "datetime"):
        m = _DATE_TIME.match(value)
        if m is None:
            return False
        return _valid_date(m[1], m[2], m[3]) and int(m[4]) < 24 and int(m[5]) < 60 and int(m[6]) < 61
    if fmt == "date":
        m = re.match(r"^(\d{4})-(\d{2})-(\d{2})$", value)
        return m is not None and _valid_date(m[1], m[2], m[3])
    if fmt == "uuid":
        return bool(_UUID.match(value))
    if fmt in ("ipv4", "ipv6"):
        try:
            addr = ipaddress.ip_address(value)
        except ValueError:
            return False
        return addr.version == (4 if fmt == "ipv4" else 6)
    if fmt == "cidr":
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            return False
        return "/" in value
    if fmt == "byte":
        try:
            base64.b64decode(value, validate=True)
        except ValueError:
            return False
        return True
    return True


def json_type(value: Any) -> str:  # noqa: PLR0911 - one return per JSON type
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# ----------------------------------------------------------------------------- pruning, nulls, defaults


def prune(value: Any, schema: Schema, *, root: bool = False, path: str = "") -> list[str]:
    """Remove fields the schema does not know (in place); return their paths (for warnings/strict)."""
    unknown: list[str] = []
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
            return unknown
        props: dict[str, Schema] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
        for key in list(value):
            sub_path = _child(path, key)
            if embedded and key in _ROOT_KEEP:
                continue
            if key in props:
                unknown += prune(value[key], props[key], path=sub_path)
            elif isinstance(extra, dict):
                unknown += prune(value[key], extra, path=sub_path)
            elif extra is True or schema.get("x-kubernetes-preserve-unknown-fields"):
                continue
            else:
                unknown.append(sub_path)
                del value[key]
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            unknown += prune(item, schema["items"], path=f"{path}[{i}]")
    return unknown


def default(value: Any, schema: Schema) -> None:
    """Drop nulls of non-nullable fields and fill in ``default`` values (in place)."""
    if isinstance(value, dict):
        props: dict[str, Schema] = schema.get("properties") or {}
        for key, sub in props.items():
            if key in value and value[key] is None and not sub.get("nullable"):
                del value[key]
            if key not in value and "default" in sub:
                value[key] = clone(sub["default"])
            if key in value:
                default(value[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in value:
                if key not in props:
                    default(value[key], extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            default(item, schema["items"])


# ----------------------------------------------------------------------------- validation


def validate(value: Any, schema: Schema, path: str = "", *, root: bool = False) -> list[FieldError]:
    """Check ``value`` against a structural schema; field errors worded like the real server's."""
    errors: list[FieldError] = []
    _validate(value, schema, path, errors, root=root)
    return errors


def under(prefix: str, error: FieldError) -> FieldError:
    """``error`` of a value validated on its own, as a field of ``prefix`` (the message keeps its own path)."""
    inner = error.field
    joined = prefix if not inner else (f"{prefix}{inner}" if inner.startswith("[") else f"{prefix}.{inner}")
    return FieldError(error.type, joined, error.value, error.detail)


def _type_ok(value: Any, want: str, schema: Schema) -> bool:
    have = json_type(value)
    if schema.get("x-kubernetes-int-or-string"):
        return have in ("integer", "string")
    if want == "number":
        return have in ("integer", "number")
    return have == want


def _validate(value: Any, schema: Schema, path: str, errors: list[FieldError], *, root: bool = False) -> None:
    name = path or "<root>"
    if value is None:
        if schema.get("nullable"):
            return
        if schema.get("type") or schema.get("x-kubernetes-int-or-string"):
            want = "integer,string" if schema.get("x-kubernetes-int-or-string") else schema["type"]
            errors.append(FieldError("TypeInvalid", path, "null", f'{name} in body must be of type {want}: "null"'))
        return
    want = schema.get("type")
    if (want or schema.get("x-kubernetes-int-or-string")) and not _type_ok(value, want or "", schema):
        have = json_type(value)
        shown = "integer,string" if schema.get("x-kubernetes-int-or-string") else want
        errors.append(FieldError("TypeInvalid", path, have, f'{name} in body must be of type {shown}: "{have}"'))
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = [v if isinstance(v, str) else _json(v) for v in schema["enum"]]
        detail = "supported values: " + ", ".join(_json(v) for v in allowed)
        errors.append(FieldError("NotSupported", path, value, detail))
    if isinstance(value, str):
        _validate_string(value, schema, path, errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _validate_number(value, schema, path, errors)
    elif isinstance(value, list):
        _validate_array(value, schema, path, errors)
    elif isinstance(value, dict):
        _validate_object(value, schema, path, errors, root=root)
    for sub in schema.get("allOf") or []:
        _validate(value, sub, path, errors)
    if schema.get("anyOf") and not any(not validate(value, s, path) for s in schema["anyOf"]):
        errors.append(FieldError("Invalid", path, value, f"{name} in body must match at least one schema in anyOf"))
    if schema.get("oneOf") and sum(1 for s in schema["oneOf"] if not validate(value, s, path)) != 1:
        errors.append(FieldError("Invalid", path, value, f"{name} in body must match exactly one schema in oneOf"))
    if isinstance(schema.get("not"), dict) and not validate(value, schema["not"], path):
        errors.append(FieldError("Invalid", path, value, f"{name} in body should not match the schema in not"))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _validate_string(value: str, schema: Schema, path: str, errors: list[FieldError]) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        limit = schema["maxLength"]
        errors.append(
            FieldError("TooLong", path, value, f"may not be more than {limit} byte{'' if limit == 1 else 's'}")
        )
    if "minLength" in schema and len(value) < schema["minLength"]:
        detail = f"{path} in body should be at least {schema['minLength']} chars long"
        errors.append(FieldError("Invalid", path, value, detail))
    if "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(FieldError("Invalid", path, value, f"{path} in body should match '{schema['pattern']}'"))
    fmt = schema.get("format")
    if fmt and not _format_ok(fmt, value):
        errors.append(FieldError("TypeInvalid", path, value, f"{path} in body must be of type {fmt}: {_json(value)}"))


def _num(value: float) -> str:
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def _validate_number(value: float, schema: Schema, path: str, errors: list[FieldError]) -> None:
    if "maximum" in schema:
        top = schema["maximum"]
        if schema.get("exclusiveMaximum") and value >= top:
            errors.append(FieldError("Invalid", path, value, f"{path} in body should be less than {_num(top)}"))
        elif value > top:
            detail = f"{path} in body should be less than or equal to {_num(top)}"
            errors.append(FieldError("Invalid", path, value, detail))
    if "minimum" in schema:
        low = schema["minimum"]
        if schema.get("exclusiveMinimum") and value <= low:
            errors.append(FieldError("Invalid", path, value, f"{path} in body should be greater than {_num(low)}"))
        elif value < low:
            detail = f"{path} in body should be greater than or equal to {_num(low)}"
            errors.append(FieldError("Invalid", path, value, detail))
    step = schema.get("multipleOf")
    if step and (value / step) != int(value / step):
        errors.append(FieldError("Invalid", path, value, f"{path} in body should be a multiple of {_num(step)}"))


def _validate_array(value: list[Any], schema: Schema, path: str, errors: list[FieldError]) -> None:
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(FieldError("TooMany", path, len(value), f"must have at most {schema['maxItems']} items"))
    if "minItems" in schema and len(value) < schema["minItems"]:
        detail = f"{path} in body should have at least {schema['minItems']} items"
        errors.append(FieldError("Invalid", path, value, detail))
    if schema.get("uniqueItems") or schema.get("x-kubernetes-list-type") == "set":
        seen: list[Any] = []
        for item in value:
            if item in seen:
                errors.append(FieldError("Duplicate", f"{path}[{len(seen)}]", item))
            seen.append(item)
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate(item, items, f"{path}[{i}]", errors)


def _validate_object(value: dict[str, Any], schema: Schema, path: str, errors: list[FieldError], *, root: bool) -> None:
    props: dict[str, Schema] = schema.get("properties") or {}
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        detail = f"{path} in body should have at most {schema['maxProperties']} properties"
        errors.append(FieldError("TooMany", path, len(value), detail))
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        detail = f"{path} in body should have at least {schema['minProperties']} properties"
        errors.append(FieldError("Invalid", path, len(value), detail))
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        if root and key in _ROOT_KEEP:
            continue  # apiVersion, kind and metadata are checked by the server, not the schema
        if key in props:
            _validate(item, props[key], _child(path, key), errors)
        elif isinstance(extra, dict):
            _validate(item, extra, f"{path}[{key}]" if path else key, errors)
    for req in schema.get("required") or []:  # after the properties, as kube-openapi's object validator
        if req not in value:
            errors.append(FieldError("Required", _child(path, req)))
