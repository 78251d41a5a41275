"""A sharded report through the kubernetes client against the emulated API server (tests/kubeapi):
the store's writes, level changes in the report object, reading back, new generations and their
clean-up, the extender's watch, and a failed write. The real kube-apiserver runs the same store in the cluster tier
(tests/cluster_tests/test_sharded_report.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from mco_py.errors import StoreUnavailable
from mco_py.extender.source import WatchReportSource
from mco_py.kube.client import load_api_client
from mco_py.kube.watch import KubeListWatch
from mco_py.model import GROUP, PLURAL, VERSION, Level, NodeAssessment, Report
from mco_py.report.builder import ReportBuilder
from mco_py.report.shards import REPORT_LABEL, SHARD_PLURAL, ShardPlanner
from mco_py.store.kube import KubeReportStore
from tests.contracts import crd_schema

SHARD_CRD = crd_schema.CRD_PATH.parent / "nodeinterferencereportshards.yaml"
BUDGET = 40_000


@pytest.fixture
def api(kube_api: Any, kubeconfig: Path) -> Iterator[client.ApiClient]:
    api_client = load_api_client(kubeconfig)
    for path in (crd_schema.CRD_PATH, SHARD_CRD):
        client.ApiextensionsV1Api(api_client).create_custom_resource_definition(yaml.safe_load(path.read_text()))
    yield api_client
    api_client.close()


def node(i: int, level: Level = Level.LOW, t: float = 0.0) -> NodeAssessment:
    return NodeAssessment(
        f"node-{i:04d}", level, 30.0, {"psiIoSomeAvg10": 29.0}, t or time.time(), (f"io: psiIoSomeAvg10 29 on {i}",)
    )


def report(nodes: dict[int, NodeAssessment]) -> Report:
    return Report(time.time(), "a1", "r1", tuple(nodes[i] for i in sorted(nodes)))


def shard_names(api: client.ApiClient) -> list[str]:
    listed = client.CustomObjectsApi(api).list_cluster_custom_object(GROUP, VERSION, SHARD_PLURAL)
    return sorted(o["metadata"]["name"] for o in listed["items"])


def test_a_sharded_report_is_written_patched_read_back_and_old_generations_deleted(api: client.ApiClient) -> None:
    store = KubeReportStore(api)
    b = ReportBuilder(BUDGET, shards=ShardPlanner(BUDGET, shard_limit=16_384, refresh_seconds=3600))
    nodes = {i: node(i) for i in range(400)}
    built = b.build(report(nodes))
    assert built.shards is not None
    store.publish(built)
    generation, count = built.shards.index.generation, built.shards.index.count
    assert shard_names(api) == sorted(f"cluster-g{generation}-{k}" for k in range(count))
    got = store.read()
    assert [n.name for n in got.nodes] == [nodes[i].name for i in sorted(nodes)]
    assert got.nodes[5].reasons == ("io: psiIoSomeAvg10 29 on 5",)  # full detail
    nir = client.CustomObjectsApi(api).get_cluster_custom_object(GROUP, VERSION, PLURAL, "cluster")
    assert nir["status"]["nodes"] == []
    assert nir["status"]["summary"]["nodes"] == 400
    # one level change, one node gone, one new: three lines of the report object, no shard written
    nodes[3] = node(3, Level.HIGH)
    del nodes[4]
    nodes[1000] = node(1000)
    built = b.build(report(nodes))
    assert built.shards is not None
    assert not built.shards.new_generation
    assert built.shards.writes == ()
    store.publish(built)
    nir = client.CustomObjectsApi(api).get_cluster_custom_object(GROUP, VERSION, PLURAL, "cluster")
    assert nir["status"]["shards"]["changes"] == {"node-0003": "High 30", "node-0004": None, "node-1000": "Low 30"}
    got = store.read()
    assert {n.name: n.level for n in got.nodes} == {n.name: n.level for n in nodes.values()}
    assert got.node("node-0003").reasons == ("io: psiIoSomeAvg10 29 on 3",)  # type: ignore[union-attr]
    # a new generation (restart): the old one is deleted once the report names the new one
    b.reset()
    time.sleep(0.01)
    built = b.build(report(nodes))
    assert built.shards is not None
    assert built.shards.new_generation
    store.publish(built)
    assert all(name.startswith(f"cluster-g{built.shards.index.generation}-") for name in shard_names(api))
    assert len(store.read().nodes) == len(nodes)
    # small again: inline, every shard deleted
    small = {i: nodes[i] for i in list(nodes)[:10]}
    built = b.build(report(small))
    assert built.shards is None
    store.publish(built)
    assert shard_names(api) == []
    assert [n.name for n in store.read().nodes] == [small[i].name for i in sorted(small)]


def test_the_extender_serves_every_node_of_a_sharded_report_through_its_watches(api: client.ApiClient) -> None:
    store = KubeReportStore(api)
    b = ReportBuilder(BUDGET, shards=ShardPlanner(BUDGET, shard_limit=16_384, refresh_seconds=3600))
    nodes = {i: node(i) for i in range(400)}
    store.publish(b.build(report(nodes)))
    source = WatchReportSource(
        KubeListWatch(api, f"/apis/{GROUP}/{VERSION}/{PLURAL}", field_selector="metadata.name=cluster"),
        shards=KubeListWatch(api, f"/apis/{GROUP}/{VERSION}/{SHARD_PLURAL}", label_selector=f"{REPORT_LABEL}=cluster"),
        backoff_max=0.2,
    )
    source.start()
    try:
        wait(lambda: (r := source.snapshot().report) is not None and len(r.by_name) == 400)
        nodes[17] = node(17, Level.HIGH)
        store.publish(b.build(report(nodes)))
        wait(lambda: (r := source.snapshot().report) is not None and r.by_name["node-0017"].level is Level.HIGH)
        b.reset()  # a new generation: the extender never serves fewer nodes while it moves
        time.sleep(0.01)
        store.publish(b.build(report(nodes)))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            snap = source.snapshot()
            assert snap.report is not None
            assert len(snap.report.by_name) == 400
            time.sleep(0.005)
    finally:
        source.stop()


def test_a_failed_shard_write_starts_a_new_generation_next_round(api: client.ApiClient, kube_api: Any) -> None:
    store = KubeReportStore(api, error_retries=0, sleep=lambda _: None)
    b = ReportBuilder(BUDGET, shards=ShardPlanner(BUDGET, shard_limit=16_384, refresh_seconds=3600))
    nodes = {i: node(i) for i in range(400)}
    first = b.build(report(nodes))
    store.publish(first)
    nodes[3] = node(3, Level.HIGH)
    b.shards.refresh_seconds = 0  # type: ignore[union-attr]  # every shard due: written whole
    kube_api.fail_next(count=1, path=f"/{SHARD_PLURAL}/", code=503)
    with pytest.raises(StoreUnavailable):
        store.publish(b.build(report(nodes)))
    b.reset()  # what the report loop does after a failed write
    time.sleep(0.01)
    again = b.build(report(nodes))
    assert again.shards is not None
    assert again.shards.new_generation
    store.publish(again)
    assert store.read().node("node-0003").level is Level.HIGH  # type: ignore[union-attr]


def test_without_the_shard_crd_the_writer_says_what_to_install(kube_api: Any, kubeconfig: Path) -> None:
    api_client = load_api_client(kubeconfig)
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition(
        yaml.safe_load(crd_schema.CRD_PATH.read_text())
    )
    b = ReportBuilder(BUDGET, shards=ShardPlanner(BUDGET, shard_limit=16_384))
    with pytest.raises(StoreUnavailable, match=r"nodeinterferencereportshards\.yaml"):
        KubeReportStore(api_client, sleep=lambda _: None).publish(b.build(report({i: node(i) for i in range(400)})))


def wait(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
