"""Patch formats over HTTP: strategic merge by merge keys, JSON merge patch, JSON patch, server-side apply."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client

from tests.kubeapi.patch import merge_patch, strategic_merge
from tests.kubeapi_tests.conftest import Backend, raw


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


def _deployments(backend: Backend) -> str:
    return f"/apis/apps/v1/namespaces/{backend.namespace}/deployments"


def _patch(backend: Backend, path: str, patch: Any, content_type: str) -> tuple[int, Any]:
    return raw(backend, "PATCH", path, patch, {"Content-Type": content_type})


def test_strategic_merge_merges_containers_env_and_ports_by_key(backend: Backend) -> None:
    assert raw(backend, "POST", _deployments(backend), _deployment())[0] == 201
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
    code, out = _patch(backend, _deployments(backend) + "/web", patch, "application/strategic-merge-patch+json")
    assert code == 200
    spec = out["spec"]["template"]["spec"]
    app, sidecar = spec["containers"]
    assert (app["image"], sidecar["name"]) == ("app:2", "sidecar")
    assert app["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "C", "value": "3"}]
    # Without $setElementOrder the patch's items come first unless the original orders them.
    assert [p["containerPort"] for p in app["ports"]] == [9090, 80]
    assert spec["tolerations"] == [{"key": "y", "operator": "Exists"}]  # no merge key: replaced
    assert out["metadata"]["generation"] == 2
    # $patch: delete removes one item by key.
    remove = {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}}
    code, out = _patch(backend, _deployments(backend) + "/web", remove, "application/strategic-merge-patch+json")
    assert [c["name"] for c in out["spec"]["template"]["spec"]["containers"]] == ["app"]


def test_merge_patch_replaces_lists_and_null_deletes(backend: Backend) -> None:
    raw(backend, "POST", _deployments(backend), _deployment())
    patch = {
        "metadata": {"labels": {"a": None, "b": "2"}},
        "spec": {"template": {"spec": {"containers": [{"name": "only", "image": "x"}]}}},
    }
    code, out = _patch(backend, _deployments(backend) + "/web", patch, "application/merge-patch+json")
    assert code == 200
    assert out["metadata"]["labels"] == {"b": "2"}
    # the real server also fills in container defaults (imagePullPolicy, ...); the emulator does not
    assert [(c["name"], c["image"]) for c in out["spec"]["template"]["spec"]["containers"]] == [("only", "x")]


def test_json_patch_and_failed_test_operation(backend: Backend) -> None:
    raw(backend, "POST", _deployments(backend), _deployment())
    ops = [
        {"op": "test", "path": "/metadata/labels/a", "value": "1"},
        {"op": "add", "path": "/metadata/labels/c", "value": "3"},
        {"op": "remove", "path": "/spec/template/spec/containers/1"},
    ]
    code, out = _patch(backend, _deployments(backend) + "/web", ops, "application/json-patch+json")
    assert code == 200
    assert out["metadata"]["labels"] == {"a": "1", "c": "3"}
    assert len(out["spec"]["template"]["spec"]["containers"]) == 1
    code, failed = _patch(
        backend,
        _deployments(backend) + "/web",
        [{"op": "test", "path": "/metadata/labels/a", "value": "9"}],
        "application/json-patch+json",
    )
    assert (code, failed["reason"], failed["details"]) == (422, "Invalid", {})
    assert failed["message"] == "the server rejected our request due to an error in our request"
    code, refused = _patch(backend, _deployments(backend) + "/web", {"spec": {}}, "text/plain")
    assert (code, refused["message"]) == (415, "415: Unsupported Media Type")


def test_resource_version_in_a_patch_is_a_precondition(backend: Backend) -> None:
    _, created = raw(backend, "POST", _deployments(backend), _deployment())
    rv = created["metadata"]["resourceVersion"]
    ok = {"metadata": {"resourceVersion": rv, "labels": {"x": "1"}}}
    assert _patch(backend, _deployments(backend) + "/web", ok, "application/merge-patch+json")[0] == 200
    code, answer = _patch(backend, _deployments(backend) + "/web", ok, "application/merge-patch+json")
    assert code == 409
    assert answer["reason"] == "Conflict"


def test_server_side_apply_creates_then_owns_its_fields(backend: Backend, api_client: client.ApiClient) -> None:
    path = f"/api/v1/namespaces/{backend.namespace}/configmaps/applied"

    def apply(data: str, manager: str | None = "mco") -> tuple[int, Any]:
        manifest = (
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: {backend.namespace}\n"
            f"data:\n{data}"
        )
        query = f"?fieldManager={manager}&force=true" if manager else ""
        return raw(backend, "PATCH", path + query, manifest.encode(), {"Content-Type": "application/apply-patch+yaml"})

    code, answer = apply("  a: '1'\n", manager=None)
    assert (code, answer["reason"]) == (422, "Invalid")
    assert answer["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    )
    code, created = apply("  a: '1'\n")
    assert code == 201
    assert created["data"] == {"a": "1"}
    assert apply("  c: '3'\n", manager="other")[1]["data"] == {"a": "1", "c": "3"}
    # A manager that stops applying a field removes it, unless another manager applies it too.
    code, merged = apply("  b: '2'\n")
    assert code == 200
    assert merged["data"] == {"b": "2", "c": "3"}
    # An identical apply is a no-op: same resourceVersion.
    code, same = apply("  b: '2'\n")
    assert same["metadata"]["resourceVersion"] == merged["metadata"]["resourceVersion"]
    assert client.CoreV1Api(api_client).read_namespaced_config_map("applied", backend.namespace).data == {
        "b": "2",
        "c": "3",
    }


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
    max_leaves=10,
)


# Emulator only: a unit test of tests/kubeapi/patch.py (no server).
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
