"""Discovery, CRUD and error answers of the emulated API, driven by the real kubernetes client."""

from __future__ import annotations

import pytest
from kubernetes import client, dynamic
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from tests.kubeapi import EmulatedAPI
from tests.kubeapi_tests.conftest import body, mco_crd, raw


def test_version_is_at_least_1_24(api_client: client.ApiClient) -> None:
    info = client.VersionApi(api_client).get_code()
    assert (int(info.major), int(info.minor)) >= (1, 24)


def test_discovery_lists_builtins_with_scope_kind_and_subresources(dyn: dynamic.DynamicClient) -> None:
    deploy = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    assert deploy.namespaced
    assert deploy.name == "deployments"
    assert "deploy" in deploy.short_names
    assert "status" in deploy.subresources
    runtime_class = dyn.resources.get(api_version="node.k8s.io/v1", kind="RuntimeClass")
    assert not runtime_class.namespaced
    assert dyn.resources.get(api_version="v1", kind="Node").subresources.get("status") is not None
    for api_version, kind in [
        ("v1", "Endpoints"),
        ("discovery.k8s.io/v1", "EndpointSlice"),
        ("coordination.k8s.io/v1", "Lease"),
        ("events.k8s.io/v1", "Event"),
        ("batch/v1", "CronJob"),
        ("scheduling.k8s.io/v1", "PriorityClass"),
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ]:
        assert dyn.resources.get(api_version=api_version, kind=kind).verbs


def test_crd_is_established_and_discoverable_until_deleted(dyn: dynamic.DynamicClient) -> None:
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    with pytest.raises(ResourceNotFoundError):
        dyn.resources.get(api_version="mco.many-core.io/v1alpha1", kind="NodeInterferenceReport")
    created = crds.create(body=mco_crd())
    conditions = {c.type: c.status for c in created.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert created.status.acceptedNames.listKind == "NodeInterferenceReportList"
    nir = dyn.resources.get(api_version="mco.many-core.io/v1alpha1", kind="NodeInterferenceReport")
    assert not nir.namespaced
    assert nir.short_names == ["nir"]
    assert "status" in nir.subresources
    crds.delete(name="nodeinterferencereports.mco.many-core.io")
    dyn.resources.invalidate_cache()
    with pytest.raises(ResourceNotFoundError):
        dyn.resources.get(api_version="mco.many-core.io/v1alpha1", kind="NodeInterferenceReport")


def test_configmap_crud_with_resource_versions(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "cfg"}, "data": {"a": "1"}})
    assert created.metadata.uid
    assert created.metadata.creation_timestamp
    created.data["a"] = "2"
    updated = core.replace_namespaced_config_map("cfg", "default", created)
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    assert updated.metadata.uid == created.metadata.uid
    assert core.read_namespaced_config_map("cfg", "default").data == {"a": "2"}
    # Stale resourceVersion: 409 Conflict naming the object.
    with pytest.raises(client.ApiException) as stale:
        core.replace_namespaced_config_map("cfg", "default", created)
    assert stale.value.status == 409
    status = body(stale.value)
    assert status["reason"] == "Conflict"
    assert status["details"] == {"name": "cfg", "kind": "configmaps"}
    # DELETE answers a Status with the deleted object's uid.
    deleted = core.delete_namespaced_config_map("cfg", "default")
    assert deleted["status"] == "Success"
    assert deleted["details"]["uid"] == created.metadata.uid
    with pytest.raises(client.ApiException) as gone:
        core.read_namespaced_config_map("cfg", "default")
    assert gone.value.status == 404
    assert body(gone.value)["message"] == 'configmaps "cfg" not found'


def test_errors_are_status_objects_with_reasons(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "dup"}})
    with pytest.raises(client.ApiException) as dup:
        core.create_namespaced_config_map("default", {"metadata": {"name": "dup"}})
    assert dup.value.status == 409
    assert body(dup.value)["reason"] == "AlreadyExists"
    with pytest.raises(client.ApiException) as missing_ns:
        core.create_namespaced_config_map("nowhere", {"metadata": {"name": "x"}})
    assert missing_ns.value.status == 404
    assert body(missing_ns.value)["details"] == {"name": "nowhere", "kind": "namespaces"}
    with pytest.raises(client.ApiException) as bad_name:
        core.create_namespaced_config_map("default", {"metadata": {"name": "Bad_Name"}})
    invalid = body(bad_name.value)
    assert bad_name.value.status == 422
    assert invalid["reason"] == "Invalid"
    assert invalid["details"]["causes"][0]["field"] == "metadata.name"
    assert invalid["message"].startswith('ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"')
    with pytest.raises(client.ApiException) as no_name:
        core.create_namespaced_config_map("default", {"metadata": {}})
    assert "metadata.name: Required value: name or generateName is required" in body(no_name.value)["message"]
    with pytest.raises(client.ApiException) as wrong_ns:
        core.create_namespaced_config_map("default", {"metadata": {"name": "x", "namespace": "kube-system"}})
    assert wrong_ns.value.status == 400
    assert body(wrong_ns.value)["reason"] == "BadRequest"


def test_method_not_allowed_and_unknown_paths(kube_api: EmulatedAPI) -> None:
    code, status = raw(kube_api, "PUT", "/api/v1/namespaces/default/configmaps", {})
    assert code == 405
    assert status["reason"] == "MethodNotAllowed"
    code, status = raw(kube_api, "GET", "/apis/example.com/v1/widgets")
    assert code == 404
    assert status["reason"] == "NotFound"
    # A cluster-scoped resource has no namespaced path, a namespaced one no cluster-wide item path.
    assert raw(kube_api, "GET", "/api/v1/namespaces/default/nodes")[0] == 404
    assert raw(kube_api, "GET", "/api/v1/configmaps/x")[0] == 404
    code, text = raw(kube_api, "GET", "/healthz")
    assert (code, text) == (200, "ok")


def test_generate_name_list_all_namespaces_and_selectors(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "team"}})
    a = core.create_namespaced_config_map("team", {"metadata": {"generateName": "cm-", "labels": {"tier": "a"}}})
    assert a.metadata.name.startswith("cm-")
    assert len(a.metadata.name) == 8
    core.create_namespaced_config_map("default", {"metadata": {"name": "b", "labels": {"tier": "b", "x": "1"}}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    everything = core.list_config_map_for_all_namespaces()
    assert {i.metadata.name for i in everything.items} == {a.metadata.name, "b", "c"}
    assert int(everything.metadata.resource_version) >= int(a.metadata.resource_version)

    def names(**kw: str) -> set[str]:
        return {i.metadata.name for i in core.list_config_map_for_all_namespaces(**kw).items}

    assert names(label_selector="tier in (a,b)") == {a.metadata.name, "b"}
    assert names(label_selector="tier notin (a)") == {"b", "c"}
    assert names(label_selector="tier==b,x") == {"b"}
    assert names(label_selector="!tier") == {"c"}
    assert names(label_selector="tier!=a") == {"b", "c"}
    assert names(field_selector="metadata.namespace=team") == {a.metadata.name}
    assert names(field_selector="metadata.name!=b,metadata.namespace=default") == {"c"}
    with pytest.raises(client.ApiException) as bad_field:
        core.list_config_map_for_all_namespaces(field_selector="data.x=1")
    assert bad_field.value.status == 400


def test_list_pagination(core: client.CoreV1Api) -> None:
    for i in range(5):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"p{i}"}})
    first = core.list_namespaced_config_map("default", limit=2)
    assert [i.metadata.name for i in first.items] == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    rest = core.list_namespaced_config_map("default", limit=10, _continue=first.metadata._continue)
    assert [i.metadata.name for i in rest.items] == ["p2", "p3", "p4"]
    assert rest.metadata._continue is None


def test_deleting_a_namespace_deletes_its_contents(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "doomed"}})
    core.create_namespaced_config_map("doomed", {"metadata": {"name": "inside"}})
    core.create_namespaced_service_account("doomed", {"metadata": {"name": "sa"}})
    answer = core.delete_namespace("doomed")
    assert answer["status"]["phase"] == "Terminating"
    assert not core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=doomed").items
    with pytest.raises(client.ApiException):
        core.read_namespace("doomed")
    names = {n.metadata.name for n in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public"} <= names


def test_finalizers_hold_deletion_until_removed(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "held", "finalizers": ["example.com/x"]}})
    core.delete_namespaced_config_map("held", "default")
    held = core.read_namespaced_config_map("held", "default")
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(client.ApiException) as gone:
        core.read_namespaced_config_map("held", "default")
    assert gone.value.status == 404


def test_node_status_subresource_and_labels(core: client.CoreV1Api) -> None:
    node = {"metadata": {"name": "worker-1"}, "status": {"capacity": {"cpu": "4"}}}
    created = core.create_node(node)
    assert created.status.capacity == {"cpu": "4"}  # nodes keep status given on create
    core.patch_node(
        "worker-1", {"metadata": {"labels": {"mco.many-core.io/role": "node"}}, "status": {"capacity": {"cpu": "8"}}}
    )
    after = core.read_node("worker-1")
    assert after.metadata.labels == {"mco.many-core.io/role": "node"}
    assert after.status.capacity == {"cpu": "4"}
    core.patch_node_status("worker-1", {"status": {"capacity": {"cpu": "8"}}, "metadata": {"labels": {"x": "y"}}})
    after = core.read_node("worker-1")
    assert after.status.capacity == {"cpu": "8"}
    assert after.metadata.labels == {"mco.many-core.io/role": "node"}
    with pytest.raises(client.ApiException) as bad_label:
        core.patch_node("worker-1", {"metadata": {"labels": {"mco.many-core.io/role": "not a value!"}}})
    assert bad_label.value.status == 422


def test_dry_run_changes_nothing(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "dry"}}, dry_run="All")
    with pytest.raises(client.ApiException):
        core.read_namespaced_config_map("dry", "default")


def test_workload_generation_bumps_on_spec_changes_only(api_client: client.ApiClient) -> None:
    apps = client.AppsV1Api(api_client)
    deployment = {
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }
    created = apps.create_namespaced_deployment("default", deployment)
    assert created.metadata.generation == 1
    labelled = apps.patch_namespaced_deployment("web", "default", {"metadata": {"labels": {"a": "b"}}})
    assert labelled.metadata.generation == 1
    scaled = apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 3}})
    assert scaled.metadata.generation == 2
    status = apps.patch_namespaced_deployment_status("web", "default", {"status": {"readyReplicas": 3}})
    assert status.metadata.generation == 2
    assert status.status.ready_replicas == 3


def test_all_required_kinds_round_trip(dyn: dynamic.DynamicClient, kube_api: EmulatedAPI) -> None:
    objects = [
        ("v1", "Secret", {"metadata": {"name": "s", "namespace": "default"}, "stringData": {"k": "v"}}),
        ("v1", "Service", {"metadata": {"name": "svc", "namespace": "default"}, "spec": {"ports": [{"port": 80}]}}),
        ("v1", "Endpoints", {"metadata": {"name": "svc", "namespace": "default"}}),
        (
            "discovery.k8s.io/v1",
            "EndpointSlice",
            {"metadata": {"name": "svc-1", "namespace": "default"}, "addressType": "IPv4", "endpoints": []},
        ),
        ("v1", "ServiceAccount", {"metadata": {"name": "sa", "namespace": "default"}}),
        ("apps/v1", "DaemonSet", {"metadata": {"name": "ds", "namespace": "default"}, "spec": {}}),
        ("apps/v1", "StatefulSet", {"metadata": {"name": "sts", "namespace": "default"}, "spec": {}}),
        ("batch/v1", "Job", {"metadata": {"name": "job", "namespace": "default"}, "spec": {}}),
        (
            "batch/v1",
            "CronJob",
            {"metadata": {"name": "cj", "namespace": "default"}, "spec": {"schedule": "* * * * *"}},
        ),
        ("node.k8s.io/v1", "RuntimeClass", {"metadata": {"name": "kata-qemu"}, "handler": "kata-qemu"}),
        (
            "coordination.k8s.io/v1",
            "Lease",
            {"metadata": {"name": "mco-analyzer", "namespace": "kube-system"}, "spec": {"holderIdentity": "a"}},
        ),
        (
            "v1",
            "Event",
            {
                "metadata": {"name": "e1", "namespace": "default"},
                "reason": "Test",
                "involvedObject": {"kind": "Node", "name": "n"},
            },
        ),
        (
            "events.k8s.io/v1",
            "Event",
            {
                "metadata": {"name": "e2", "namespace": "default"},
                "reason": "Test",
                "action": "A",
                "eventTime": "2026-01-01T00:00:00.000000Z",
                "reportingController": "x",
                "reportingInstance": "y",
            },
        ),
        ("rbac.authorization.k8s.io/v1", "Role", {"metadata": {"name": "r", "namespace": "default"}, "rules": []}),
        (
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            {
                "metadata": {"name": "rb", "namespace": "default"},
                "roleRef": {"kind": "Role", "name": "r", "apiGroup": "rbac.authorization.k8s.io"},
            },
        ),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", {"metadata": {"name": "system:mco:reader"}, "rules": []}),
        (
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            {
                "metadata": {"name": "crb"},
                "roleRef": {
                    "kind": "ClusterRole",
                    "name": "system:mco:reader",
                    "apiGroup": "rbac.authorization.k8s.io",
                },
            },
        ),
        ("scheduling.k8s.io/v1", "PriorityClass", {"metadata": {"name": "high"}, "value": 1000}),
        (
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            {"metadata": {"name": "v"}, "webhooks": []},
        ),
        (
            "admissionregistration.k8s.io/v1",
            "MutatingWebhookConfiguration",
            {"metadata": {"name": "m"}, "webhooks": []},
        ),
    ]
    for api_version, kind, obj in objects:
        resource = dyn.resources.get(api_version=api_version, kind=kind)
        namespace = obj["metadata"].get("namespace")
        resource.create(body=obj, namespace=namespace)
        back = resource.get(name=obj["metadata"]["name"], namespace=namespace)
        assert back.kind == kind
        assert back.apiVersion == api_version
        assert back.metadata.name == obj["metadata"]["name"]
    events_v1 = dyn.resources.get(api_version="v1", kind="Event")
    assert [
        e.metadata.name for e in events_v1.get(namespace="default", field_selector="involvedObject.kind=Node").items
    ] == ["e1"]
    assert any(r.path.endswith("/runtimeclasses") and r.method == "POST" for r in kube_api.requests)


def test_immutable_fields_and_protected_namespaces(api_client: client.ApiClient, core: client.CoreV1Api) -> None:
    rbac = client.RbacAuthorizationV1Api(api_client)
    binding = {
        "metadata": {"name": "b"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}],
    }
    rbac.create_cluster_role_binding(binding)
    with pytest.raises(client.ApiException) as role_ref:
        rbac.patch_cluster_role_binding("b", {"roleRef": {"name": "edit"}})
    assert role_ref.value.status == 422
    assert body(role_ref.value)["details"]["causes"][0]["message"].endswith("cannot change roleRef")
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "frozen"}, "data": {"a": "1"}, "immutable": True}
    )
    with pytest.raises(client.ApiException) as frozen:
        core.patch_namespaced_config_map("frozen", "default", {"data": {"a": "2"}})
    assert "data: Forbidden: field is immutable when `immutable` is set" in body(frozen.value)["message"]
    with pytest.raises(client.ApiException) as protected:
        core.delete_namespace("kube-system")
    assert protected.value.status == 403
    with pytest.raises(client.ApiException) as with_rv:
        core.create_namespaced_config_map("default", {"metadata": {"name": "rv", "resourceVersion": "5"}})
    assert with_rv.value.status == 400


def test_secret_string_data_is_encoded_and_maps_must_hold_strings(
    core: client.CoreV1Api, kube_api: EmulatedAPI
) -> None:
    secret = core.create_namespaced_secret("default", {"metadata": {"name": "token"}, "stringData": {"token": "abc"}})
    assert secret.data == {"token": "YWJj"}
    assert secret.string_data is None
    assert secret.type == "Opaque"
    code, answer = raw(
        kube_api, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "n"}, "data": {"replicas": 3}}
    )
    assert code == 400
    assert answer["message"].endswith(
        "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
    )
    code, _ = raw(
        kube_api,
        "POST",
        "/api/v1/namespaces/default/secrets",
        {"metadata": {"name": "b"}, "data": {"k": "not base64!"}},
    )
    assert code == 400

    code, answer = raw(kube_api, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": 5}})
    assert code == 400
    assert answer["message"].endswith(
        "cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type string"
    )
