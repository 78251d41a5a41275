"""The pods of every node with their workload class, from a pod watch, for the collectors'
guards (cluster mode with ``guardPods``).

Only what a collector needs is kept of each pod (node, UID, QoS class, runtime class, the class
label, phase); each node's pods are classified with the rules' policy when a stream asks, so a
rules change reclassifies them without a new list.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from mco_py.analysis.workloads import CLASS_LABEL, WorkloadPod, WorkloadPolicy, pod_from_object
from mco_py.kube.watch import KubeListWatch, Reflector


def shrink(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    """What :func:`pod_from_object` reads of a pod, nothing more."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    labels = meta.get("labels") or {}
    label = labels.get(CLASS_LABEL) if isinstance(labels, Mapping) else None
    return {
        "metadata": {
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
            "labels": {CLASS_LABEL: label} if isinstance(label, str) else {},
        },
        "spec": {
            "nodeName": spec.get("nodeName"),
            "runtimeClassName": spec.get("runtimeClassName"),
            "priorityClassName": spec.get("priorityClassName"),
            "priority": spec.get("priority"),
        },
        "status": {"phase": status.get("phase"), "qosClass": status.get("qosClass")},
    }


class WorkloadIndex:
    """Pods by node, kept by a :class:`Reflector` (or fed by :meth:`changed` in tests)."""

    def __init__(self, policy: Callable[[], WorkloadPolicy]) -> None:
        self._policy = policy
        self._lock = threading.Lock()
        self._by_node: dict[str, list[Mapping[str, Any]]] = {}
        self._versions: dict[str, int] = {}
        """Per node: moves whenever its pods change (streams re-send only then)."""
        self._next_version = 1
        self._synced = False
        self._reflector: Reflector | None = None

    def watch(self, api: Any) -> None:
        """Start listing and watching every bound pod through ``api``."""
        source = KubeListWatch(api, "/api/v1/pods", field_selector="spec.nodeName!=")
        self._reflector = Reflector(source, on_change=self.changed, name="pods", transform=shrink)
        self._reflector.start()

    def stop(self) -> None:
        if self._reflector is not None:
            self._reflector.stop()

    def changed(self, snapshot: Mapping[str, Mapping[str, Any]]) -> None:
        by_node: dict[str, list[Mapping[str, Any]]] = {}
        for pod in snapshot.values():
            node = (pod.get("spec") or {}).get("nodeName")
            if isinstance(node, str) and node:
                by_node.setdefault(node, []).append(pod)
        with self._lock:
            for node in by_node.keys() | self._by_node.keys():
                if by_node.get(node) != self._by_node.get(node):
                    self._versions[node] = self._next_version
                    self._next_version += 1
            for node in self._by_node.keys() - by_node.keys():
                self._versions.pop(node, None)  # no pods: version 0 again
            self._by_node = by_node
            self._synced = True

    def version(self, node: str) -> int | None:
        """Moves whenever ``node``'s pods change; None before the first list."""
        with self._lock:
            return self._versions.get(node, 0) if self._synced else None

    def pods_of(self, node: str) -> tuple[WorkloadPod, ...] | None:
        """``node``'s pods with their class now (sorted), or None before the first list."""
        with self._lock:
            if not self._synced:
                return None
            raw = self._by_node.get(node, [])
        policy = self._policy()
        found = (pod_from_object(p, policy) for p in raw)
        return tuple(sorted((f[1] for f in found if f is not None), key=lambda p: (p.namespace, p.name)))
