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

from mco_py.errors import GenerationTaken, StoreUnavailable
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
        b.reset()  # a new generation, with one level changed: never fewer nodes while it moves
        time.sleep(0.01)
        nodes[18] = node(18, Level.HIGH)
        store.publish(b.build(report(nodes)))
        deadline = time.monotonic() + 20
        while True:
            snap = source.snapshot()
            assert snap.report is not None
            view = snap.report.by_name
            assert len(view) == 400
            assert len(list(view)) == 400
            if view["node-0018"].level is Level.HIGH:
                break
            assert time.monotonic() < deadline, "the new generation was never served"
            time.sleep(0.005)
    finally:
        source.stop()


def test_a_write_failing_half_way_leaves_the_served_generation_whole_and_the_next_round_cleans_up(
    api: client.ApiClient, kube_api: Any
) -> None:
    store = KubeReportStore(api, error_retries=0, sleep=lambda _: None)
    b = ReportBuilder(BUDGET, shards=ShardPlanner(BUDGET, shard_limit=16_384, refresh_seconds=3600))
    nodes = {i: node(i) for i in range(400)}
    store.publish(b.build(report(nodes)))
    served = set(shard_names(api))
    nodes[3] = node(3, Level.HIGH)
    b.reset()  # a new generation: its third shard write fails, after two were written
    time.sleep(0.01)
    kube_api.fail_next(count=1, path=rf"/{SHARD_PLURAL}/cluster-g\d+-2/status$", code=503)
    with pytest.raises(StoreUnavailable):
        store.publish(b.build(report(nodes)))
    assert served < set(shard_names(api))  # two shards of the failed attempt besides the served ones
    assert store.read().node("node-0003").level is Level.LOW  # type: ignore[union-attr]  # still the served one
    b.reset()  # what the report loop does after a failed write
    time.sleep(0.01)
    again = b.build(report(nodes))
    assert again.shards is not None
    store.publish(again)
    assert all(n.startswith(f"cluster-g{again.shards.index.generation}-") for n in shard_names(api))
    assert store.read().node("node-0003").level is Level.HIGH  # type: ignore[union-attr]


def test_the_heartbeat_goes_on_while_a_new_generation_is_written(api: client.ApiClient) -> None:
    now = [2_000_000_000.0]
    store = KubeReportStore(api, clock=lambda: now[0], monotonic=lambda: now[0], heartbeat_seconds=1.0)
    b = ReportBuilder(BUDGET, shards=ShardPlanner(BUDGET, shard_limit=16_384, refresh_seconds=3600))
    nodes = {i: node(i) for i in range(400)}
    store.publish(b.build(report(nodes)))
    first = get_status(api)
    written: list[dict[str, Any]] = []
    write_shard = store._write_shard

    def slow_shard(plan: Any, write: Any) -> None:
        write_shard(plan, write)
        now[0] += 0.6  # each shard takes 0.6 s: a heartbeat every other shard
        written.append(get_status(api))

    store._write_shard = slow_shard  # type: ignore[method-assign]
    b.reset()
    time.sleep(0.01)
    store.publish(b.build(report(nodes)))
    beats = {s["lastUpdateTime"] for s in written} - {first["lastUpdateTime"]}
    assert len(beats) >= len(written) // 2 - 1  # renewed along the way
    assert all(s["shards"]["generation"] == first["shards"]["generation"] for s in written)  # still the served one
    assert get_status(api)["shards"]["generation"] > first["shards"]["generation"]


def test_a_writer_whose_clock_is_behind_numbers_its_generation_after_the_served_one(api: client.ApiClient) -> None:
    store = KubeReportStore(api)
    nodes = {i: node(i) for i in range(400)}
    ahead = ReportBuilder(BUDGET, shards=ShardPlanner(BUDGET, shard_limit=16_384))
    store.publish(ahead.build(Report(time.time() + 3600, "a1", "r1", tuple(nodes[i] for i in sorted(nodes)))))
    served = get_status(api)["shards"]["generation"]
    behind = ReportBuilder(BUDGET, shards=ShardPlanner(BUDGET, shard_limit=16_384))
    with pytest.raises(GenerationTaken) as taken:
        store.publish(behind.build(report(nodes)))
    assert taken.value.floor == served + 1
    assert get_status(api)["shards"]["generation"] == served  # nothing of the served generation was touched
    behind.reset(taken.value.floor)  # what the report loop does with it
    store.publish(behind.build(report(nodes)))
    assert get_status(api)["shards"]["generation"] == served + 1
    assert len(store.read().nodes) == 400


def get_status(api: client.ApiClient) -> dict[str, Any]:
    obj = client.CustomObjectsApi(api).get_cluster_custom_object(GROUP, VERSION, PLURAL, "cluster")
    return dict(obj["status"])


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


def test_the_extender_keeps_the_inline_report_until_the_first_sharded_state_is_whole(api: client.ApiClient) -> None:
    store = KubeReportStore(api)
    b = ReportBuilder(BUDGET, shards=ShardPlanner(BUDGET, shard_limit=16_384, refresh_seconds=3600))
    nodes = {i: node(i) for i in range(60)}
    assert b.build(report(nodes)).shards is None
    store.publish(b.build(report(nodes)))
    shards = KubeListWatch(api, f"/apis/{GROUP}/{VERSION}/{SHARD_PLURAL}", label_selector=f"{REPORT_LABEL}=cluster")
    source = WatchReportSource(
        KubeListWatch(api, f"/apis/{GROUP}/{VERSION}/{PLURAL}", field_selector="metadata.name=cluster"),
        shards=_Late(shards),  # the shards arrive after the report object names them
        backoff_max=0.2,
    )
    source.start()
    try:
        wait(lambda: (r := source.snapshot().report) is not None and len(r.by_name) == 60)
        nodes.update({i: node(i) for i in range(60, 400)})
        built = b.build(report(nodes))
        assert built.shards is not None
        store.publish(built)
        deadline = time.monotonic() + 20
        while True:
            snap = source.snapshot()
            assert snap.report is not None, snap.problem  # never basic mode while the report turns sharded
            if len(snap.report.by_name) == 400:
                break
            assert len(snap.report.by_name) == 60
            assert time.monotonic() < deadline, "the sharded report was never served"
            time.sleep(0.005)
    finally:
        source.stop()


class _Late:
    """A list+watch whose watch events come 0.3 s late (the other watch wins the race)."""

    def __init__(self, inner: KubeListWatch) -> None:
        self._inner = inner

    def list(self) -> Any:
        return self._inner.list()

    def watch(self, resource_version: str, timeout_seconds: int) -> Any:
        for event in self._inner.watch(resource_version, timeout_seconds):
            time.sleep(0.3)
            yield event

    def stop(self) -> None:
        self._inner.stop()
