"""Cluster mode against the emulated Kubernetes API (tests/kubeapi): the watch path end to end.

The extender runs with WatchReportSource + NodeLabelCache over KubeListWatch
(real kubernetes client, real HTTP); the report is written through the API
(CRD from mco_py/data/crds, status subresource) and decisions are read over
the extender's HTTP routes.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from mco_py.analysis.policy import PolicySettings
from mco_py.extender.source import NodeLabelCache, WatchReportSource
from mco_py.kube.client import load_api_client
from mco_py.kube.watch import KubeListWatch
from mco_py.model import GROUP, PLURAL, VERSION, format_time
from tests.waiting import wait_until

from . import bodies, go_contract

NIR_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
V110 = "/volcano/v1.10/predicate"


def status(updated: float, io: float) -> dict[str, Any]:
    return {
        "lastUpdateTime": format_time(updated),
        "analyzer": {"identity": "test", "rulesVersion": "1"},
        "nodes": [
            {"name": "worker-1", "level": "High", "score": 80.0, "signals": {"psiIoSomeAvg10": io}, "reasons": []}
        ],
    }


@pytest.fixture
def cluster(kube_api, kubeconfig, make_extender, clock):
    api_client = load_api_client(kubeconfig)
    crd = yaml.safe_load(resources.files("mco_py").joinpath("data/crds/nodeinterferencereports.yaml").read_text())
    k8s.ApiextensionsV1Api(api_client).create_custom_resource_definition(crd)
    custom = k8s.CustomObjectsApi(api_client)
    custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        PLURAL,
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NodeInterferenceReport", "metadata": {"name": "cluster"}},
    )

    def write(updated: float, io: float) -> None:
        obj = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, "cluster")
        obj["status"] = status(updated, io)
        custom.replace_cluster_custom_object_status(GROUP, VERSION, PLURAL, "cluster", obj)

    source = WatchReportSource(
        KubeListWatch(api_client, NIR_PATH, field_selector="metadata.name=cluster", request_timeout=30),
        backoff_max=0.2,
    )
    labels = NodeLabelCache(KubeListWatch(api_client, "/api/v1/nodes", request_timeout=30), backoff_max=0.2)
    source.start()
    labels.start()
    ext = make_extender(policy=PolicySettings(ttl_seconds=5), source=source, labels=labels)
    yield ext, write, source, k8s.CoreV1Api(api_client), kube_api, clock
    source.stop()
    labels.stop()


def rejected(ext) -> bool:
    status_code, data = ext.post(V110, bodies.dumps(bodies.predicate_body("worker-1", pods=1)))
    assert status_code == 200
    return not go_contract.volcano_predicate_v110(data).passed


def test_report_updates_reach_decisions(cluster):
    ext, write, _, _, _, clock = cluster
    wait_until(lambda: ext.request("GET", "/readyz")[0] == 200)
    assert not rejected(ext)  # the object has no status yet: basic mode
    write(clock.now, 61.2)
    wait_until(lambda: rejected(ext))
    write(clock.now, 0.5)
    wait_until(lambda: not rejected(ext))


def test_relist_after_410(cluster):
    ext, write, source, _, kube_api, clock = cluster
    write(clock.now, 61.2)
    wait_until(lambda: rejected(ext))
    kube_api.go_down()  # the watch drops; the change below is made while nobody watches
    kube_api.go_up()
    kube_api.expire_history()
    write(clock.now, 0.5)
    wait_until(lambda: not rejected(ext))
    kube_api.expire_history()
    write(clock.now, 70.0)
    wait_until(lambda: rejected(ext))
    assert source.reflector_status().relists >= 1


def test_api_down_keeps_report_until_ttl_then_fallback(cluster):
    ext, write, source, _, kube_api, clock = cluster
    write(clock.now, 61.2)
    wait_until(lambda: rejected(ext))
    kube_api.go_down()
    wait_until(lambda: not source.reflector_status().connected)
    clock.now += 4
    assert rejected(ext)  # cached report, 4 s old, TTL 5 s
    clock.now += 2
    assert not rejected(ext)  # 6 s old: basic mode
    assert ext.metric("mco_extender_fallback", {"reason": "stale"}) == 1.0
    kube_api.go_up()


def test_kube_node_cache_capable_uses_watched_node_labels(cluster):
    ext, _, _, core, _, _ = cluster
    core.create_node({"metadata": {"name": "plain", "labels": {"kubernetes.io/os": "linux"}}})
    core.create_node({"metadata": {"name": "kata", "labels": {bodies.KATA_LABEL: "true"}}})
    body = bodies.dumps(bodies.kube_args(None, ["plain", "kata"], runtime_class="kata-qemu"))

    def names():
        return go_contract.kube_filter(ext.post("/kube/filter", body)[1]).node_names

    wait_until(lambda: names() == ["kata"])
