"""mco_crds' selector-less Services on the real kube-apiserver: their addresses as EndpointSlices that the
API server accepts, no deprecated v1 Endpoints (no deprecation warning on any apply), the collectors'
endpoints naming their Nodes; an older release's v1 Endpoints, and the EndpointSlice Kubernetes mirrored
from them, are gone after the role runs; uninstall leaves none of them."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cluster import RealCluster
from tests.cluster_tests.conftest import RunbookBed, control_inventory, wait_until

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = Path(__file__).parent / "playbooks" / "mco_crds.yml"
NS = "mco-system"
MIRRORED = "endpointslice.kubernetes.io/managed-by=endpointslicemirroring-controller.k8s.io"
OURS = "endpointslice.kubernetes.io/managed-by=mco.many-core.io"
#: What Kubernetes 1.33+ says on every write of a v1 Endpoints
DEPRECATED = "v1 Endpoints is deprecated"

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def bed(cluster_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunbookBed]:
    workdir = tmp_path_factory.mktemp("services-role")
    cluster = RealCluster(workdir / "cluster", cluster_binaries)
    # the mirroring controller copies v1 Endpoints into EndpointSlices, as on any cluster
    cluster.start(nodes=2, controllers=["namespace", "endpointslicemirroring"])
    try:
        inventory = control_inventory(
            workdir / "inventory.json",
            cluster,
            mco_crds_repo_root=str(ROOT),
            mco_crds_control_addresses=["10.0.0.1"],
            mco_crds_node_addresses=["10.0.0.11", "10.0.0.12"],
            mco_crds_node_names={"10.0.0.11": "node-1", "10.0.0.12": "node-2"},
        )
        yield RunbookBed(cluster, workdir, inventory)
    finally:
        cluster.stop()


def slices(bed: RunbookBed, selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = bed.json("get", "endpointslices", "-n", NS, "-l", selector)["items"]
    return items


def test_an_older_releases_endpoints_give_way_to_endpointslices(bed: RunbookBed) -> None:
    # what the previous template left: the Service and its v1 Endpoints (mirrored by Kubernetes)
    bed.cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    old = subprocess.run(
        [str(bed.cluster.bins["kubectl"]), f"--kubeconfig={bed.cluster.admin_kubeconfig}", "apply", "-f", "-"],
        input=(
            "apiVersion: v1\nkind: Service\nmetadata: {name: mco-collector, namespace: mco-system}\n"
            "spec: {ports: [{name: metrics, port: 9877}]}\n---\n"
            "apiVersion: v1\nkind: Endpoints\nmetadata: {name: mco-collector, namespace: mco-system}\n"
            "subsets: [{addresses: [{ip: 10.0.0.99}], ports: [{name: metrics, port: 9877}]}]\n"
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert DEPRECATED in old.stderr, "the API server warns on v1 Endpoints (what this change removes)"
    wait_until(lambda: slices(bed, MIRRORED), "Kubernetes to mirror the old Endpoints")

    proc, document = bed.run(bed.playbook(PLAYBOOK))
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert DEPRECATED not in proc.stdout + proc.stderr

    assert bed.kubectl("get", "endpoints", "-n", NS, "-o", "name", check=False).strip() == ""
    wait_until(lambda: not slices(bed, MIRRORED), "the mirrored EndpointSlice to go")
    ours = {s["metadata"]["name"]: s for s in slices(bed, OURS)}
    assert set(ours) == {f"{svc}-{family}" for svc in ("mco-analyzer", "mco-collector", "mco-scheduler-extender")
                         for family in ("ipv4", "ipv6")}  # fmt: skip
    collector = ours["mco-collector-ipv4"]
    assert collector["metadata"]["labels"]["kubernetes.io/service-name"] == "mco-collector"
    assert [(e["addresses"], e["nodeName"], e["targetRef"]) for e in collector["endpoints"]] == [
        (["10.0.0.11"], "node-1", {"kind": "Node", "name": "node-1"}),
        (["10.0.0.12"], "node-2", {"kind": "Node", "name": "node-2"}),
    ]
    assert collector["ports"] == [{"name": "metrics", "port": 9877, "protocol": "TCP"}]
    assert [e["addresses"] for e in ours["mco-analyzer-ipv4"]["endpoints"]] == [["10.0.0.1"]]
    assert ours["mco-analyzer-ipv6"].get("endpoints") in (None, [])

    # a second run changes nothing
    proc, document = bed.run(bed.playbook(PLAYBOOK))
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert document["stats"]["localhost"]["changed"] == 0, proc.stdout[-6000:]

    proc, document = bed.run(bed.playbook(PLAYBOOK, {"mco_crds_action": "uninstall"}))
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert bed.kubectl("get", "endpointslices,endpoints,services", "-A", "-l", "app.kubernetes.io/part-of=mco",
                       "-o", "name", check=False).strip() == ""  # fmt: skip
