# Copyright: Many-Core Orchestrator authors
# Mulan PSL v2 (see LICENSE)
"""The installer manifest as the volcano role applies it: admission webhook kept or left out,
images swapped for the operator's copies.

Volcano's installer (``installer/volcano-development.yaml``) runs three programs: the admission
webhook (``vc-webhook-manager``, whose certificate a Job makes with a shell script and openssl at
install time), ``vc-controller-manager`` and ``vc-scheduler``, all pulled from Docker Hub with
``imagePullPolicy: Always``. Two choices change it:

- ``admission=False`` leaves the webhook out: every object named ``volcano-admission...`` (its
  Deployment, certificate Job, Service, ServiceAccounts, roles, ConfigMap) and every
  Mutating/ValidatingWebhookConfiguration that calls that Service. Volcano then neither defaults
  nor validates Jobs and Queues: a Job must name ``schedulerName``, ``queue`` and ``minAvailable``
  itself (docs/scheduling.md).
- ``images`` maps an image the manifest names to ``{image, archive}``: the image to run instead (a
  registry mirror's copy, or one the role imports from ``archive`` into containerd on the nodes).
  Containers running an imported image get ``imagePullPolicy: IfNotPresent``: the installer's
  ``Always`` would make the kubelet pull it from a registry that does not serve it, and fail.

Filter:
  volcano_manifest(docs, admission=true, images={}) -> the documents to apply
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - only outside Ansible
    AnsibleFilterError = ValueError  # type: ignore[misc,assignment]

ADMISSION = "volcano-admission"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
WORKLOAD_KINDS = ("Deployment", "Job", "DaemonSet", "StatefulSet")


class VolcanoManifestError(ValueError):
    """The documents or the choices cannot be applied as asked."""


def _name(doc: Mapping[str, Any]) -> str:
    return str((doc.get("metadata") or {}).get("name") or "")


def is_admission(doc: Mapping[str, Any]) -> bool:
    """True for the webhook's own objects and the webhook configurations that call its Service."""
    if _name(doc).startswith(ADMISSION):
        return True
    if doc.get("kind") in WEBHOOK_KINDS:
        services = {str(((w.get("clientConfig") or {}).get("service") or {}).get("name") or "")
                    for w in doc.get("webhooks") or [] if isinstance(w, dict)}  # fmt: skip
        return any(s.startswith(ADMISSION) for s in services)
    return False


def _containers(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    if doc.get("kind") not in WORKLOAD_KINDS:
        return []
    pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [c for key in ("initContainers", "containers") for c in pod.get(key) or [] if isinstance(c, dict)]


def images_of(docs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every image the documents' workloads name, sorted."""
    return sorted({str(c.get("image")) for d in docs for c in _containers(d) if c.get("image")})


def manifest(
    docs: Sequence[Mapping[str, Any]],
    admission: bool = True,
    images: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Mapping[str, Any]]:
    """``docs`` with the admission webhook left out unless ``admission``, and each image that is a
    key of ``images`` replaced by its ``image`` (``IfNotPresent`` when it has an ``archive``: imported
    on the nodes, no registry serves it).

    Raises VolcanoManifestError for an entry without an image, or a key the manifest does not name
    (a typo would otherwise leave the original image, and the nodes would try to pull it)."""
    if not isinstance(docs, Sequence) or not all(isinstance(d, Mapping) for d in docs):
        raise VolcanoManifestError("the installer manifest must be a list of Kubernetes objects")
    wanted: dict[str, tuple[str, bool]] = {}
    for old, entry in (images or {}).items():
        new = entry.get("image") if isinstance(entry, Mapping) else None
        archive = entry.get("archive") or "" if isinstance(entry, Mapping) else ""
        if not isinstance(new, str) or not new or not isinstance(archive, str):
            raise VolcanoManifestError(
                f"volcano_images[{old!r}] must be a mapping with image: NAME and optionally archive: PATH "
                f"(an archive on the controller holding that image), got {entry!r}"
            )
        wanted[str(old)] = (new, bool(archive))
    kept = [d for d in docs if admission or not is_admission(d)]
    unknown = sorted(set(wanted) - set(images_of(kept)))
    if unknown:
        raise VolcanoManifestError(
            f"volcano_images names {', '.join(unknown)}, which the installer manifest does not run"
            f"{'' if admission else ' (with volcano_admission false)'}; it runs {', '.join(images_of(kept))}. "
            "Use those names as the keys."
        )
    # Only the workloads whose images change are copied (the CRDs are most of the manifest, and
    # copying Ansible's tagged values is slow): the input is never modified.
    out: list[Mapping[str, Any]] = []
    for doc in kept:
        if not any(str(c.get("image") or "") in wanted for c in _containers(doc)):
            out.append(doc)
            continue
        changed = _plain(doc)
        for container in _containers(changed):
            if (found := wanted.get(str(container.get("image") or ""))) is not None:
                container["image"], imported = found
                if imported:
                    container["imagePullPolicy"] = "IfNotPresent"
        out.append(changed)
    return out


def _plain(value: Any) -> Any:
    """A copy in plain Python types (Ansible hands over tagged str/dict subclasses)."""
    for plain in (bool, int, float, str):  # bool before int: bool is an int subclass
        if isinstance(value, plain):
            return plain(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _wrap(func: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except VolcanoManifestError as exc:
            raise AnsibleFilterError(str(exc)) from exc

    return wrapper


class FilterModule:
    """volcano_manifest."""

    def filters(self) -> dict[str, Any]:
        return {"volcano_manifest": _wrap(manifest)}
