"""Which pods are online and which offline, and where the kubelet puts their cgroups (pure).

A pod's class comes from its label ``mco.many-core.io/workload-class`` (``online`` or
``offline``) when it has one; otherwise a critical pod (priority class ``system-cluster-critical``
or ``system-node-critical``, or their priority: cluster add-ons such as Volcano's own scheduler
and controllers run BestEffort with it) is online; otherwise it is offline when its QoS class or
its runtime class matches the policy (by default: BestEffort pods and ``kata-*`` runtime
classes), and online otherwise. The analyzer classifies the pods of each node from the API server and tells that
node's collector; the collector finds each pod's cgroup with :func:`pod_group` and only ever
limits the offline ones.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CLASS_LABEL = "mco.many-core.io/workload-class"
CLASSES = ("online", "offline")
QOS_CLASSES = ("Guaranteed", "Burstable", "BestEffort")
#: Kubernetes' system priority classes, and the lowest priority they give (system-cluster-critical).
CRITICAL_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")
CRITICAL_PRIORITY = 2_000_000_000
DRIVERS = ("systemd", "cgroupfs")
_UID = re.compile(r"[0-9a-fA-F][0-9a-fA-F-]{0,63}")


@dataclass(frozen=True, slots=True)
class WorkloadPolicy:
    """Which unlabelled pods count as offline (``guard.offlineQosClasses`` and
    ``guard.offlineRuntimeClasses`` of the detection rules)."""

    offline_qos_classes: tuple[str, ...] = ("BestEffort",)
    offline_runtime_classes: tuple[str, ...] = ("kata-*",)
    """Shell-style patterns of ``spec.runtimeClassName``."""


@dataclass(frozen=True, slots=True)
class WorkloadPod:
    """One pod of a node as its collector needs it."""

    namespace: str
    name: str
    uid: str
    qos: str
    """``status.qosClass`` (Guaranteed, Burstable, BestEffort)."""
    cls: str
    """online or offline."""


def workload_class(
    labels: Mapping[str, str], qos: str, runtime_class: str, policy: WorkloadPolicy, *, critical: bool = False
) -> str:
    """``online`` or ``offline`` for a pod with these labels, QoS class and runtime class;
    ``critical``: the pod runs with a system priority (see :func:`is_critical`)."""
    chosen = labels.get(CLASS_LABEL)
    if chosen in CLASSES:
        return chosen
    if critical:
        return "online"
    if qos in policy.offline_qos_classes:
        return "offline"
    if runtime_class and any(fnmatch.fnmatchcase(runtime_class, p) for p in policy.offline_runtime_classes):
        return "offline"
    return "online"


def is_critical(spec: Mapping[str, Any]) -> bool:
    """True for a pod spec with a system priority class, or the priority one gives."""
    priority = spec.get("priority")
    return spec.get("priorityClassName") in CRITICAL_PRIORITY_CLASSES or (
        isinstance(priority, int) and not isinstance(priority, bool) and priority >= CRITICAL_PRIORITY
    )


def pod_from_object(pod: Mapping[str, Any], policy: WorkloadPolicy) -> tuple[str, WorkloadPod] | None:
    """(node name, the pod) for a pod object as the API server sends it; None while it is not
    bound to a node, has finished, or lacks what its cgroup path needs."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    node = spec.get("nodeName") or ""
    uid = meta.get("uid") or ""
    qos = status.get("qosClass") or ""
    if not node or status.get("phase") in ("Succeeded", "Failed") or not valid_uid(uid) or qos not in QOS_CLASSES:
        return None
    labels = meta.get("labels") or {}
    cls = workload_class(labels, qos, spec.get("runtimeClassName") or "", policy, critical=is_critical(spec))
    return node, WorkloadPod(meta.get("namespace") or "", meta.get("name") or "", uid, qos, cls)


def valid_uid(uid: str) -> bool:
    """True for a pod UID that can be part of a cgroup path (hex digits and dashes)."""
    return bool(_UID.fullmatch(uid))


def pod_group(uid: str, qos: str, driver: str) -> str:
    """The pod's cgroup below the controller's root, as the kubelet names it with its cgroup
    ``driver`` (systemd: ``kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice``
    with the UID's dashes as underscores; cgroupfs: ``kubepods/besteffort/pod<uid>``).
    Raises ValueError for a UID, QoS class or driver it does not know."""
    if not valid_uid(uid):
        raise ValueError(f"pod UID {uid!r} is not hex digits and dashes")
    if qos not in QOS_CLASSES:
        raise ValueError(f"QoS class {qos!r}; expected one of {', '.join(QOS_CLASSES)}")
    tier = "" if qos == "Guaranteed" else qos.lower()
    if driver == "systemd":
        pod = f"pod{uid.replace('-', '_')}"
        if not tier:
            return f"kubepods.slice/kubepods-{pod}.slice"
        return f"kubepods.slice/kubepods-{tier}.slice/kubepods-{tier}-{pod}.slice"
    if driver == "cgroupfs":
        return f"kubepods/pod{uid}" if not tier else f"kubepods/{tier}/pod{uid}"
    raise ValueError(f"cgroup driver {driver!r}; expected one of {', '.join(DRIVERS)}")
