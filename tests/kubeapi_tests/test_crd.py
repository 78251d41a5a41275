"""NodeInterferenceReport on the API server: status subresource, schema validation, pruning, conflicts."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes import dynamic
from kubernetes.dynamic.exceptions import DynamicApiError
from kubernetes.dynamic.resource import Resource

from tests.kubeapi_tests.conftest import Backend, body, eventually, mco_crd, raw, sample_report, served

REPORTS = "/apis/mco.many-core.io/v1alpha1/nodeinterferencereports"
TYPE = {"apiVersion": "mco.many-core.io/v1alpha1", "kind": "NodeInterferenceReport"}


@pytest.fixture
def nir(dyn: dynamic.DynamicClient) -> Resource:
    dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition").create(body=mco_crd())
    return served(dyn, "mco.many-core.io/v1alpha1", "NodeInterferenceReport")


def _create_with_status(nir: Resource, status: dict[str, Any]) -> Any:
    report = sample_report()
    report.pop("status")
    created = nir.create(body=report)
    assert "status" not in created.to_dict()
    report["metadata"]["resourceVersion"] = created.metadata.resourceVersion
    return nir.status.replace(body={**report, "status": status})


def test_valid_report_is_accepted_and_status_written_via_subresource(nir: Resource) -> None:
    status = sample_report()["status"]
    written = _create_with_status(nir, status)
    assert written.status.to_dict() == status
    assert written.metadata.generation == 1  # status writes never bump generation
    assert nir.get(name="cluster").status.nodes[0].level == "High"


def test_main_resource_writes_ignore_status(nir: Resource) -> None:
    written = _create_with_status(nir, sample_report()["status"])
    patched = nir.patch(
        name="cluster",
        body={"spec": {"description": "x"}, "status": {"lastUpdateTime": "2000-01-01T00:00:00Z"}},
        content_type="application/merge-patch+json",
    )
    assert patched.spec.description == "x"
    assert patched.metadata.generation == 2
    assert patched.status.lastUpdateTime == written.status.lastUpdateTime
    # ... and /status writes ignore everything but status.
    after = nir.status.patch(
        name="cluster",
        body={"spec": {"description": "y"}, "status": {"analyzer": {"identity": "b", "rulesVersion": "2"}}},
        content_type="application/merge-patch+json",
    )
    assert after.spec.description == "x"
    assert after.status.analyzer.identity == "b"
    assert after.metadata.generation == 2


def test_invalid_report_is_422_listing_each_cause(nir: Resource) -> None:
    status = copy.deepcopy(sample_report()["status"])
    status["nodes"][0]["level"] = "Severe"
    status["nodes"][1]["score"] = 120
    status["nodes"][1]["name"] = ""
    status["lastUpdateTime"] = "yesterday"
    del status["analyzer"]
    with pytest.raises(DynamicApiError) as rejected:
        _create_with_status(nir, status)
    assert rejected.value.status == 422
    answer = body(rejected.value)
    assert answer["reason"] == "Invalid"
    assert answer["details"]["name"] == "cluster"
    assert answer["details"]["kind"] == "NodeInterferenceReport"
    # A /status write validates the status alone: fields are under "status.", the "in body" paths are
    # relative to it. The order of the causes is the validator's (Go map order): compare them as a set.
    causes = {c["field"]: (c["reason"], c["message"]) for c in answer["details"]["causes"]}
    assert causes == {
        "status.nodes[0].level": (
            "FieldValueNotSupported",
            'Unsupported value: "Severe": supported values: "None", "Low", "Medium", "High", "Unknown"',
        ),
        "status.nodes[1].score": (
            "FieldValueInvalid",
            "Invalid value: 120: nodes[1].score in body should be less than or equal to 100",
        ),
        "status.analyzer": ("FieldValueRequired", "Required value"),
        "status.nodes[1].name": (
            "FieldValueInvalid",
            'Invalid value: "": nodes[1].name in body should be at least 1 chars long',
        ),
        "status.lastUpdateTime": (
            "FieldValueTypeInvalid",
            'Invalid value: "yesterday": lastUpdateTime in body must be of type date-time: "yesterday"',
        ),
    }
    assert answer["message"].startswith('NodeInterferenceReport.mco.many-core.io "cluster" is invalid: [')


def test_type_errors_and_limits(nir: Resource) -> None:
    status = copy.deepcopy(sample_report()["status"])
    status["nodes"][0]["score"] = "high"
    status["nodes"][0]["reasons"] = ["r"] * 33
    status["analyzer"]["identity"] = "a" * 254
    with pytest.raises(DynamicApiError) as rejected:
        _create_with_status(nir, status)
    causes = {c["field"]: c["message"] for c in body(rejected.value)["details"]["causes"]}
    assert causes == {
        "status.nodes[0].score": 'Invalid value: "string": nodes[0].score in body must be of type number: "string"',
        "status.nodes[0].reasons": "Too many: 33: must have at most 32 items",
        "status.analyzer.identity": "Too long: may not be more than 253 bytes",
    }


def test_unknown_fields_are_pruned_with_a_warning_or_refused_when_strict(backend: Backend, nir: Resource) -> None:
    doc = {**TYPE, "metadata": {"name": "pruned"}, "spec": {"description": "d", "colour": "red"}}
    created = nir.create(body=doc)
    assert created.spec.to_dict() == {"description": "d"}
    code, answer = raw(backend, "POST", REPORTS + "?fieldValidation=Strict", {**doc, "metadata": {"name": "strict"}})
    assert code == 400
    assert answer["message"] == (
        'NodeInterferenceReport in version "v1alpha1" cannot be handled as a NodeInterferenceReport: '
        'strict decoding error: unknown field "spec.colour"'
    )


def test_stale_update_of_a_report_is_409_and_unconditional_put_is_422(nir: Resource) -> None:
    written = _create_with_status(nir, sample_report()["status"])
    stale = written.to_dict()
    nir.patch(name="cluster", body={"spec": {"description": "new"}}, content_type="application/merge-patch+json")
    with pytest.raises(DynamicApiError) as conflict:
        nir.replace(body=stale)
    assert conflict.value.status == 409
    assert body(conflict.value)["details"] == {
        "name": "cluster",
        "group": "mco.many-core.io",
        "kind": "nodeinterferencereports",
    }
    del stale["metadata"]["resourceVersion"]
    with pytest.raises(DynamicApiError) as unconditional:
        nir.replace(body=stale)
    assert unconditional.value.status == 422
    assert body(unconditional.value)["message"] == (
        'nodeinterferencereports.mco.many-core.io "cluster" is invalid: '
        "metadata.resourceVersion: Invalid value: 0: must be specified for an update"
    )


def test_strategic_merge_on_a_custom_resource_is_415(backend: Backend, nir: Resource) -> None:
    nir.create(body={**TYPE, "metadata": {"name": "smp"}})
    code, answer = raw(
        backend,
        "PATCH",
        REPORTS + "/smp",
        {"spec": {"description": "x"}},
        {"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert code == 415
    assert answer["reason"] == "UnsupportedMediaType"


def test_deleting_the_crd_deletes_its_objects(dyn: dynamic.DynamicClient, nir: Resource, backend: Backend) -> None:
    nir.create(body={**TYPE, "metadata": {"name": "a"}})
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    crds.delete(name="nodeinterferencereports.mco.many-core.io")

    def status_of_list(expected: int) -> Any:
        code, answer = raw(backend, "GET", REPORTS)
        assert code == expected, answer
        return answer

    eventually(lambda: status_of_list(404))
    eventually(lambda: crds.create(body=mco_crd()))  # the name is free once the old CRD is gone
    listed = eventually(lambda: status_of_list(200))
    assert listed["items"] == []
    assert listed["kind"] == "NodeInterferenceReportList"


def test_invalid_crd_is_refused(dyn: dynamic.DynamicClient) -> None:
    crd = mco_crd()
    crd["metadata"]["name"] = "wrong.example.com"
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    with pytest.raises(DynamicApiError) as refused:
        crds.create(body=crd)
    assert refused.value.status == 422
    assert body(refused.value)["details"]["causes"][0]["field"] == "metadata.name"


def test_custom_resources_must_carry_kind_and_api_version(backend: Backend, nir: Resource) -> None:
    code, answer = raw(backend, "POST", REPORTS, b'{"metadata":{"name":"anonymous"}}')
    assert code == 400
    assert answer["message"] == (
        "the object provided is unrecognized (must be of type NodeInterferenceReport): "
        """Object 'Kind' is missing in '{"metadata":{"name":"anonymous"}}' ({"metadata":{"name":"anonymous ...)"""
    )
    code, answer = raw(backend, "POST", REPORTS, {"kind": "NodeInterferenceReport", "metadata": {"name": "a"}})
    assert (code, answer["message"]) == (
        400,
        "the API version in the data () does not match the expected API version (mco.many-core.io/v1alpha1)",
    )


def test_discovery_prefers_the_highest_served_version(backend: Backend, dyn: dynamic.DynamicClient) -> None:
    crd = mco_crd()
    crd["metadata"]["name"] = "widgets.example.com"
    crd["spec"].update(group="example.com", names={"kind": "Widget", "plural": "widgets"})
    schema = {"openAPIV3Schema": {"type": "object"}}
    crd["spec"]["versions"] = [
        {"name": "v1alpha1", "served": True, "storage": True, "schema": schema},
        {"name": "v1", "served": True, "storage": False, "schema": schema},
        {"name": "v1beta2", "served": True, "storage": False, "schema": schema},
        {"name": "v2", "served": False, "storage": False, "schema": schema},
    ]
    dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition").create(body=crd)
    served(dyn, "example.com/v1", "Widget")
    code, group = raw(backend, "GET", "/apis/example.com")
    assert code == 200
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta2", "v1alpha1"]
    assert group["preferredVersion"]["version"] == "v1"
    # One stored object, served under every served version.
    widget = {"apiVersion": "example.com/v1alpha1", "kind": "Widget", "metadata": {"name": "w"}}
    assert raw(backend, "POST", "/apis/example.com/v1alpha1/widgets", widget)[0] == 201
    code, as_v1 = raw(backend, "GET", "/apis/example.com/v1/widgets/w")
    assert (code, as_v1["apiVersion"]) == (200, "example.com/v1")
    assert raw(backend, "GET", "/apis/example.com/v2/widgets/w")[0] == 404


def test_watch_of_custom_resources_ends_with_their_crd(dyn: dynamic.DynamicClient, nir: Resource) -> None:
    nir.create(body={**TYPE, "metadata": {"name": "w"}})
    seen = []
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    for event in nir.watch(timeout=30):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 1:
            crds.delete(name="nodeinterferencereports.mco.many-core.io")
    assert seen == [("ADDED", "w"), ("DELETED", "w")]
