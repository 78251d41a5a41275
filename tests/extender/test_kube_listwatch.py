"""KubeListWatch through the real kubernetes client against the emulated API server (tests/kubeapi)."""

from __future__ import annotations

import time
from importlib import resources

import pytest
import yaml
from kubernetes import client as k8s

from mco_py.errors import TransportError
from mco_py.extender.source import WatchReportSource
from mco_py.kube.client import load_api_client
from mco_py.kube.watch import KubeListWatch, WatchExpired
from mco_py.model import GROUP, PLURAL, VERSION

PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"


@pytest.fixture
def api_client(kube_api, kubeconfig):
    api_client = load_api_client(kubeconfig)
    crd = yaml.safe_load(resources.files("mco_py").joinpath("data/crds/nodeinterferencereports.yaml").read_text())
    k8s.ApiextensionsV1Api(api_client).create_custom_resource_definition(crd)
    return api_client


def create(api_client, name: str) -> None:
    k8s.CustomObjectsApi(api_client).create_cluster_custom_object(
        GROUP,
        VERSION,
        PLURAL,
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NodeInterferenceReport", "metadata": {"name": name}},
    )


def test_list_with_field_selector_and_watch_from_version(kube_api, api_client):
    create(api_client, "cluster")
    create(api_client, "other")
    lw = KubeListWatch(api_client, PATH, field_selector="metadata.name=cluster", request_timeout=30)
    items, version = lw.list()
    assert [i["metadata"]["name"] for i in items] == ["cluster"]
    assert version
    k8s.CustomObjectsApi(api_client).delete_cluster_custom_object(GROUP, VERSION, PLURAL, "cluster")
    events = [e for e in lw.watch(version, timeout_seconds=1) if e.type != "BOOKMARK"]
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("DELETED", "cluster")]


def test_expired_version_raises_watch_expired(kube_api, api_client):
    create(api_client, "cluster")
    lw = KubeListWatch(api_client, PATH, request_timeout=30)
    _, version = lw.list()
    create(api_client, "other")
    kube_api.expire_history()
    with pytest.raises(WatchExpired):
        list(lw.watch(version, timeout_seconds=1))


def test_server_errors_and_unreachable_api_are_transport_errors(kube_api, api_client):
    lw = KubeListWatch(api_client, PATH, request_timeout=30)
    kube_api.fail_next(count=1, path=f"^{PATH}$", code=500)
    with pytest.raises(TransportError, match="500"):
        lw.list()
    kube_api.go_down()
    try:
        with pytest.raises(TransportError):
            lw.list()
    finally:
        kube_api.go_up()
    assert lw.list()[0] == []


def test_missing_crd_keeps_basic_mode_and_says_why(kube_api, kubeconfig):
    source = WatchReportSource(KubeListWatch(load_api_client(kubeconfig), PATH, request_timeout=30), backoff_max=0.1)
    source.start()
    try:
        deadline = time.monotonic() + 30
        while "404" not in (source.snapshot().problem or "") and time.monotonic() < deadline:
            time.sleep(0.02)
        snap = source.snapshot()
        assert snap.report is None
        assert not snap.synced
        assert "not listed yet" in (snap.problem or "")
        assert "404" in (snap.problem or "")
    finally:
        source.stop()
