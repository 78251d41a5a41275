"""Patch formats: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch.

Strategic merge knows the list merge keys of the built-in fields that appear in
the Volcano, kata-deploy and MCO manifests (containers, env, ports, volumes,
volumeMounts, webhooks, conditions, ...). Lists without a known key are
replaced, as the real server does for atomic lists. Directives: ``$patch``
(replace/delete/merge), ``$retainKeys``, ``$deleteFromPrimitiveList/<f>``;
``$setElementOrder/<f>``. Merged lists are ordered as the real server orders
them: items named in the patch (or in ``$setElementOrder``) in that order,
interleaved with the others by the original order.
"""

from __future__ import annotations

from typing import Any

from tests.kubeapi.errors import ApiError, go_json_type
from tests.kubeapi.jsonutil import clone

# field name -> merge key, for lists of objects with patchStrategy "merge" in the Kubernetes Go types.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "conditions": "type",
    "webhooks": "name",
    "taints": "key",
    "addresses": "type",
    "ownerReferences": "uid",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
}
# Lists of scalars with patchStrategy "merge" (union instead of replace).
MERGE_PRIMITIVES = {"finalizers"}
_CONTAINER_LISTS = {"containers", "initContainers", "ephemeralContainers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return clone(patch)
    out = clone(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# ----------------------------------------------------------------------------- JSON patch


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"JSON pointer {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, list):
            doc = doc[int(part)]
        elif isinstance(doc, dict):
            doc = doc[part]
        else:
            raise KeyError(part)
    return doc


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            index = int(last)
            if index > len(parent):
                raise IndexError(index)
            parent.insert(index, value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise KeyError(last)
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    parent = _walk(doc, parts[:-1])
    if isinstance(parent, list):
        return parent.pop(int(parts[-1]))
    return parent.pop(parts[-1])


def json_patch(target: Any, ops: Any) -> Any:
    """Apply RFC 6902 operations; failures are 422 like the real server's."""
    doc = clone(target)
    if not isinstance(ops, list):
        go_type = "[]handlers.jsonPatchOp"
        message = f"error decoding patch: json: cannot unmarshal {go_json_type(ops)} into Go value of type {go_type}"
        raise ApiError(400, "BadRequest", message)
    try:
        for op in ops:
            kind = op["op"]
            parts = _pointer(op["path"])
            if kind == "add":
                doc = _add(doc, parts, clone(op["value"]))
            elif kind == "remove":
                _remove(doc, parts)
            elif kind == "replace":
                _walk(doc, parts)  # must exist
                if parts:
                    _remove(doc, parts)
                doc = _add(doc, parts, clone(op["value"]))
            elif kind in ("move", "copy"):
                src = _pointer(op["from"])
                value = clone(_walk(doc, src))
                if kind == "move":
                    _remove(doc, src)
                doc = _add(doc, parts, value)
            elif kind == "test":
                if _walk(doc, parts) != op["value"]:
                    raise ValueError(f"testing value {op['path']} failed")
            else:
                raise ValueError(f"Unexpected kind: {kind}")
    except (KeyError, IndexError, ValueError, TypeError) as e:
        # the real server says no more than this (the reason stays in its log)
        raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request", {}) from e
    return doc


# ----------------------------------------------------------------------------- strategic merge patch


def strategic_merge(target: Any, patch: Any, path: tuple[str, ...] = ()) -> Any:
    """Strategic merge of ``patch`` into ``target`` for built-in kinds (see module docstring)."""
    if not isinstance(patch, dict):
        return clone(patch)
    directive = patch.get("$patch")
    body = {k: v for k, v in patch.items() if k != "$patch"}
    if directive == "replace":
        return _strip(body)
    if directive == "delete":
        return None
    out = clone(target) if isinstance(target, dict) else {}
    retain = body.pop("$retainKeys", None)
    for key, order in list(body.items()):  # lists with an order directive: merged, then put in that order
        if not key.startswith("$setElementOrder/") or not isinstance(order, list):
            continue
        name = key.split("/", 1)[1]
        original = out.get(name) if isinstance(out.get(name), list) else []
        merged = _merge_list(original, body.pop(name), (*path, name)) if name in body else original
        merge_key = None if name in MERGE_PRIMITIVES else _merge_key((*path, name))
        if merged or name in out:
            out[name] = _order(
                merged, order, original, lambda v, k=merge_key: v.get(k) if k and isinstance(v, dict) else v
            )
    for key, value in body.items():
        if key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            if isinstance(out.get(name), list):
                out[name] = [v for v in out[name] if v not in value]
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list):
            out[key] = _merge_list(out.get(key), value, (*path, key))
        elif isinstance(value, dict):
            merged = strategic_merge(out.get(key), value, (*path, key))
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
        else:
            out[key] = value
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _merge_key(path: tuple[str, ...]) -> str | None:
    name = path[-1]
    if name == "ports":
        if len(path) >= 3 and path[-2] == "[]" and path[-3] in _CONTAINER_LISTS:
            return "containerPort"
        if path == ("spec", "ports"):
            return "port"
        return None
    return MERGE_KEYS.get(name)


def _merge_list(target: Any, patch: list[Any], path: tuple[str, ...]) -> list[Any]:
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [_strip(i) for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")]
    original = clone(target) if isinstance(target, list) else []
    if path[-1] in MERGE_PRIMITIVES:
        merged = original + [v for v in patch if v not in original]
        return _order(merged, patch, original, lambda v: v)
    key = _merge_key(path)
    if key is None or not all(isinstance(i, dict) for i in patch):
        return [_strip(i) for i in patch]
    out = clone(original)
    for item in patch:
        match = next((i for i, o in enumerate(out) if isinstance(o, dict) and o.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if match is not None:
                out.pop(match)
        elif match is None:
            out.append(_strip(item))
        else:
            out[match] = strategic_merge(out[match], item, (*path, "[]"))
    kept = [i for i in patch if i.get("$patch") != "delete"]
    return _order(out, kept, original, lambda v: v.get(key) if isinstance(v, dict) else v)


def _order(merged: list[Any], patch: list[Any], original: list[Any], key: Any) -> list[Any]:
    """The order of a merged list, as strategicpatch's normalizeElementOrder gives it: the items named in
    the patch (in patch order) and the server-only ones (in their order) interleaved by the original order,
    a patch item not in the original going first."""
    patch_keys = [key(i) for i in patch]
    server_keys = [key(i) for i in original]
    from_patch = sorted((i for i in merged if key(i) in patch_keys), key=lambda i: patch_keys.index(key(i)))
    server_only = [i for i in merged if key(i) not in patch_keys]
    out: list[Any] = []
    while server_only and from_patch:
        left, right = key(server_only[0]), key(from_patch[0])
        if left in server_keys and right in server_keys and server_keys.index(left) < server_keys.index(right):
            out.append(server_only.pop(0))
        else:
            out.append(from_patch.pop(0))
    return out + server_only + from_patch


def _strip(value: Any) -> Any:
    """Remove patch directives from a value that is used as-is."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
