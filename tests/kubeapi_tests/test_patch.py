"""Patch formats over HTTP: strategic merge by merge keys, JSON merge patch, JSON patch, server-side apply."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client

from tests.kubeapi import EmulatedAPI
from tests.kubeapi.patch import merge_patch, strategic_merge
from tests.kubeapi_tests.conftest import raw

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"a": "1"}},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "app:1",
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "ports": [{"containerPort": 80, "name": "http"}],
                        },
                        {"name": "sidecar", "image": "side:1"},
                    ],
                    "tolerations": [{"key": "x", "operator": "Exists"}],
                },
            },
        },
    }


def _patch(api: EmulatedAPI, path: str, patch: Any, content_type: str) -> tuple[int, Any]:
    return raw(api, "PATCH", path, patch, {"Content-Type": content_type})


def test_strategic_merge_merges_containers_env_and_ports_by_key(kube_api: EmulatedAPI) -> None:
    assert raw(kube_api, "POST", DEPLOYMENTS, _deployment())[0] == 201
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "app:2",
                            "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
                            "ports": [{"containerPort": 9090, "name": "metrics"}],
                        }
                    ],
                    "tolerations": [{"key": "y", "operator": "Exists"}],
                }
            }
        }
    }
    code, out = _patch(kube_api, DEPLOYMENTS + "/web", patch, "application/strategic-merge-patch+json")
    assert code == 200
    spec = out["spec"]["template"]["spec"]
    app, sidecar = spec["containers"]
    assert (app["image"], sidecar["name"]) == ("app:2", "sidecar")
    assert app["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "C", "value": "3"}]
    assert [p["containerPort"] for p in app["ports"]] == [80, 9090]
    assert spec["tolerations"] == [{"key": "y", "operator": "Exists"}]  # no merge key: replaced
    assert out["metadata"]["generation"] == 2
    # $patch: delete removes one item by key.
    remove = {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}}
    code, out = _patch(kube_api, DEPLOYMENTS + "/web", remove, "application/strategic-merge-patch+json")
    assert [c["name"] for c in out["spec"]["template"]["spec"]["containers"]] == ["app"]


def test_merge_patch_replaces_lists_and_null_deletes(kube_api: EmulatedAPI) -> None:
    raw(kube_api, "POST", DEPLOYMENTS, _deployment())
    patch = {
        "metadata": {"labels": {"a": None, "b": "2"}},
        "spec": {"template": {"spec": {"containers": [{"name": "only", "image": "x"}]}}},
    }
    code, out = _patch(kube_api, DEPLOYMENTS + "/web", patch, "application/merge-patch+json")
    assert code == 200
    assert out["metadata"]["labels"] == {"b": "2"}
    assert out["spec"]["template"]["spec"]["containers"] == [{"name": "only", "image": "x"}]


def test_json_patch_and_failed_test_operation(kube_api: EmulatedAPI) -> None:
    raw(kube_api, "POST", DEPLOYMENTS, _deployment())
    ops = [
        {"op": "test", "path": "/metadata/labels/a", "value": "1"},
        {"op": "add", "path": "/metadata/labels/c", "value": "3"},
        {"op": "remove", "path": "/spec/template/spec/containers/1"},
    ]
    code, out = _patch(kube_api, DEPLOYMENTS + "/web", ops, "application/json-patch+json")
    assert code == 200
    assert out["metadata"]["labels"] == {"a": "1", "c": "3"}
    assert len(out["spec"]["template"]["spec"]["containers"]) == 1
    code, failed = _patch(
        kube_api,
        DEPLOYMENTS + "/web",
        [{"op": "test", "path": "/metadata/labels/a", "value": "9"}],
        "application/json-patch+json",
    )
    assert code == 422
    assert failed["reason"] == "Invalid"
    code, _ = _patch(kube_api, DEPLOYMENTS + "/web", {"spec": {}}, "text/plain")
    assert code == 415


def test_resource_version_in_a_patch_is_a_precondition(kube_api: EmulatedAPI) -> None:
    _, created = raw(kube_api, "POST", DEPLOYMENTS, _deployment())
    rv = created["metadata"]["resourceVersion"]
    ok = {"metadata": {"resourceVersion": rv, "labels": {"x": "1"}}}
    assert _patch(kube_api, DEPLOYMENTS + "/web", ok, "application/merge-patch+json")[0] == 200
    code, answer = _patch(kube_api, DEPLOYMENTS + "/web", ok, "application/merge-patch+json")
    assert code == 409
    assert answer["reason"] == "Conflict"


def test_server_side_apply_creates_then_merges(kube_api: EmulatedAPI, api_client: client.ApiClient) -> None:
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: default\ndata:\n  a: '1'\n"
    path = "/api/v1/namespaces/default/configmaps/applied"
    code, answer = raw(kube_api, "PATCH", path, manifest.encode(), {"Content-Type": "application/apply-patch+yaml"})
    assert code == 400
    assert "fieldManager" in answer["message"]
    query = "?fieldManager=mco&force=true"
    code, created = raw(
        kube_api, "PATCH", path + query, manifest.encode(), {"Content-Type": "application/apply-patch+yaml"}
    )
    assert code == 201
    assert created["data"] == {"a": "1"}
    again = manifest.replace("a: '1'", "b: '2'")
    code, merged = raw(
        kube_api, "PATCH", path + query, again.encode(), {"Content-Type": "application/apply-patch+yaml"}
    )
    assert code == 200
    assert merged["data"] == {"a": "1", "b": "2"}
    # An identical apply is a no-op: same resourceVersion, as the real server answers.
    code, same = raw(kube_api, "PATCH", path + query, again.encode(), {"Content-Type": "application/apply-patch+yaml"})
    assert same["metadata"]["resourceVersion"] == merged["metadata"]["resourceVersion"]
    assert client.CoreV1Api(api_client).read_namespaced_config_map("applied", "default").data == {"a": "1", "b": "2"}


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # shared 2-core machine
@given(
    target=st.dictionaries(st.sampled_from("abcd"), _json, max_size=4),
    patch=st.dictionaries(st.sampled_from("abcd"), _json, max_size=4),
)
def test_merge_patches_are_idempotent(target: dict[str, Any], patch: dict[str, Any]) -> None:
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once
    smp_once = strategic_merge(target, patch)
    assert strategic_merge(smp_once, patch) == smp_once
