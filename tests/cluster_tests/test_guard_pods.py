"""The guard's pods and Events against the real kube-apiserver: pods as the API server stores
them (its qosClass, its UIDs) get their class and the cgroup path the kubelet would give them,
through the analyzer's own list+watch; a relabelled pod changes class; a guard change becomes an
Event that `kubectl describe node` would show."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from mco_py.analysis.guard import Action, GuardChange
from mco_py.analysis.workloads import WorkloadPolicy, pod_group
from mco_py.analyzer.workloads import WorkloadIndex
from mco_py.kube.client import load_api_client
from mco_py.kube.events import NODE_EVENTS_NAMESPACE, NodeEvents
from tests.cluster.cluster import RealCluster
from tests.cluster_tests.conftest import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def api(cluster_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    cluster = RealCluster(tmp_path_factory.mktemp("guard-pods"), cluster_binaries)
    cluster.start(nodes=2)
    try:
        yield load_api_client(cluster.admin_kubeconfig)
    finally:
        cluster.stop()


def _pod(name: str, node: str, resources: dict[str, Any] | None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if resources:
        container["resources"] = resources
    labels = spec.pop("labels", {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [container], **spec},
    }


SMALL = {"cpu": "100m", "memory": "64Mi"}


def test_pods_from_the_real_api_server_get_their_class_and_cgroup(api: Any) -> None:
    core = client.CoreV1Api(api)
    client.NodeV1Api(api).create_runtime_class({"metadata": {"name": "kata-qemu"}, "handler": "kata-qemu"})
    pods = {
        "batch": _pod("batch", "node-1", None),
        "web": _pod("web", "node-1", {"requests": SMALL}),
        "db": _pod("db", "node-1", {"requests": SMALL, "limits": SMALL}),
        "vm-job": _pod("vm-job", "node-1", {"requests": SMALL, "limits": SMALL}, runtimeClassName="kata-qemu"),
        "pinned": _pod("pinned", "node-1", None, labels={"mco.many-core.io/workload-class": "online"}),
        "elsewhere": _pod("elsewhere", "node-2", None),
    }
    uids = {n: core.create_namespaced_pod("default", body).metadata.uid for n, body in pods.items()}
    index = WorkloadIndex(WorkloadPolicy)
    index.watch(api)
    try:
        got = wait_until(lambda: (p := index.pods_of("node-1")) and len(p) == 5 and p, "node-1's five pods")
        by_name = {p.name: p for p in got}
        assert {n: (p.qos, p.cls) for n, p in by_name.items()} == {
            "batch": ("BestEffort", "offline"),
            "web": ("Burstable", "online"),
            "db": ("Guaranteed", "online"),
            "vm-job": ("Guaranteed", "offline"),
            "pinned": ("BestEffort", "online"),
        }
        assert by_name["batch"].uid == uids["batch"]
        uid_ = uids["batch"].replace("-", "_")
        assert pod_group(by_name["batch"].uid, by_name["batch"].qos, "systemd") == (
            f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{uid_}.slice"
        )
        assert pod_group(by_name["db"].uid, by_name["db"].qos, "cgroupfs") == f"kubepods/pod{uids['db']}"
        version = index.version("node-1")
        core.patch_namespaced_pod(
            "web", "default", {"metadata": {"labels": {"mco.many-core.io/workload-class": "offline"}}}
        )
        wait_until(lambda: index.version("node-1") != version, "the relabel seen by the watch")
        assert {p.name: p.cls for p in index.pods_of("node-1") or ()}["web"] == "offline"
        core.delete_namespaced_pod("batch", "default", grace_period_seconds=0)
        wait_until(lambda: len(index.pods_of("node-1") or ()) == 4, "the deleted pod gone")
    finally:
        index.stop()


def test_a_guard_change_is_an_event_on_its_node(api: Any) -> None:
    results: list[str] = []
    events = NodeEvents(api, instance="analyzer-0", on_result=results.append)
    events.start()
    try:
        events.post(GuardChange("node-2", time.time(), Action.THROTTLE, None, 0.25, 37.5, 4))
        wait_until(lambda: results, "the Event posted")
    finally:
        events.stop()
    assert results == ["posted"]
    listed = client.CoreV1Api(api).list_namespaced_event(
        NODE_EVENTS_NAMESPACE, field_selector="involvedObject.kind=Node,involvedObject.name=node-2"
    )
    (event,) = listed.items
    assert event.reason == "OfflineCPUThrottled"
    assert event.message == (
        "offline workloads' CPU limited to 1.00 of 4 CPUs (was unlimited): online CPU pressure 37.5 %"
    )
    assert event.involved_object.uid == "node-2", "as the kubelet's node Events: kubectl describe node finds it"
