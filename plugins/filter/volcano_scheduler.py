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

Only the scheduler container's ``image`` and ``imagePullPolicy`` and these annotations
are ever patched. The Volcano release is read from the tag of the image Volcano itself
put there (the replaced one while MCO's runs), never guessed.

Filters:
  volcano_scheduler_info(deployment)                   -> container, images, version, service account
  volcano_scheduler_patch(deployment, image='', pull_policy='') -> strategic-merge patch ({} = nothing to do)
  volcano_scheduler_patched(deployment, image='', pull_policy='') -> the Deployment with that patch applied
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
    }


def scheduler_patch(deployment: dict[str, Any], image: str = "", pull_policy: str = "") -> dict[str, Any]:
    """The strategic-merge patch that makes the scheduler container run ``image`` (MCO's, with
    ``pull_policy`` when given), recording what it replaces; ``image`` empty: Volcano's own image
    and pull policy back, MCO's annotations gone. ``{}`` when the Deployment is as asked."""
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
    patch: dict[str, Any] = {}
    if annotations:
        patch["metadata"] = {"annotations": annotations}
    if container:
        patch["spec"] = {"template": {"spec": {"containers": [{"name": info["container"], **container}]}}}
    return patch


def scheduler_patched(deployment: dict[str, Any], image: str = "", pull_policy: str = "") -> dict[str, Any]:
    """``deployment`` with :func:`scheduler_patch` applied (for a manifest's Deployment before it is applied)."""
    out = _plain(deployment)
    patch = scheduler_patch(out, image, pull_policy)
    annotations = out.setdefault("metadata", {}).setdefault("annotations", {})
    for key, value in (_dig(patch, "metadata", "annotations") or {}).items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    if not annotations:
        del out["metadata"]["annotations"]
    for change in _dig(patch, "spec", "template", "spec", "containers") or []:
        for container in out["spec"]["template"]["spec"]["containers"]:
            if container.get("name") == change["name"]:
                container.update(change)
    return out


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
