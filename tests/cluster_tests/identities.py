"""What each MCO ServiceAccount may and may not do: checked with `kubectl auth can-i` against the
real kube-apiserver (test_mco_on_real_cluster.py) and shown in docs/security.md (tests/docs)."""

from __future__ import annotations

NS = "mco-system"

#: (expected answer, verb, resource[/name][#subresource], namespace) per ServiceAccount.
IDENTITIES = {
    "mco-analyzer": [
        ("yes", "get", "nodeinterferencereports.mco.many-core.io", ""),
        ("yes", "create", "nodeinterferencereports.mco.many-core.io", ""),
        ("yes", "patch", "nodeinterferencereports.mco.many-core.io#status", ""),
        ("no", "delete", "nodeinterferencereports.mco.many-core.io", ""),
        ("no", "patch", "nodeinterferencereports.mco.many-core.io", ""),
        ("yes", "get", "configmaps/mco-detection-rules", NS),
        ("no", "get", "configmaps/other", NS),
        ("no", "list", "configmaps", NS),
        ("no", "update", "configmaps/mco-detection-rules", NS),
        ("yes", "create", "events", NS),
        ("no", "create", "events", "default"),
        ("yes", "create", "leases.coordination.k8s.io", NS),
        ("yes", "update", "leases.coordination.k8s.io/mco-analyzer", NS),
        ("no", "update", "leases.coordination.k8s.io/other", NS),
        ("no", "get", "secrets", NS),
        ("no", "list", "nodes", ""),
        ("no", "create", "pods", "default"),
    ],
    "mco-scheduler-extender": [
        ("yes", "get", "nodeinterferencereports.mco.many-core.io", ""),
        ("yes", "watch", "nodeinterferencereports.mco.many-core.io", ""),
        ("no", "patch", "nodeinterferencereports.mco.many-core.io#status", ""),
        ("no", "create", "nodeinterferencereports.mco.many-core.io", ""),
        ("yes", "list", "nodes", ""),
        ("yes", "watch", "nodes", ""),
        ("no", "patch", "nodes", ""),
        ("no", "get", "secrets", NS),
        ("no", "get", "configmaps", NS),
        ("no", "create", "pods/binding", "default"),
    ],
}
