# Copyright: Many-Core Orchestrator authors
# Mulan PSL v2 (see LICENSE)
"""What Volcano's scheduler Deployment runs, and the one patch that swaps its image for MCO's and back.

In plugin mode the scheduler container runs MCO's build of vc-scheduler (``mco-plugin``
compiled in). The Deployment then carries annotations that say what MCO did, so a later
run, the switch back to the extender and the uninstall restore exactly what was there:

- ``mco.many-core.io/replaced-image``: the container's image before MCO replaced it;
- ``mco.many-core.io/plugin-image``: the image MCO set (when the container no longer runs
  it, someone changed the image since — e.g. upgraded Volcano — and the annotations are
  stale: the image in place is Volcano's own again);
- ``mco.many-core.io/replaced-image-pull-policy``: the container's ``imagePullPolicy``
  before MCO set one (only when it did: an imported image needs ``IfNotPresent``, the
  installer's ``Always`` would pull from a registry that does not serve it).

For an HTTPS extender the scheduler must trust MCO's CA (Volcano's extender client is Go's
default ``http.Client``: system roots). ``trust`` (a ConfigMap holding the CA bundle) adds,
and records in ``mco.many-core.io/extender-trust``: the ConfigMap as volume
``mco-extender-trust``, mounted read-only at ``/etc/mco/extender-trust`` in the scheduler
container, and ``SSL_CERT_DIR`` listing Go's default directories plus that one (Go reads the
system bundle file and every directory listed: the system roots stay, MCO's CA joins them;
``SSL_CERT_FILE`` would replace them). The API server is reached with the in-cluster CA, not
system roots. An ``SSL_CERT_DIR`` set by someone else is never replaced (an error says so).
Without ``trust``, what MCO added (by its annotation) is taken away again.

Only the scheduler container's ``image``, ``imagePullPolicy``, that volume mount and
environment variable, the pod's volume and these annotations are ever patched. The Volcano
release is read from the tag of the image Volcano itself put there (the replaced one while MCO's
runs), never guessed.

Filters:
  volcano_scheduler_info(deployment)                   -> container, images, version, service account, trust
  volcano_scheduler_patch(deployment, image='', pull_policy='', trust='') -> strategic-merge patch ({} = nothing to do)
  volcano_scheduler_patched(deployment, image='', pull_policy='', trust='') -> the Deployment with that patch applied
"""

from __future__ import annotations

import re
from typing import Any

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - only outside Ansible
    AnsibleFilterError = ValueError  # type: ignore[misc,assignment]

REPLACED_IMAGE = "mco.many-core.io/replaced-image"
PLUGIN_IMAGE = "mco.many-core.io/plugin-image"
REPLACED_PULL_POLICY = "mco.many-core.io/replaced-image-pull-policy"
ANNOTATIONS = (REPLACED_IMAGE, PLUGIN_IMAGE, REPLACED_PULL_POLICY)
TRUST = "mco.many-core.io/extender-trust"
TRUST_VOLUME = "mco-extender-trust"
TRUST_DIR = "/etc/mco/extender-trust"
#: Go's default certificate directories on Linux (crypto/x509 root_linux.go), then MCO's.
TRUST_CERT_DIR = f"/etc/ssl/certs:/etc/pki/tls/certs:{TRUST_DIR}"
#: A release tag: ``:v1.14.1`` or ``:1.14.1``, optionally pinned by digest.
_VERSION = re.compile(r":v?([0-9]+[.][0-9]+[.][0-9]+)(@.*)?$")


class VolcanoSchedulerError(ValueError):
    """The Deployment cannot be read or patched safely."""


def _plain(value: Any) -> Any:
    """Plain Python types: Ansible hands over tagged str/dict subclasses, slow to deep-copy."""
    for plain in (bool, int, float, str):  # bool before int: bool is an int subclass
        if isinstance(value, plain):
            return plain(value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def image_version(image: str) -> str:
    """``1.14.1`` for ``volcanosh/vc-scheduler:v1.14.1``; empty when the tag is no release."""
    match = _VERSION.search(str(image or ""))
    return match.group(1) if match else ""


def scheduler_info(deployment: dict[str, Any] | None) -> dict[str, Any]:
    """The scheduler container of ``deployment`` (a Deployment as the API returns it, or None).

    The container is the one running MCO's recorded image, else the one whose image names
    ``vc-scheduler``, else the first. ``ours`` is true while it runs the image MCO set.
    ``version`` comes from ``volcano_image``: the image Volcano put there (the replaced one
    while MCO's runs). ``service_account`` is the pod's (``default`` when none is named).
    """
    if not deployment:
        return {
            "found": False, "container": "", "image": "", "pull_policy": "", "ours": False,
            "stale": False, "volcano_image": "", "version": "", "service_account": "", "annotations": {},
            "trust": "", "trust_ours": False, "cert_dir": "",
        }  # fmt: skip
    annotations = _dig(deployment, "metadata", "annotations") or {}
    mine = {k: str(v) for k, v in annotations.items() if k in ANNOTATIONS}
    pod = _dig(deployment, "spec", "template", "spec") or {}
    containers = [c for c in pod.get("containers") or [] if isinstance(c, dict)]
    recorded = mine.get(PLUGIN_IMAGE, "")
    chosen = (
        next((c for c in containers if recorded and c.get("image") == recorded), None)
        or next((c for c in containers if "vc-scheduler" in str(c.get("image", ""))), None)
        or (containers[0] if containers else {})
    )
    image = str(chosen.get("image") or "")
    ours = bool(recorded) and image == recorded and REPLACED_IMAGE in mine
    volcano_image = mine[REPLACED_IMAGE] if ours else image
    return {
        "found": True,
        "container": str(chosen.get("name") or ""),
        "image": image,
        "pull_policy": str(chosen.get("imagePullPolicy") or ""),
        "ours": ours,
        "stale": bool(mine) and not ours,
        "volcano_image": volcano_image,
        "version": image_version(volcano_image),
        "service_account": str(pod.get("serviceAccountName") or pod.get("serviceAccount") or "default"),
        "annotations": mine,
        **_trust_info(annotations, pod, chosen),
    }


def _trust_info(annotations: dict[str, Any], pod: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    """``trust``: the ConfigMap the scheduler container trusts as MCO's CA (mounted at TRUST_DIR, listed in
    SSL_CERT_DIR), else ''; ``trust_ours``: MCO added it (its annotation); ``cert_dir``: SSL_CERT_DIR as set."""
    env = {str(e.get("name")): e for e in container.get("env") or [] if isinstance(e, dict)}
    cert_dir = str(env.get("SSL_CERT_DIR", {}).get("value") or "")
    mount = next((m for m in container.get("volumeMounts") or [] if m.get("mountPath") == TRUST_DIR), None)
    volume = next((v for v in pod.get("volumes") or [] if mount and v.get("name") == mount.get("name")), None)
    trust = str(_dig(volume, "configMap", "name") or "") if TRUST_DIR in cert_dir.split(":") else ""
    return {"trust": trust, "trust_ours": bool(trust) and annotations.get(TRUST) == trust, "cert_dir": cert_dir}


def _trust_patch(info: dict[str, Any], annotations: dict[str, Any], trust: str) -> dict[str, Any]:
    """The pod and container changes that make the scheduler trust ConfigMap ``trust`` (or, '', undo MCO's)."""
    if trust:
        if info["trust"] == trust:
            return {}  # as asked (by MCO, or by hand: then MCO records nothing and will take nothing away)
        if info["cert_dir"] and info["cert_dir"] != TRUST_CERT_DIR:
            raise VolcanoSchedulerError(
                f"the scheduler container sets SSL_CERT_DIR={info['cert_dir']!r}, and MCO would replace it to trust "
                f"its CA: add {TRUST_DIR} to it and mount ConfigMap {trust} there (docs/extender.md, "
                '"Volcano over HTTPS"), or remove it'
            )
        return {
            "annotation": trust,
            "volumes": [{"name": TRUST_VOLUME, "configMap": {"name": trust}}],
            "container": {
                "volumeMounts": [{"name": TRUST_VOLUME, "mountPath": TRUST_DIR, "readOnly": True}],
                "env": [{"name": "SSL_CERT_DIR", "value": TRUST_CERT_DIR}],
            },
        }
    if not annotations.get(TRUST):
        return {}  # MCO added nothing (a trust set up by hand stays)
    return {
        "annotation": None,
        "volumes": [{"name": TRUST_VOLUME, "$patch": "delete"}],
        "container": {
            "volumeMounts": [{"mountPath": TRUST_DIR, "$patch": "delete"}],
            "env": [{"name": "SSL_CERT_DIR", "$patch": "delete"}],
        },
    }


def scheduler_patch(
    deployment: dict[str, Any], image: str = "", pull_policy: str = "", trust: str = ""
) -> dict[str, Any]:
    """The strategic-merge patch that makes the scheduler container run ``image`` (MCO's, with
    ``pull_policy`` when given), recording what it replaces; ``image`` empty: Volcano's own image
    and pull policy back, MCO's annotations gone. ``trust``: the ConfigMap of MCO's CA bundle the
    container trusts (module docstring); empty: MCO's trust taken away. ``{}`` when the Deployment is as asked."""
    deployment, trust = _plain(deployment), str(_plain(trust) or "")
    info = scheduler_info(deployment)
    if not info["container"]:
        raise VolcanoSchedulerError("the scheduler Deployment has no container to patch")
    mine = info["annotations"] if info["ours"] else {}  # stale ones record nothing
    container: dict[str, Any] = {}
    if image:
        original_policy = mine.get(REPLACED_PULL_POLICY, info["pull_policy"])
        want_policy = pull_policy or original_policy
        want = {REPLACED_IMAGE: info["volcano_image"], PLUGIN_IMAGE: image}
        if pull_policy:
            want[REPLACED_PULL_POLICY] = original_policy
        if info["image"] != image:
            container["image"] = image
        if want_policy and info["pull_policy"] != want_policy:
            container["imagePullPolicy"] = want_policy
    else:
        want = {}
        if info["ours"]:
            if info["image"] != mine[REPLACED_IMAGE]:
                container["image"] = mine[REPLACED_IMAGE]
            policy = mine.get(REPLACED_PULL_POLICY, "")
            if policy and info["pull_policy"] != policy:
                container["imagePullPolicy"] = policy
    annotations: dict[str, Any] = {k: v for k, v in want.items() if info["annotations"].get(k) != v}
    annotations.update({k: None for k in info["annotations"] if k not in want})
    trusted = _trust_patch(info, _dig(deployment, "metadata", "annotations") or {}, trust)
    return _assemble(info["container"], annotations, container, trusted)


def _assemble(
    name: str, annotations: dict[str, Any], container: dict[str, Any], trusted: dict[str, Any]
) -> dict[str, Any]:
    """The strategic-merge patch of these annotation, container and trust changes ({} when none)."""
    if trusted:
        annotations[TRUST] = trusted["annotation"]
        container.update(trusted["container"])
    patch: dict[str, Any] = {}
    if annotations:
        patch["metadata"] = {"annotations": annotations}
    pod: dict[str, Any] = {}
    if container:
        pod["containers"] = [{"name": name, **container}]
    if trusted:
        pod["volumes"] = trusted["volumes"]
    if pod:
        patch["spec"] = {"template": {"spec": pod}}
    return patch


def _merge_list(items: list[dict[str, Any]], changes: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """A strategic merge of ``changes`` into ``items`` by ``key`` (``$patch: delete`` removes)."""
    out = [dict(item) for item in items]
    for change in changes:
        out = [item for item in out if item.get(key) != change.get(key)]
        if change.get("$patch") != "delete":
            out.append(change)
    return out


def scheduler_patched(
    deployment: dict[str, Any], image: str = "", pull_policy: str = "", trust: str = ""
) -> dict[str, Any]:
    """``deployment`` with :func:`scheduler_patch` applied (for a manifest's Deployment before it is applied)."""
    out = _plain(deployment)
    patch = scheduler_patch(out, image, pull_policy, trust)
    annotations = out.setdefault("metadata", {}).setdefault("annotations", {})
    for key, value in (_dig(patch, "metadata", "annotations") or {}).items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    if not annotations:
        del out["metadata"]["annotations"]
    pod = out["spec"]["template"]["spec"]
    for change in _dig(patch, "spec", "template", "spec", "containers") or []:
        for container in pod["containers"]:
            if container.get("name") == change["name"]:
                _merge_into(container, change, {"volumeMounts": "mountPath", "env": "name"})
    _merge_into(pod, _dig(patch, "spec", "template", "spec") or {}, {"volumes": "name"}, only_lists=True)
    return out


def _merge_into(
    obj: dict[str, Any], change: dict[str, Any], lists: dict[str, str], *, only_lists: bool = False
) -> None:
    """``change`` merged into ``obj`` as the API server does: the ``lists`` by their merge key, the rest replaced."""
    for field, key in lists.items():
        if field in change:
            obj[field] = _merge_list(obj.get(field) or [], change[field], key)
            if not obj[field]:
                del obj[field]
    if not only_lists:
        obj.update({k: v for k, v in change.items() if k not in lists})


def _wrap(func: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except VolcanoSchedulerError as exc:
            raise AnsibleFilterError(str(exc)) from exc

    return wrapper


class FilterModule:
    """volcano_scheduler_info / volcano_scheduler_patch / volcano_scheduler_patched."""

    def filters(self) -> dict[str, Any]:
        return {
            "volcano_scheduler_info": _wrap(scheduler_info),
            "volcano_scheduler_patch": _wrap(scheduler_patch),
            "volcano_scheduler_patched": _wrap(scheduler_patched),
        }
