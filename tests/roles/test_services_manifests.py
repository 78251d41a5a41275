"""mco_crds' Services and their addresses: EndpointSlices (discovery.k8s.io/v1) as Kubernetes reads them,
no deprecated v1 Endpoints, and a Node on every collector endpoint (Prometheus' node target label)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .helpers import render_template, render_with_inventory

SERVICES = ("mco-scheduler-extender", "mco-analyzer", "mco-collector")


def rendered(tmp_path: Path, inventory: dict[str, Any]) -> list[dict[str, Any]]:
    text = render_with_inventory("mco_crds", "services.yaml.j2", tmp_path / "services.yaml", inventory)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def inventory(nodes: dict[str, dict[str, Any]], **variables: Any) -> dict[str, Any]:
    return {
        "all": {
            "vars": variables,
            "children": {
                "mco_control": {
                    "hosts": {"ctl-1": {"ansible_host": "10.0.0.1"}, "ctl-2": {"ansible_host": "10.0.0.1"}}
                },
                "mco_nodes": {"hosts": nodes},
            },
        }
    }


def slices_of(docs: list[dict[str, Any]], service: str) -> dict[str, dict[str, Any]]:
    return {
        d["addressType"]: d
        for d in docs
        if d["kind"] == "EndpointSlice" and d["metadata"]["labels"]["kubernetes.io/service-name"] == service
    }


def test_every_service_has_its_endpointslices_and_no_v1_endpoints(tmp_path: Path) -> None:
    docs = rendered(
        tmp_path,
        inventory(
            {
                "w-1": {"ansible_host": "10.0.0.11", "mco_node_name": "worker-1"},
                "w-2": {"ansible_host": "fd00::12", "mco_collector_node_name": "worker-2", "mco_node_name": "other"},
                "w-3": {"ansible_host": "10.0.0.13"},
            }
        ),
    )
    assert {d["kind"] for d in docs} == {"Service", "EndpointSlice"}
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    assert set(services) == set(SERVICES)
    for name, service in services.items():
        slices = slices_of(docs, name)
        assert set(slices) == {"IPv4", "IPv6"}, name
        for family, es in slices.items():
            assert es["apiVersion"] == "discovery.k8s.io/v1"
            assert es["metadata"]["namespace"] == service["metadata"]["namespace"] == "mco-system"
            assert es["metadata"]["name"] == f"{name}-{family.lower()}"
            labels = es["metadata"]["labels"]
            assert labels["endpointslice.kubernetes.io/managed-by"] == "mco.many-core.io"
            assert labels["app.kubernetes.io/name"] == name
            # the slice's ports are the Service's, by name (how Kubernetes matches them)
            assert {(p["name"], p["port"]) for p in es["ports"]} == {
                (p["name"], p["targetPort"]) for p in service["spec"]["ports"]
            }
            assert all(e["conditions"] == {"ready": True} for e in es["endpoints"])
    # the control hosts share an address: one endpoint; an IPv6 host goes to the IPv6 slice
    assert [e["addresses"] for e in slices_of(docs, "mco-analyzer")["IPv4"]["endpoints"]] == [["10.0.0.1"]]
    assert slices_of(docs, "mco-analyzer")["IPv6"]["endpoints"] == []
    collector = slices_of(docs, "mco-collector")
    by_address = {e["addresses"][0]: e for es in collector.values() for e in es["endpoints"]}
    # each collector names its Node as the collector itself does (mco_collector_node_name, mco_node_name,
    # else its nodename fact, else the inventory name)
    assert {a: (e["nodeName"], e["targetRef"]) for a, e in by_address.items()} == {
        "10.0.0.11": ("worker-1", {"kind": "Node", "name": "worker-1"}),
        "fd00::12": ("worker-2", {"kind": "Node", "name": "worker-2"}),
        "10.0.0.13": ("w-3", {"kind": "Node", "name": "w-3"}),
    }
    # the analyzer and the extender name no Node: their series carry node already
    for name in ("mco-analyzer", "mco-scheduler-extender"):
        assert all("targetRef" not in e and "nodeName" not in e for e in slices_of(docs, name)["IPv4"]["endpoints"])


def test_explicit_addresses_name_their_nodes_from_the_map(tmp_path: Path) -> None:
    docs = rendered(
        tmp_path,
        inventory(
            {"ignored": {"ansible_host": "10.9.9.9"}},
            mco_crds_node_addresses=["10.1.0.1", "10.1.0.2"],
            mco_crds_node_names={"10.1.0.1": "big-1"},
            mco_collector_metrics_port=19877,
        ),
    )
    endpoints = slices_of(docs, "mco-collector")["IPv4"]["endpoints"]
    assert [(e["addresses"], e.get("targetRef")) for e in endpoints] == [
        (["10.1.0.1"], {"kind": "Node", "name": "big-1"}),
        (["10.1.0.2"], None),
    ]
    assert slices_of(docs, "mco-collector")["IPv4"]["ports"] == [{"name": "metrics", "port": 19877, "protocol": "TCP"}]


def test_the_service_monitors_discover_endpointslices(tmp_path: Path) -> None:
    text = render_template("mco_crds", "servicemonitors.yaml.j2", tmp_path / "sm.yaml", {})
    monitors = [d for d in yaml.safe_load_all(text) if d]
    assert [m["metadata"]["name"] for m in monitors] == ["mco-collector", "mco-analyzer", "mco-scheduler-extender"]
    assert all(m["spec"]["serviceDiscoveryRole"] == "EndpointSlice" for m in monitors)
