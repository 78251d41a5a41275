"""In-memory object store with the real server's write rules, resource versions and a watch history."""

from __future__ import annotations

import base64
import json
import random
import re
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.kubeapi import errors as E
from tests.kubeapi import schema as S
from tests.kubeapi.errors import ApiError, FieldError, GoLiteral
from tests.kubeapi.jsonutil import clone
from tests.kubeapi.resources import (
    BUILTINS,
    CRD_GROUP,
    ResourceType,
    crd_defaults,
    crd_errors,
    crd_resource_types,
    initial_crd_status,
)
from tests.kubeapi.resources import crd_status as make_crd_status

Obj = dict[str, Any]
Key = tuple[str, str]  # (group, plural): one storage for all versions of a resource

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, "
    "and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
    "'[a-z]([-a-z0-9]*[a-z0-9])?')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation "
    "is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # what the real generateName suffix draws from
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "generation")


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


FieldPath = tuple[str, ...]


@dataclass
class Manager:
    """A field manager of an object: the fields it owns, as managedFields would record them."""

    fields: set[FieldPath]
    operation: str  # "Apply" | "Update"
    api_version: str
    time: str

    def shown(self, name: str) -> str:
        """As conflict messages name it (managedfields printManager)."""
        quoted = json.dumps(name)
        return quoted if self.operation == "Apply" else f"{quoted} using {self.api_version} at {self.time}"


_IDENTITY: set[FieldPath] = {("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace")}


def leaf_fields(obj: Any, prefix: FieldPath = ()) -> set[FieldPath]:
    """The fields an object sets, as paths through its maps (a list is one field, as for an atomic list)."""
    out: set[FieldPath] = set()
    if isinstance(obj, dict):
        for key, value in obj.items():
            path = (*prefix, key)
            if path in (("metadata", "resourceVersion"), ("metadata", "managedFields"), ("status",)):
                continue
            out |= leaf_fields(value, path) if isinstance(value, dict) and value else {path}
    return out - _IDENTITY


def _at(obj: Any, path: FieldPath) -> Any:
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def remove_field(obj: Obj, path: FieldPath) -> None:
    """Delete a field and the maps it leaves empty."""
    parents = [obj]
    for part in path[:-1]:
        child = parents[-1].get(part)
        if not isinstance(child, dict):
            return
        parents.append(child)
    parents[-1].pop(path[-1], None)
    for depth in range(len(path) - 1, 0, -1):
        if not parents[depth]:
            parents[depth - 1].pop(path[depth - 1], None)


@dataclass(frozen=True)
class WatchEvent:
    rv: int
    type: str
    key: Key
    namespace: str
    obj: Obj
    old: Obj | None


def name_errors(name: str, rule: str) -> list[FieldError]:
    if rule == "path":
        if name in (".", ".."):
            return [FieldError("Invalid", "metadata.name", name, f"may not be '{name}'")]
        bad = [c for c in ("/", "%") if c in name]
        return [FieldError("Invalid", "metadata.name", name, f"may not contain '{c}'") for c in bad]
    limit, regex, msg = {
        "subdomain": (253, _SUBDOMAIN, _SUBDOMAIN_MSG),
        "label": (63, _LABEL, _LABEL_MSG),
        "dns1035": (63, _DNS1035, _DNS1035_MSG),
    }[rule]
    out = []
    if len(name) > limit:
        out.append(FieldError("Invalid", "metadata.name", name, f"must be no more than {limit} characters"))
    if not regex.match(name):
        out.append(FieldError("Invalid", "metadata.name", name, msg))
    return out


def label_errors(labels: Any) -> list[FieldError]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [FieldError("Invalid", "metadata.labels", labels, "must be a map of strings")]
    out = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if not _LABEL_NAME.match(name) or len(name) > 63 or (prefix and not _SUBDOMAIN.match(prefix)):
            detail = (
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            )
            out.append(FieldError("Invalid", "metadata.labels", key, detail))
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            detail = "must be no more than 63 characters" if len(value) > 63 else _LABEL_VALUE_MSG
            out.append(FieldError("Invalid", "metadata.labels", value, detail))
    return out


_WORKLOADS = {("apps", "deployments"), ("apps", "daemonsets"), ("apps", "statefulsets"), ("apps", "replicasets")}
_BINDINGS = {("rbac.authorization.k8s.io", "rolebindings"), ("rbac.authorization.k8s.io", "clusterrolebindings")}
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")


def immutable_errors(rt: ResourceType, new: Obj, old: Obj) -> list[FieldError]:
    """Updates the real server refuses because a field may not change."""
    key = (rt.group, rt.plural)

    def changed(*path: str) -> tuple[bool, Any]:
        a: Any = new
        b: Any = old
        for part in path:
            a = a.get(part) if isinstance(a, dict) else None
            b = b.get(part) if isinstance(b, dict) else None
        return a != b, a

    out = []
    if key in _WORKLOADS or key == ("batch", "jobs"):
        moved, value = changed("spec", "selector")
        if moved and not (key == ("batch", "jobs") and value is None):
            out.append(FieldError("Invalid", "spec.selector", value, "field is immutable"))
    if key == ("batch", "jobs"):
        moved, value = changed("spec", "template")
        if moved:
            out.append(FieldError("Invalid", "spec.template", value, "field is immutable"))
    if key in _BINDINGS:
        moved, value = changed("roleRef")
        if moved:
            out.append(FieldError("Invalid", "roleRef", value, "cannot change roleRef"))
    if key in (("", "configmaps"), ("", "secrets")) and old.get("immutable"):
        for name in ("data", "binaryData", "immutable"):
            if changed(name)[0]:
                detail = "field is immutable when `immutable` is set"
                out.append(FieldError("Forbidden", name, detail=detail))
    if key == (CRD_GROUP, "customresourcedefinitions"):
        for field in ("group", "scope"):
            moved, value = changed("spec", field)
            if moved:
                out.append(FieldError("Invalid", f"spec.{field}", value, "field is immutable"))
    return out


# (JSON path, Go struct field name) of map[string]string fields: other value types fail to decode (400).
_STRING_MAPS: dict[tuple[str, str], list[tuple[tuple[str, ...], str]]] = {
    ("", "configmaps"): [(("data",), "ConfigMap.data"), (("binaryData",), "ConfigMap.binaryData")],
    ("", "secrets"): [(("data",), "Secret.data"), (("stringData",), "Secret.stringData")],
}
_GO_TYPES = {bool: "bool", int: "number", float: "number", list: "array", dict: "object"}


def _decode_error(rt: ResourceType, python_type: type, go_field: str) -> E.ApiError:
    return E.bad_request(
        f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: json: cannot unmarshal '
        f"{_GO_TYPES.get(python_type, 'value')} into Go struct field {go_field} of type string"
    )


def _check_string_maps(rt: ResourceType, obj: Obj) -> None:
    """What Go's JSON decoding refuses: non-strings in string fields and maps, bad base64 in Secret data."""
    meta = obj["metadata"]
    for name in ("name", "generateName", "namespace", "resourceVersion", "uid"):
        if meta.get(name) is not None and not isinstance(meta[name], str):
            raise _decode_error(rt, type(meta[name]), f"ObjectMeta.metadata.{name}")
    fields = [
        (("metadata", "labels"), "ObjectMeta.metadata.labels"),
        (("metadata", "annotations"), "ObjectMeta.metadata.annotations"),
    ]
    for path, go_name in fields + _STRING_MAPS.get((rt.group, rt.plural), []):
        value: Any = obj
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            continue
        bad = (
            type(value)
            if not isinstance(value, dict)
            else next((type(v) for v in value.values() if v is not None and not isinstance(v, str)), None)
        )
        if bad is not None:
            raise _decode_error(rt, bad, go_name)
    if (rt.group, rt.plural) == ("", "secrets"):
        for value in (obj.get("data") or {}).values():
            offset = _base64_error(value or "")
            if offset is not None:
                raise E.cannot_handle("Secret", "v1", f"illegal base64 data at input byte {offset}")


_B64 = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _base64_error(text: str) -> int | None:  # noqa: PLR0911 - one return per outcome of Go's decodeQuantum
    """Offset Go's base64.StdEncoding reports for ``text`` (encoding/base64 decodeQuantum), or None if valid."""
    src, si = text.encode(), 0
    while si < len(src):
        j = 0
        while j < 4:
            if si == len(src):
                if j == 0:
                    return None
                return si - j
            ch = chr(src[si])
            si += 1
            if ch in _B64:
                j += 1
                continue
            if ch in "\r\n":
                continue
            if ch != "=" or j in (0, 1):
                return si - 1
            if j == 2:  # "==" expected: the first "=" is consumed
                while si < len(src) and chr(src[si]) in "\r\n":
                    si += 1
                if si == len(src):
                    return len(src)
                if chr(src[si]) != "=":
                    return si - 1
                si += 1
            while si < len(src) and chr(src[si]) in "\r\n":
                si += 1
            return si if si < len(src) else None
    return None


def _refuse_unknown(rt: ResourceType, unknown: list[str], strict: bool) -> None:
    """fieldValidation=Strict: unknown fields are a 400, as with the real server."""
    if strict and unknown:
        cause = "strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown)
        raise E.cannot_handle(rt.kind, rt.version, cause)


def _comparable(obj: Obj, drop_status: bool) -> Obj:
    """The object without metadata (and status): what metadata.generation tracks."""
    return {k: v for k, v in obj.items() if k != "metadata" and not (drop_status and k == "status")}


def _same(a: Obj, b: Obj) -> bool:
    def strip(o: Obj) -> Obj:
        meta = {k: v for k, v in o.get("metadata", {}).items() if k not in ("resourceVersion", "managedFields")}
        return {**o, "metadata": meta}

    return strip(a) == strip(b)


class Store:
    """Objects by (group, plural) -> (namespace, name); one global resourceVersion counter; bounded history."""

    def __init__(self, history: int = 1000) -> None:
        self.cond = threading.Condition(threading.RLock())
        self.rv = 0
        self.objects: dict[Key, dict[tuple[str, str], Obj]] = {}
        self.events: deque[WatchEvent] = deque(maxlen=max(1, history))
        self.types: dict[tuple[str, str, str], ResourceType] = {}
        self.forced_conflicts: dict[tuple[str, str, str, str], int] = {}
        # field ownership: (storage key, namespace, name) -> field manager -> what it owns
        self.managers: dict[tuple[Key, str, str], dict[str, Manager]] = {}
        self.closed = False
        for rt in BUILTINS:
            self.types[(rt.group, rt.version, rt.plural)] = rt
        ns_type = self.types[("", "v1", "namespaces")]
        for name in INITIAL_NAMESPACES:
            self.create(ns_type, "", {"metadata": {"name": name}})

    # ------------------------------------------------------------------ types

    def resource_type(self, group: str, version: str, plural: str) -> ResourceType | None:
        with self.cond:
            return self.types.get((group, version, plural))

    def group_versions(self) -> dict[str, list[str]]:
        """group -> served versions (unordered; discovery sorts them); core group excluded."""
        with self.cond:
            out: dict[str, list[str]] = {}
            for group, version, _ in self.types:
                if not group:
                    continue
                versions = out.setdefault(group, [])
                if version not in versions:
                    versions.append(version)
            return out

    def types_in(self, group: str, version: str) -> list[ResourceType]:
        with self.cond:
            return [rt for (g, v, _), rt in self.types.items() if g == group and v == version]

    def _register_crd(self, crd: Obj) -> None:
        self._unregister_crd(crd["metadata"]["name"])
        for rt in crd_resource_types(crd):
            self.types[(rt.group, rt.version, rt.plural)] = rt

    def _unregister_crd(self, name: str) -> None:
        for key in [k for k, rt in self.types.items() if rt.crd == name]:
            del self.types[key]

    # ------------------------------------------------------------------ reads

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], Obj]:
        return self.objects.setdefault(rt.storage_key, {})

    def _present(self, rt: ResourceType, obj: Obj) -> Obj:
        """A stored object as ``rt`` serves it."""
        out = rt.to_served(clone(obj))
        out["apiVersion"] = rt.api_version
        return out

    present = _present

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        with self.cond:
            obj = self._bucket(rt).get((namespace, name))
            if obj is None:
                raise E.not_found(rt.group, rt.plural, name)
            return self._present(rt, obj)

    def list_objects(
        self, rt: ResourceType, namespace: str | None, match: Callable[[Obj], bool]
    ) -> tuple[list[Obj], int]:
        with self.cond:
            bucket = self._bucket(rt)
            items = [
                self._present(rt, bucket[k])
                for k in sorted(bucket)
                if (namespace is None or k[0] == namespace) and match(bucket[k])
            ]
            return items, self.rv

    def namespace_exists(self, name: str) -> bool:
        with self.cond:
            return ("", name) in self.objects.get(("", "namespaces"), {})

    # ------------------------------------------------------------------ writes

    def _check_namespace(self, rt: ResourceType, namespace: str) -> None:
        if rt.namespaced and not self.namespace_exists(namespace):
            raise E.not_found("", "namespaces", namespace)

    def _take_forced_conflict(self, rt: ResourceType, namespace: str, name: str) -> None:
        key = (rt.group, rt.plural, namespace, name)
        left = self.forced_conflicts.get(key, 0)
        if left > 0:
            self.forced_conflicts[key] = left - 1
            raise E.conflict(rt.group, rt.plural, name, E.STALE)

    def _commit(
        self, rt: ResourceType, event: str, obj: Obj, old: Obj | None, writer: tuple[str, str] | None = None
    ) -> Obj:
        """Store a change; ``writer`` is (field manager, "Apply" or "Update") of a client's write."""
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if event == "DELETED":
            self._bucket(rt).pop(key, None)
            self.managers.pop((rt.storage_key, *key), None)
        else:
            self._bucket(rt)[key] = obj
            now_set, before = leaf_fields(obj), leaf_fields(old) if old is not None else set()
            changed = now_set ^ before | {f for f in now_set & before if _at(obj, f) != _at(old, f)}
            owners = self.managers.setdefault((rt.storage_key, *key), {})
            for entry in owners.values():  # a changed field belongs to whoever changed it
                entry.fields.difference_update(changed)
            if writer is not None and writer[1] == "Update" and changed & now_set:
                entry = owners.setdefault(writer[0], Manager(set(), "Update", rt.api_version, now()))
                entry.fields |= changed & now_set
                entry.api_version, entry.time = rt.api_version, now()
        self.events.append(WatchEvent(self.rv, event, rt.storage_key, key[0], clone(obj), old))
        self.cond.notify_all()
        return self._present(rt, obj)

    def _admit(
        self, rt: ResourceType, new: Obj, old: Obj | None, subresource: str, strict: bool = False
    ) -> tuple[Obj, list[str]]:
        """Apply the real server's write rules to ``new``; return it and pruned unknown field paths."""
        if subresource == "status" and old is not None and rt.custom:
            status = new.get("status")  # custom resources: a /status write changes status only
            new = clone(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        elif subresource == "status" and old is not None:
            # built-in kinds (and CRDs) keep the old spec; metadata comes from the request
            # (the kinds' statusStrategy.PrepareForUpdate), except what their strategies restore
            new.pop("spec", None)
            if "spec" in old:
                new["spec"] = clone(old["spec"])
            restore = {("apps", "deployments"): "labels", ("", "pods"): "ownerReferences"}.get((rt.group, rt.plural))
            if restore:
                new["metadata"].pop(restore, None)
                if restore in old["metadata"]:
                    new["metadata"][restore] = clone(old["metadata"][restore])
        elif rt.status and old is not None:
            new.pop("status", None)
            if "status" in old:
                new["status"] = clone(old["status"])
        elif rt.status and old is None and not rt.status_on_create:
            new.pop("status", None)
        meta = new["metadata"]
        meta.pop("managedFields", None)
        meta.pop("selfLink", None)
        for key in _SERVER_META:
            meta.pop(key, None)
            if old is not None and key in old["metadata"]:
                meta[key] = old["metadata"][key]
        if old is None:
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now()
        unknown: list[str] = []
        errors: list[FieldError] = []
        if rt.schema is not None:
            unknown = S.prune(new, rt.schema, root=True)
            _refuse_unknown(rt, unknown, strict)  # a decoding error: before any validation
            S.default(new, rt.schema)
            status_schema = (rt.schema.get("properties") or {}).get("status")
            if subresource == "status" and "status" in new and isinstance(status_schema, dict):
                # the status alone against its schema: fields under "status", messages relative to it
                errors += [S.under("status", e) for e in S.validate(new["status"], status_schema)]
            elif subresource != "status":
                errors += S.validate(new, rt.schema, root=True)
        errors += name_errors(meta["name"], rt.name_rule) if old is None else immutable_errors(rt, new, old)
        errors += label_errors(meta.get("labels"))
        if rt.group == CRD_GROUP and rt.plural == "customresourcedefinitions":
            errors += crd_errors(new)
        if errors:
            raise E.invalid(rt.group, rt.kind, meta["name"], errors)
        if rt.group == CRD_GROUP and rt.plural == "customresourcedefinitions":
            crd_defaults(new)
            if old is None:
                new["status"] = initial_crd_status(new)
            else:
                new["status"] = make_crd_status(new, old.get("status"), now())
        if (rt.group, rt.plural) == ("", "secrets"):
            for key, value in (new.pop("stringData", None) or {}).items():
                new.setdefault("data", {})[key] = base64.b64encode((value or "").encode()).decode()
            new.setdefault("type", "Opaque")
        if rt.plural == "namespaces" and rt.group == "":
            new.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            new.setdefault("status", {}).setdefault("phase", "Active")
        if rt.generation:
            if old is None:
                meta["generation"] = 1
            elif _comparable(new, rt.status) != _comparable(old, rt.status):
                meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        return new, unknown

    def _normalize(self, rt: ResourceType, namespace: str, body: Any, raw: bytes | None = None) -> Obj:
        if not isinstance(body, dict):
            raise E.bad_request(f"the body of the request must be a {rt.kind} object")
        obj = clone(body)
        if rt.custom and not obj.get("kind"):  # unstructured decoding: no kind from the URL
            data = raw if raw is not None else json.dumps(body, separators=(",", ":")).encode()
            missing = f"Object 'Kind' is missing in '{data.decode(errors='replace')}'"
            raise E.unrecognized(rt.kind, missing, data)
        if rt.custom and not obj.get("apiVersion"):
            obj["apiVersion"] = ""
        kind = obj.get("kind")
        if kind and kind != rt.kind:
            raise E.bad_request(
                f'{kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                "the kind in the data does not match"
            )
        api_version = obj.get("apiVersion")
        if (api_version or rt.custom) and api_version != rt.api_version:
            raise E.bad_request(
                f"the API version in the data ({api_version}) does not match "
                f"the expected API version ({rt.api_version})"
            )
        obj["kind"] = rt.kind
        rt.to_stored(obj)
        obj["apiVersion"] = rt.stored_api_version
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise E.bad_request("metadata must be an object")
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise E.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        _check_string_maps(rt, obj)
        return obj

    def create(
        self,
        rt: ResourceType,
        namespace: str,
        body: Any,
        *,
        dry_run: bool = False,
        strict: bool = False,
        raw: bytes | None = None,
        writer: tuple[str, str] | None = None,
    ) -> tuple[Obj, list[str]]:
        with self.cond:
            obj = self._normalize(rt, namespace, body, raw)
            meta = obj["metadata"]
            self._check_namespace(rt, namespace)
            if not meta.get("name"):
                if not meta.get("generateName"):
                    error = FieldError("Required", "metadata.name", detail="name or generateName is required")
                    raise E.invalid(rt.group, rt.kind, "", [error])
                bucket = self._bucket(rt)
                for _ in range(20):
                    candidate = meta["generateName"] + "".join(random.choices(_NAME_CHARS, k=5))
                    if (namespace, candidate) not in bucket:
                        break
                meta["name"] = candidate
            obj, unknown = self._admit(rt, obj, None, "", strict)
            # what the storage layer refuses, after validation: a plain error (500), then a taken name
            if obj["metadata"].get("resourceVersion"):
                raise E.internal("resourceVersion should not be set on objects to be created")
            if (namespace if rt.namespaced else "", obj["metadata"]["name"]) in self._bucket(rt):
                raise E.already_exists(rt.group, rt.plural, obj["metadata"]["name"])
            if dry_run:
                return self._present(rt, obj), unknown
            out = self._commit(rt, "ADDED", obj, None, writer)
            if rt.group == CRD_GROUP and rt.plural == "customresourcedefinitions":
                # the controllers accept the names and establish it: a second write, as for real
                established = clone(obj)
                established["status"] = make_crd_status(obj, None, now())
                self._commit(rt, "MODIFIED", established, clone(obj))
                self._register_crd(established)
            return out, unknown

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        change: Callable[[Obj], Any],
        *,
        subresource: str = "",
        dry_run: bool = False,
        require_rv: bool = True,
        strict: bool = False,
        raw: bytes | None = None,
        writer: tuple[str, str] | None = None,
    ) -> tuple[Obj, list[str]]:
        """Replace an object by ``change(current copy)`` (a PUT body or a patch result)."""
        with self.cond:
            ns = namespace if rt.namespaced else ""
            current = self._bucket(rt).get((ns, name))
            if current is None:
                raise E.not_found(rt.group, rt.plural, name)
            new = self._normalize(rt, namespace, change(self._present(rt, current)), raw)
            meta = new["metadata"]
            if meta.get("name") != name:
                raise E.bad_request(
                    f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
                )
            self._take_forced_conflict(rt, ns, name)
            wanted = meta.get("resourceVersion")
            if wanted and wanted != current["metadata"]["resourceVersion"]:
                raise E.conflict(rt.group, rt.plural, name, E.STALE)
            if not wanted and require_rv and not rt.unconditional_update:
                error = FieldError(
                    "Invalid", "metadata.resourceVersion", GoLiteral("0"), "must be specified for an update"
                )
                raise E.invalid(rt.group, rt.plural, name, [error])  # the resource, not the kind, as for real
            new, unknown = self._admit(rt, new, current, subresource, strict)
            if _same(new, current):
                return self._present(rt, current), unknown
            if dry_run:
                return self._present(rt, new), unknown
            if current["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
                return self._delete_now(rt, current), unknown
            out = self._commit(rt, "MODIFIED", new, clone(current), writer)
            if rt.group == CRD_GROUP and rt.plural == "customresourcedefinitions":
                self._register_crd(new)
            return out, unknown

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        preconditions: Obj | None = None,
        *,
        dry_run: bool = False,
        options: Obj | None = None,
    ) -> tuple[Obj, bool]:
        """Delete (or mark for deletion when finalizers remain or a bound pod terminates); returns
        (object, deleted now). ``options``: DeleteOptions (propagationPolicy, gracePeriodSeconds)."""
        with self.cond:
            ns = namespace if rt.namespaced else ""
            current = self._bucket(rt).get((ns, name))
            if current is None:
                raise E.not_found(rt.group, rt.plural, name)
            self._take_forced_conflict(rt, ns, name)
            pre = preconditions or {}
            meta = current["metadata"]
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                why = f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta['uid']}"
                raise E.conflict(rt.group, rt.plural, name, why)
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                why = (
                    f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                    f"ResourceVersion in object meta: {meta['resourceVersion']}"
                )
                raise E.conflict(rt.group, rt.plural, name, why)
            if rt.group == "" and rt.plural == "namespaces" and name in PROTECTED_NAMESPACES:
                message = f'namespaces "{name}" is forbidden: this namespace may not be deleted'
                raise ApiError(403, "Forbidden", message, {"name": name, "kind": "namespaces"})
            if dry_run:
                return self._present(rt, current), True
            options = options or {}
            is_system = (rt.group == "" and rt.plural == "namespaces") or rt.plural == "customresourcedefinitions"
            if (rt.group, rt.plural) == ("", "pods") and (current.get("spec") or {}).get("nodeName"):
                terminating = self._terminate_bound_pod(rt, current, options.get("gracePeriodSeconds"))
                if terminating is not None:
                    return terminating, False
            policy = options.get("propagationPolicy") or ("Orphan" if options.get("orphanDependents") else "")
            if not policy and (rt.group, rt.plural) == ("batch", "jobs"):
                policy = "Orphan"  # batch/v1 Jobs orphan their pods unless told otherwise
            gc_finalizer = {"Orphan": "orphan", "Foreground": "foregroundDeletion"}.get(policy)
            held = list(meta.get("finalizers") or [])
            if (held or gc_finalizer) and not is_system:
                if meta.get("deletionTimestamp"):
                    return self._present(rt, current), False
                marked = clone(current)
                marked["metadata"]["deletionTimestamp"] = now()
                marked["metadata"]["deletionGracePeriodSeconds"] = 0
                if gc_finalizer and gc_finalizer not in held:
                    marked["metadata"]["finalizers"] = [*held, gc_finalizer]
                answer = self._commit(rt, "MODIFIED", marked, clone(current))
                if gc_finalizer:  # the garbage collector's part, done at once: it drops its finalizer
                    if not held:
                        self._delete_now(rt, marked)
                    else:
                        released = clone(marked)
                        released["metadata"]["finalizers"] = held
                        self._commit(rt, "MODIFIED", released, clone(marked))
                return answer, False
            return self._delete_now(rt, current), True

    def _terminate_bound_pod(self, rt: ResourceType, current: Obj, grace: Any) -> Obj | None:
        """A pod on a node terminates for its grace period (until the kubelet deletes it with grace 0:
        there is none here); None when it goes at once."""
        meta = current["metadata"]
        if grace is None:
            grace = (current.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        if int(grace) <= 0:
            return None
        if meta.get("deletionTimestamp") and int(meta.get("deletionGracePeriodSeconds", 0)) <= int(grace):
            return self._present(rt, current)
        marked = clone(current)
        when = datetime.now(UTC) + timedelta(seconds=int(grace))
        marked["metadata"]["deletionTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        marked["metadata"]["deletionGracePeriodSeconds"] = int(grace)
        return self._commit(rt, "MODIFIED", marked, clone(current))

    def _delete_now(self, rt: ResourceType, current: Obj) -> Obj:
        name = current["metadata"]["name"]
        if rt.group == "" and rt.plural == "namespaces":
            for key, bucket in list(self.objects.items()):
                owner = next((t for t in self.types.values() if t.storage_key == key), None)
                if owner is None or not owner.namespaced:
                    continue
                for obj_key in [k for k in bucket if k[0] == name]:
                    self._commit(owner, "DELETED", clone(bucket[obj_key]), clone(bucket[obj_key]))
        if rt.group == CRD_GROUP and rt.plural == "customresourcedefinitions":
            spec = current["spec"]
            key = (spec["group"], spec["names"]["plural"])
            owner = next((t for t in self.types.values() if t.crd == name), None)
            for obj in list(self.objects.get(key, {}).values()):
                if owner is not None:
                    self._commit(owner, "DELETED", clone(obj), clone(obj))
            self.objects.pop(key, None)
            self._unregister_crd(name)
        gone = clone(current)
        if rt.group == "" and rt.plural == "namespaces":
            gone["metadata"]["deletionTimestamp"] = now()
            gone["status"] = {"phase": "Terminating"}
        if rt.group == "" and rt.plural == "pods":
            gone["metadata"].setdefault("deletionTimestamp", now())
            gone["metadata"].setdefault("deletionGracePeriodSeconds", 0)
        return self._commit(rt, "DELETED", gone, clone(current))

    # ------------------------------------------------------------------ server-side apply

    def _owners(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Manager]:
        return self.managers.get((rt.storage_key, namespace if rt.namespaced else "", name), {})

    def apply_conflicts(self, rt: ResourceType, namespace: str, name: str, manager: str, config: Obj) -> None:
        """409 when ``config`` would change fields other managers own (an apply without force)."""
        with self.cond:
            current = self._bucket(rt).get((namespace if rt.namespaced else "", name))
            if current is None:
                return
            served = self._present(rt, current)
            conflicts = [
                (other, path)
                for path in sorted(leaf_fields(config))
                if _at(config, path) != _at(served, path)
                for other, entry in sorted(self._owners(rt, namespace, name).items())
                if other != manager and rt.stored_path(path) in entry.fields
            ]
            if conflicts:
                raise E.apply_conflict([(self._owners(rt, namespace, name)[m].shown(m), p) for m, p in conflicts])

    def dropped_by_apply(
        self, rt: ResourceType, namespace: str, name: str, manager: str, config: Obj
    ) -> set[FieldPath]:
        """Fields ``manager`` applied last time, leaves out of ``config`` now, and no other manager owns."""
        owners = self._owners(rt, namespace, name)
        others = set().union(*(m.fields for n, m in owners.items() if n != manager))
        mine = owners[manager].fields if manager in owners and owners[manager].operation == "Apply" else set()
        dropped = mine - {rt.stored_path(p) for p in leaf_fields(config)} - others
        return {rt.served_path(p) for p in dropped}

    def record_apply(self, rt: ResourceType, namespace: str, name: str, manager: str, config: Obj) -> None:
        with self.cond:
            key = (rt.storage_key, namespace if rt.namespaced else "", name)
            if (key[1], name) in self._bucket(rt):
                fields = {rt.stored_path(p) for p in leaf_fields(config)}
                self.managers.setdefault(key, {})[manager] = Manager(fields, "Apply", rt.api_version, now())

    # ------------------------------------------------------------------ watch support

    def oldest_rv(self) -> int:
        with self.cond:
            return self.events[0].rv if self.events else self.rv + 1

    def events_after(self, cursor: int, wait: float) -> list[WatchEvent]:
        """Events with rv > cursor, waiting up to ``wait`` seconds for one; 410 Expired if some are gone."""
        with self.cond:
            if cursor < self.rv and cursor + 1 < self.oldest_rv():
                raise E.expired(f"too old resource version: {cursor} ({self.oldest_rv() - 1})")
            if not self.events or self.events[-1].rv <= cursor:
                self.cond.wait(wait)
            if cursor < self.rv and cursor + 1 < self.oldest_rv():
                raise E.expired(f"too old resource version: {cursor} ({self.oldest_rv() - 1})")
            return [e for e in self.events if e.rv > cursor]

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
