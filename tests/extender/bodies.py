"""Realistic extender request bodies, shaped like what Volcano and kube-scheduler send.

Volcano's ``TaskInfo``/``NodeInfo`` have no json tags (keys are Go field names);
the embedded ``Pod``/``Node`` are ordinary Kubernetes JSON. A node's ``Tasks``
carries a full ``TaskInfo`` (with the full Pod) for every pod on it, which is why
predicate bodies are tens to hundreds of KiB. Used by the tests and by
``bench/extender``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

KATA_LABEL = "katacontainers.io/kata-runtime"


def _uid(seed: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, seed))


def pod(
    name: str,
    namespace: str = "default",
    *,
    node: str = "",
    runtime_class: str | None = None,
    containers: int = 2,
    env: int = 12,
) -> dict[str, Any]:
    """A full v1.Pod as the API returns it (managedFields, env, volumes, status)."""
    spec_containers = []
    statuses = []
    for c in range(containers):
        cname = f"{name}-c{c}"
        spec_containers.append(
            {
                "name": cname,
                "image": f"registry.example.com/team/app-{c}:v1.2.{c}",
                "command": ["/bin/app", "--config=/etc/app/config.yaml", f"--shard={c}"],
                "ports": [{"name": "http", "containerPort": 8080 + c, "protocol": "TCP"}],
                "env": [{"name": f"APP_SETTING_{i}", "value": f"value-{i}-{'x' * 24}"} for i in range(env)],
                "resources": {
                    "limits": {"cpu": "500m", "memory": "512Mi"},
                    "requests": {"cpu": "250m", "memory": "256Mi"},
                },
                "volumeMounts": [
                    {"name": "config", "mountPath": "/etc/app"},
                    {
                        "name": "kube-api-access",
                        "readOnly": True,
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    },
                ],
                "livenessProbe": {
                    "httpGet": {"path": "/healthz", "port": 8080 + c, "scheme": "HTTP"},
                    "timeoutSeconds": 1,
                    "periodSeconds": 10,
                    "successThreshold": 1,
                    "failureThreshold": 3,
                },
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        )
        statuses.append(
            {
                "name": cname,
                "state": {"running": {"startedAt": "2026-11-29T20:00:00Z"}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": f"registry.example.com/team/app-{c}:v1.2.{c}",
                "imageID": f"registry.example.com/team/app-{c}@sha256:{'ab' * 32}",
                "containerID": f"containerd://{'cd' * 32}",
                "started": True,
            }
        )
    spec: dict[str, Any] = {
        "volumes": [
            {"name": "config", "configMap": {"name": f"{name}-config", "defaultMode": 420}},
            {
                "name": "kube-api-access",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    ],
                    "defaultMode": 420,
                },
            },
        ],
        "containers": spec_containers,
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {},
        "schedulerName": "volcano",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if node:
        spec["nodeName"] = node
    if runtime_class is not None:
        spec["runtimeClassName"] = runtime_class
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": _uid(f"pod/{namespace}/{name}"),
            "resourceVersion": "123456",
            "creationTimestamp": "2026-11-29T20:00:00Z",
            "labels": {"app": name.rsplit("-", 1)[0], "volcano.sh/job-name": "job-a", "tier": "offline"},
            "annotations": {"scheduling.k8s.io/group-name": "job-a-pg", "volcano.sh/task-spec": "worker"},
            "ownerReferences": [
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": "job-a",
                    "uid": _uid("job-a"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "vc-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-11-29T20:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {"f:labels": {f"f:label{i}": {} for i in range(10)}},
                        "f:spec": {
                            "f:containers": {f'k:{{"name":"{name}-c{c}"}}': {"f:env": {}} for c in range(containers)}
                        },
                    },
                },
            ],
        },
        "spec": spec,
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-11-29T20:00:01Z"}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "hostIP": "10.0.0.11",
            "podIP": "10.244.1.23",
            "podIPs": [{"ip": "10.244.1.23"}],
            "startTime": "2026-11-29T20:00:00Z",
            "containerStatuses": statuses,
            "qosClass": "Burstable",
        },
    }


def node(name: str, *, kata: bool = False, images: int = 20) -> dict[str, Any]:
    """A full v1.Node (labels, conditions, images, nodeInfo)."""
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "many-core-128",
        "topology.kubernetes.io/zone": "zone-a",
    }
    if kata:
        labels[KATA_LABEL] = "true"
    return {
        "metadata": {
            "name": name,
            "uid": _uid(f"node/{name}"),
            "resourceVersion": "987654",
            "creationTimestamp": "2026-11-01T00:00:00Z",
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]},
        "status": {
            "capacity": {"cpu": "128", "memory": "528280928Ki", "pods": "110", "ephemeral-storage": "960Gi"},
            "allocatable": {"cpu": "127", "memory": "527000000Ki", "pods": "110", "ephemeral-storage": "900Gi"},
            "conditions": [
                {
                    "type": t,
                    "status": "False" if t != "Ready" else "True",
                    "lastHeartbeatTime": "2026-11-29T22:00:00Z",
                    "lastTransitionTime": "2026-11-01T00:00:00Z",
                    "reason": f"Kubelet{t}",
                    "message": f"kubelet reports {t}",
                }
                for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.11"}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "ab" * 16,
                "systemUUID": _uid(name),
                "bootID": _uid(name + "boot"),
                "kernelVersion": "6.1.0-27-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.6.20",
                "kubeletVersion": "v1.30.4",
                "kubeProxyVersion": "v1.30.4",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [
                {
                    "names": [
                        f"registry.example.com/team/image-{i}@sha256:{'ef' * 32}",
                        f"registry.example.com/team/image-{i}:v{i}",
                    ],
                    "sizeBytes": 12345678 + i,
                }
                for i in range(images)
            ],
        },
    }


def _resource(milli: int, mem: int) -> dict[str, Any]:
    return {"MilliCPU": milli, "Memory": mem, "ScalarResources": None, "MaxTaskNum": 0}


def task_info(p: dict[str, Any]) -> dict[str, Any]:
    """A Volcano ``TaskInfo`` (Go field names) wrapping the full Pod."""
    meta = p["metadata"]
    return {
        "UID": meta["uid"],
        "Job": f"{meta['namespace']}/job-a-pg",
        "Name": meta["name"],
        "Namespace": meta["namespace"],
        "TaskRole": "worker",
        "Resreq": _resource(500, 536870912),
        "InitResreq": _resource(500, 536870912),
        "NodeName": p["spec"].get("nodeName", ""),
        "Status": 32 if p["spec"].get("nodeName") else 1,
        "Priority": 0,
        "VolumeReady": False,
        "Preemptable": False,
        "BestEffort": False,
        "HasRestartableInitContainer": False,
        "RevocableZone": "",
        "NumaInfo": None,
        "PodVolumes": None,
        "Pod": p,
        "CustomBindErrHandler": None,
        "CustomBindErrHandlerSucceeded": False,
        "LastTransaction": None,
    }


def node_info(name: str, *, pods: int, kata: bool = False) -> dict[str, Any]:
    """A Volcano ``NodeInfo`` with ``pods`` running tasks (full Pods) in ``Tasks``."""
    tasks = {}
    for i in range(pods):
        t = task_info(pod(f"{name}-pod-{i}", node=name))
        tasks[t["UID"]] = t
    n = node(name, kata=kata)
    return {
        "Name": name,
        "Node": n,
        "State": {"Phase": 1, "Reason": ""},
        "Releasing": _resource(0, 0),
        "Pipelined": _resource(0, 0),
        "Idle": _resource(100000, 400000000000),
        "Used": _resource(500 * pods, 536870912 * pods),
        "Allocatable": _resource(127000, 539648000000),
        "Capacity": _resource(128000, 540959670272),
        "ResourceUsage": {"CPUUsageAvg": {}, "MEMUsageAvg": {}},
        "Tasks": tasks,
        "NumaInfo": None,
        "NumaChgFlag": 0,
        "NumaSchedulerInfo": None,
        "RevocableZone": "",
        "OversubscriptionNode": False,
        "OfflineJobEvicting": False,
        "OversubscriptionResource": _resource(0, 0),
        "ImageStates": {
            f"registry.example.com/team/image-{i}:v{i}": {"Size": 12345678 + i, "NumNodes": 3} for i in range(20)
        },
        "Others": {},
    }


def pending_task(name: str = "web-0", runtime_class: str | None = None) -> dict[str, Any]:
    return task_info(pod(name, runtime_class=runtime_class))


def predicate_body(
    node_name: str = "worker-1", *, pods: int = 8, kata: bool = False, runtime_class: str | None = None
) -> dict[str, Any]:
    return {"task": pending_task(runtime_class=runtime_class), "node": node_info(node_name, pods=pods, kata=kata)}


def prioritize_body(nodes: int, *, pods: int = 10, runtime_class: str | None = None) -> dict[str, Any]:
    return {
        "task": pending_task(runtime_class=runtime_class),
        "nodes": [node_info(f"worker-{i}", pods=pods) for i in range(nodes)],
    }


def prioritize_bytes(nodes: int, *, pods: int = 10) -> bytes:
    """Large prioritize bodies built node by node (keeps the generator's own memory low)."""
    head = json.dumps({"task": pending_task()}, separators=(",", ":"))[:-1].encode()
    parts = [head, b',"nodes":[']
    for i in range(nodes):
        if i:
            parts.append(b",")
        parts.append(json.dumps(node_info(f"worker-{i}", pods=pods), separators=(",", ":")).encode())
    parts.append(b"]}")
    return b"".join(parts)


def kube_args(
    nodes: list[dict[str, Any]] | None, names: list[str] | None, *, runtime_class: str | None = None
) -> dict[str, Any]:
    """kube-scheduler ``ExtenderArgs`` (Go field names; Pod/Nodes are Kubernetes JSON)."""
    return {
        "Pod": pod("web-0", runtime_class=runtime_class),
        "Nodes": None if nodes is None else {"metadata": {}, "items": nodes},
        "NodeNames": names,
    }


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()
