"""Discovery, CRUD and error answers of the emulated API, driven by the real kubernetes client."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client, dynamic
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from tests.kubeapi_tests.conftest import Backend, body, eventually, mco_crd, raw, served


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
    crds.create(body=mco_crd())

    def established() -> Any:
        crd = crds.get(name="nodeinterferencereports.mco.many-core.io")
        conditions = {c.type: c.status for c in crd.status.conditions or []}
        assert conditions == {"NamesAccepted": "True", "Established": "True"}
        return crd

    created = eventually(established)
    assert created.status.acceptedNames.listKind == "NodeInterferenceReportList"
    nir = served(dyn, "mco.many-core.io/v1alpha1", "NodeInterferenceReport")
    assert not nir.namespaced
    assert nir.short_names == ["nir"]
    assert "status" in nir.subresources
    crds.delete(name="nodeinterferencereports.mco.many-core.io")

    def gone() -> None:
        dyn.resources.invalidate_cache()
        try:
            dyn.resources.get(api_version="mco.many-core.io/v1alpha1", kind="NodeInterferenceReport")
        except ResourceNotFoundError:
            return
        raise AssertionError("NodeInterferenceReport still served")

    eventually(gone)


def test_configmap_crud_with_resource_versions(core: client.CoreV1Api, ns: str) -> None:
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg"}, "data": {"a": "1"}})
    assert created.metadata.uid
    assert created.metadata.creation_timestamp
    created.data["a"] = "2"
    updated = core.replace_namespaced_config_map("cfg", ns, created)
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    assert updated.metadata.uid == created.metadata.uid
    assert core.read_namespaced_config_map("cfg", ns).data == {"a": "2"}
    # Stale resourceVersion: 409 Conflict naming the object.
    with pytest.raises(client.ApiException) as stale:
        core.replace_namespaced_config_map("cfg", ns, created)
    assert stale.value.status == 409
    status = body(stale.value)
    assert status["reason"] == "Conflict"
    assert status["details"] == {"name": "cfg", "kind": "configmaps"}
    # DELETE answers a Status with the deleted object's uid.
    deleted = core.delete_namespaced_config_map("cfg", ns)
    assert deleted["status"] == "Success"
    assert deleted["details"]["uid"] == created.metadata.uid
    with pytest.raises(client.ApiException) as gone:
        core.read_namespaced_config_map("cfg", ns)
    assert gone.value.status == 404
    assert body(gone.value)["message"] == 'configmaps "cfg" not found'


def test_errors_are_status_objects_with_reasons(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "dup"}})
    with pytest.raises(client.ApiException) as dup:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "dup"}})
    assert dup.value.status == 409
    assert body(dup.value)["reason"] == "AlreadyExists"
    with pytest.raises(client.ApiException) as missing_ns:
        core.create_namespaced_config_map("nowhere", {"metadata": {"name": "x"}})
    assert missing_ns.value.status == 404
    assert body(missing_ns.value)["details"] == {"name": "nowhere", "kind": "namespaces"}
    with pytest.raises(client.ApiException) as bad_name:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "Bad_Name"}})
    invalid = body(bad_name.value)
    assert bad_name.value.status == 422
    assert invalid["reason"] == "Invalid"
    assert invalid["details"]["causes"][0]["field"] == "metadata.name"
    assert invalid["message"].startswith('ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"')
    with pytest.raises(client.ApiException) as no_name:
        core.create_namespaced_config_map(ns, {"metadata": {}})
    assert "metadata.name: Required value: name or generateName is required" in body(no_name.value)["message"]
    with pytest.raises(client.ApiException) as wrong_ns:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "x", "namespace": "kube-system"}})
    assert wrong_ns.value.status == 400
    assert body(wrong_ns.value)["reason"] == "BadRequest"


def test_method_not_allowed_and_unknown_paths(backend: Backend, ns: str) -> None:
    code, status = raw(backend, "PUT", f"/api/v1/namespaces/{ns}/configmaps", {})
    assert code == 405
    assert (status["reason"], status["details"]) == ("MethodNotAllowed", {})
    # A group nobody serves is the HTTP mux's plain-text 404; a known group's unknown version a Status.
    assert raw(backend, "GET", "/apis/example.com/v1/widgets") == (404, "404 page not found\n")
    assert raw(backend, "GET", "/nonsense") == (404, "404 page not found\n")
    code, status = raw(backend, "GET", "/apis/apps/v9/deployments")
    assert code == 404
    assert (status["reason"], status["message"], status["details"]) == (
        "NotFound",
        "the server could not find the requested resource",
        {},
    )
    # A cluster-scoped resource has no namespaced path, a namespaced one no cluster-wide item path.
    assert raw(backend, "GET", f"/api/v1/namespaces/{ns}/nodes")[0] == 404
    assert raw(backend, "GET", "/api/v1/configmaps/x")[0] == 404
    code, text = raw(backend, "GET", "/healthz")
    assert (code, text) == (200, "ok")


def test_generate_name_list_all_namespaces_and_selectors(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespace({"metadata": {"name": "team"}})
    a = core.create_namespaced_config_map("team", {"metadata": {"generateName": "cm-", "labels": {"tier": "a"}}})
    assert a.metadata.name.startswith("cm-")
    assert len(a.metadata.name) == 8
    core.create_namespaced_config_map(ns, {"metadata": {"name": "b", "labels": {"tier": "b", "x": "1"}}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}})
    everything = core.list_config_map_for_all_namespaces()
    # other namespaces may hold ConfigMaps (the real kube-system has two; other tests' namespaces)
    mine = {"team", ns}
    assert {i.metadata.name for i in everything.items if i.metadata.namespace in mine} == {a.metadata.name, "b", "c"}
    assert int(everything.metadata.resource_version) >= int(a.metadata.resource_version)

    def names(**kw: str) -> set[str]:
        listed = core.list_config_map_for_all_namespaces(**kw).items
        return {i.metadata.name for i in listed if i.metadata.namespace in mine}

    assert names(label_selector="tier in (a,b)") == {a.metadata.name, "b"}
    assert names(label_selector="tier notin (a)") == {"b", "c"}
    assert names(label_selector="tier==b,x") == {"b"}
    assert names(label_selector="!tier") == {"c"}
    assert names(label_selector="tier!=a") == {"b", "c"}
    assert names(field_selector="metadata.namespace=team") == {a.metadata.name}
    assert names(field_selector=f"metadata.name!=b,metadata.namespace={ns}") == {"c"}
    with pytest.raises(client.ApiException) as bad_field:
        core.list_config_map_for_all_namespaces(field_selector="data.x=1")
    assert bad_field.value.status == 400
    assert body(bad_field.value)["message"] == (
        '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"'
    )
    with pytest.raises(client.ApiException) as bad_label:
        core.list_config_map_for_all_namespaces(label_selector="tier in (a")
    assert body(bad_label.value)["message"] == "unable to parse requirement: found '', expected: ',' or ')'"
    assert names(label_selector="x>0") == {"b"}  # gt/lt compare integers


def test_list_pagination(core: client.CoreV1Api, ns: str) -> None:
    for i in range(5):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"p{i}"}})
    first = core.list_namespaced_config_map(ns, limit=2)
    assert [i.metadata.name for i in first.items] == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    rest = core.list_namespaced_config_map(ns, limit=10, _continue=first.metadata._continue)
    assert [i.metadata.name for i in rest.items] == ["p2", "p3", "p4"]
    assert rest.metadata._continue is None


def test_deleting_a_namespace_deletes_its_contents(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "doomed"}})
    core.create_namespaced_config_map("doomed", {"metadata": {"name": "inside"}})
    core.create_namespaced_service_account("doomed", {"metadata": {"name": "sa"}})
    answer = core.delete_namespace("doomed")
    assert answer["status"]["phase"] == "Terminating"
    assert answer["metadata"]["deletionTimestamp"]

    def emptied_and_gone() -> None:
        # the real namespace controller empties it, then removes it; the emulator does both at once
        assert not core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=doomed").items
        names = {n.metadata.name for n in core.list_namespace().items}
        assert "doomed" not in names, "namespace doomed still there"

    eventually(emptied_and_gone)
    names = {n.metadata.name for n in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public"} <= names


def test_finalizers_hold_deletion_until_removed(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "held", "finalizers": ["example.com/x"]}})
    core.delete_namespaced_config_map("held", ns)
    held = core.read_namespaced_config_map("held", ns)
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("held", ns, {"metadata": {"finalizers": None}})
    with pytest.raises(client.ApiException) as gone:
        core.read_namespaced_config_map("held", ns)
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
    # /status of a built-in kind keeps the old spec but takes metadata from the request
    core.patch_node_status(
        "worker-1",
        {"status": {"capacity": {"cpu": "8"}}, "spec": {"unschedulable": True}, "metadata": {"labels": {"x": "y"}}},
    )
    after = core.read_node("worker-1")
    assert after.status.capacity == {"cpu": "8"}
    assert not (after.spec and after.spec.unschedulable)
    assert after.metadata.labels == {"mco.many-core.io/role": "node", "x": "y"}
    with pytest.raises(client.ApiException) as bad_label:
        core.patch_node("worker-1", {"metadata": {"labels": {"mco.many-core.io/role": "not a value!"}}})
    assert bad_label.value.status == 422


def test_dry_run_changes_nothing(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}}, dry_run="All")
    with pytest.raises(client.ApiException):
        core.read_namespaced_config_map("dry", ns)


def test_workload_generation_bumps_on_spec_changes_only(api_client: client.ApiClient, ns: str) -> None:
    apps = client.AppsV1Api(api_client)
    deployment = {
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }
    created = apps.create_namespaced_deployment(ns, deployment)
    assert created.metadata.generation == 1
    labelled = apps.patch_namespaced_deployment("web", ns, {"metadata": {"labels": {"a": "b"}}})
    assert labelled.metadata.generation == 1
    scaled = apps.patch_namespaced_deployment("web", ns, {"spec": {"replicas": 3}})
    assert scaled.metadata.generation == 2
    # the real server validates status too: readyReplicas may not exceed replicas
    status = apps.patch_namespaced_deployment_status(
        "web", ns, {"status": {"replicas": 3, "readyReplicas": 3}, "metadata": {"labels": {"c": "d"}}}
    )
    assert status.metadata.generation == 2
    assert status.status.ready_replicas == 3
    assert status.metadata.labels == {"a": "b"}  # a Deployment's /status keeps its labels


def _pod_template(restart: str = "Always") -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "x"}},
        "spec": {"restartPolicy": restart, "containers": [{"name": "c", "image": "i"}]},
    }


def test_all_required_kinds_round_trip(dyn: dynamic.DynamicClient, ns: str) -> None:
    # Objects the real server accepts: the emulator does not validate built-in kinds beyond names,
    # labels and immutable fields (docs/testing-kubeapi.md), so a test must not rely on it refusing.
    selector = {"matchLabels": {"app": "x"}}
    objects = [
        ("v1", "Secret", {"metadata": {"name": "s", "namespace": ns}, "stringData": {"k": "v"}}),
        ("v1", "Service", {"metadata": {"name": "svc", "namespace": ns}, "spec": {"ports": [{"port": 80}]}}),
        ("v1", "Endpoints", {"metadata": {"name": "svc", "namespace": ns}}),
        (
            "discovery.k8s.io/v1",
            "EndpointSlice",
            {"metadata": {"name": "svc-1", "namespace": ns}, "addressType": "IPv4", "endpoints": []},
        ),
        ("v1", "ServiceAccount", {"metadata": {"name": "sa", "namespace": ns}}),
        (
            "apps/v1",
            "DaemonSet",
            {"metadata": {"name": "ds", "namespace": ns}, "spec": {"selector": selector, "template": _pod_template()}},
        ),
        (
            "apps/v1",
            "StatefulSet",
            {"metadata": {"name": "sts", "namespace": ns}, "spec": {"selector": selector, "template": _pod_template()}},
        ),
        (
            "batch/v1",
            "Job",
            {"metadata": {"name": "job", "namespace": ns}, "spec": {"template": _pod_template("Never")}},
        ),
        (
            "batch/v1",
            "CronJob",
            {
                "metadata": {"name": "cj", "namespace": ns},
                "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": _pod_template("Never")}}},
            },
        ),
        ("node.k8s.io/v1", "RuntimeClass", {"metadata": {"name": "kata-qemu"}, "handler": "kata-qemu"}),
        (
            "coordination.k8s.io/v1",
            "Lease",
            {"metadata": {"name": "mco-analyzer", "namespace": ns}, "spec": {"holderIdentity": "a"}},
        ),
        (
            "v1",
            "Event",
            {
                "metadata": {"name": "e1", "namespace": ns},
                "reason": "Test",
                "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns},
            },
        ),
        (
            "events.k8s.io/v1",
            "Event",
            {
                "metadata": {"name": "e2", "namespace": ns},
                "reason": "Test",
                "action": "A",
                "eventTime": "2026-01-01T00:00:00.000000Z",
                "reportingController": "x",
                "reportingInstance": "y",
                "type": "Normal",
                "regarding": {"kind": "Pod", "name": "p", "namespace": ns},
            },
        ),
        ("rbac.authorization.k8s.io/v1", "Role", {"metadata": {"name": "r", "namespace": ns}, "rules": []}),
        (
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            {
                "metadata": {"name": "rb", "namespace": ns},
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
    # v1 and events.k8s.io/v1 Events are one storage under two sets of field names
    events_v1 = dyn.resources.get(api_version="v1", kind="Event")
    listed = events_v1.get(namespace=ns, field_selector="involvedObject.kind=Pod").items
    assert [e.metadata.name for e in listed] == ["e1", "e2"]
    assert events_v1.get(name="e2", namespace=ns).reportingComponent == "x"
    events = dyn.resources.get(api_version="events.k8s.io/v1", kind="Event")
    assert events.get(name="e1", namespace=ns).regarding.name == "p"
    assert [e.metadata.name for e in events.get(namespace=ns, field_selector="reportingController=x").items] == ["e2"]


def test_immutable_fields_and_protected_namespaces(
    api_client: client.ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(api_client)
    binding = {
        "metadata": {"name": "b"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": ns}],
    }
    rbac.create_cluster_role_binding(binding)
    with pytest.raises(client.ApiException) as role_ref:
        rbac.patch_cluster_role_binding("b", {"roleRef": {"name": "edit"}})
    assert role_ref.value.status == 422
    assert body(role_ref.value)["details"]["causes"][0]["message"].endswith("cannot change roleRef")
    core.create_namespaced_config_map(ns, {"metadata": {"name": "frozen"}, "data": {"a": "1"}, "immutable": True})
    with pytest.raises(client.ApiException) as frozen:
        core.patch_namespaced_config_map("frozen", ns, {"data": {"a": "2"}})
    assert "data: Forbidden: field is immutable when `immutable` is set" in body(frozen.value)["message"]
    with pytest.raises(client.ApiException) as protected:
        core.delete_namespace("kube-system")
    assert protected.value.status == 403
    with pytest.raises(client.ApiException) as with_rv:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "rv", "resourceVersion": "5"}})
    assert with_rv.value.status == 500  # sic: the storage layer's plain error, no reason
    assert body(with_rv.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "resourceVersion should not be set on objects to be created",
        "code": 500,
    }


def test_secret_string_data_is_encoded_and_maps_must_hold_strings(
    core: client.CoreV1Api, backend: Backend, ns: str
) -> None:
    secret = core.create_namespaced_secret(ns, {"metadata": {"name": "token"}, "stringData": {"token": "abc"}})
    assert secret.data == {"token": "YWJj"}
    assert secret.string_data is None
    assert secret.type == "Opaque"
    code, answer = raw(
        backend, "POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "n"}, "data": {"replicas": 3}}
    )
    assert code == 400
    assert answer["message"].endswith(
        "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
    )
    code, answer = raw(
        backend,
        "POST",
        f"/api/v1/namespaces/{ns}/secrets",
        {"metadata": {"name": "b"}, "data": {"k": "not base64!"}},
    )
    assert (code, answer["message"]) == (
        400,
        'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3',
    )

    code, answer = raw(backend, "POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": 5}})
    assert code == 400
    assert answer["message"].endswith(
        "cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type string"
    )


def test_token_request_for_a_service_account(core: client.CoreV1Api, ns: str) -> None:
    """What mco_sa_kubeconfig relies on: a token whose claims name the account and its expiry."""
    import base64
    import json
    import time

    core.create_namespaced_service_account(ns, {"metadata": {"name": "robot"}})
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    reply = core.create_namespaced_service_account_token("robot", ns, request, _preload_content=False)
    assert reply.status == 201
    status = json.loads(reply.data)["status"]
    payload = status["token"].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["sub"] == f"system:serviceaccount:{ns}:robot"
    assert abs(claims["exp"] - (time.time() + 3600)) < 120
    assert status["expirationTimestamp"].endswith("Z")
    with pytest.raises(client.ApiException) as short:
        core.create_namespaced_service_account_token("robot", ns, {**request, "spec": {"expirationSeconds": 60}})
    assert short.value.status == 422
    assert "may not specify a duration less than 10 minutes" in short.value.body
    with pytest.raises(client.ApiException) as missing:
        core.create_namespaced_service_account_token("nobody", ns, request)
    assert missing.value.status == 404
