"""Cluster mode against the emulated API server: NIR writes, 409 retry, outage, rules ConfigMap, Lease."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

pytest.importorskip("tests.kubeapi", reason="the emulated API server (branch kubeapi) is not merged yet")

from kubernetes import client

from mco_py.analyzer.engine import Engine, Outcome
from mco_py.analyzer.metrics import AnalyzerMetrics
from mco_py.analyzer.rules_watch import RulesWatcher
from mco_py.analyzer.writer import ReportLoop
from mco_py.errors import ReportNotFound, StoreUnavailable
from mco_py.kube.client import load_api_client
from mco_py.kube.lease import LeaseElector
from mco_py.kube.rules import INVALID_RULES_REASON, ConfigMapRulesSource
from mco_py.model import GROUP, PLURAL, VERSION, Level, NodeAssessment, Report, Sample
from mco_py.store.kube import KubeReportStore
from tests.contracts import crd_schema
from tests.rpc import wire
from tests.rules_fixtures import SIGNAL, quick_rules, quick_rules_text
from tests.waiting import wait_until

NS = "mco-system"


@pytest.fixture
def api(kube_api: Any, kubeconfig: Path) -> Iterator[client.ApiClient]:
    api_client = load_api_client(kubeconfig)
    crd = yaml.safe_load(crd_schema.CRD_PATH.read_text())
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition(crd)
    client.CoreV1Api(api_client).create_namespace({"metadata": {"name": NS}})
    yield api_client
    api_client.close()


def report(*names: str, level: Level = Level.LOW) -> Report:
    return Report(
        last_update_time=time.time(),
        analyzer_identity="a1",
        rules_version="r1",
        nodes=tuple(NodeAssessment(n, level, 30.0, {"psiIoSomeAvg10": 29.0}, time.time(), ("why",)) for n in names),
    )


def get_nir(api_client: client.ApiClient, name: str = "cluster") -> dict[str, Any]:
    obj: dict[str, Any] = client.CustomObjectsApi(api_client).get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    return obj


def test_store_creates_and_updates_a_valid_nir(api: client.ApiClient) -> None:
    store = KubeReportStore(api)
    with pytest.raises(ReportNotFound):
        store.read()
    store.write(report("node-1"))
    store.write(report("node-1", "node-2"))
    obj = get_nir(api)
    assert crd_schema.errors(obj) == []
    assert [n["name"] for n in obj["status"]["nodes"]] == ["node-1", "node-2"]
    back = store.read()
    assert back.node("node-2") is not None
    assert back.rules_version == "r1"


def test_store_rereads_and_retries_on_conflict(api: client.ApiClient, kube_api: Any) -> None:
    store = KubeReportStore(api)
    store.write(report("node-1"))
    kube_api.conflict_next_write(PLURAL, "cluster", group=GROUP, count=2)
    store.write(report("node-1", "node-9"))

    def codes() -> list[int]:
        return [r.code for r in list(kube_api.requests) if "nodeinterferencereports/cluster/status" in r.path]

    # the server records a request after answering it: wait for the record of the last one
    assert wait_until(lambda: codes()[-3:] == [409, 409, 200]), codes()
    assert {n["name"] for n in get_nir(api)["status"]["nodes"]} == {"node-1", "node-9"}


def sample(node: str, psi: float) -> Sample:
    return Sample(node, time.time(), {SIGNAL: psi})


def test_api_down_then_up_scoring_goes_on_and_report_catches_up(api: client.ApiClient, kube_api: Any) -> None:
    registry = CollectorRegistry()
    engine = Engine(quick_rules(), metrics=AnalyzerMetrics(registry), identity="a1")
    loop = ReportLoop(engine, KubeReportStore(api, backoff_seconds=0.01, request_timeout=30), interval=0.1)
    wire.accept(engine, [sample("node-1", 5.0)], Outcome())
    assert loop.tick()
    kube_api.go_down()
    try:
        wire.accept(engine, [sample("node-2", 90.0)], Outcome())
        assert not loop.tick()
        assert not loop.tick()
        assert registry.get_sample_value("mco_analyzer_report_write_errors_total") == 2
    finally:
        kube_api.go_up()
    assert loop.tick()
    status = get_nir(api)["status"]
    assert {n["name"]: n["level"] for n in status["nodes"]} == {"node-1": "None", "node-2": "High"}


def test_transient_api_errors_are_retried_with_backoff(api: client.ApiClient, kube_api: Any) -> None:
    store = KubeReportStore(api, backoff_seconds=0.01)
    store.write(report("node-1"))
    kube_api.fail_next(2, path="nodeinterferencereports/cluster/status", code=503)
    store.write(report("node-3"))
    assert [n["name"] for n in get_nir(api)["status"]["nodes"]] == ["node-3"]


def put_rules(api_client: client.ApiClient, text: str) -> None:
    core = client.CoreV1Api(api_client)
    body = {"metadata": {"name": "mco-detection-rules", "namespace": NS}, "data": {"rules.yaml": text}}
    try:
        core.read_namespaced_config_map("mco-detection-rules", NS)
    except client.exceptions.ApiException:
        core.create_namespaced_config_map(NS, body)
    else:
        core.replace_namespaced_config_map("mco-detection-rules", NS, body)


def test_rules_hot_reload_from_configmap_with_a_bad_document_in_between(api: client.ApiClient) -> None:
    registry = CollectorRegistry()
    engine = Engine(quick_rules(), metrics=AnalyzerMetrics(registry), identity="a1")
    watcher = RulesWatcher(ConfigMapRulesSource(api, instance="a1"), engine, interval=0.1)
    assert watcher.reload() == "missing"
    put_rules(api, quick_rules_text("cm-1"))
    assert watcher.reload() == "success"
    assert engine.rules.version == "cm-1"
    put_rules(api, "version: cm-bad\nsignals:\n  psiIoSomeAvg10: {warn: 9, critical: 3}\n")
    assert registry.get_sample_value("mco_analyzer_rules_source_valid") == 1
    assert watcher.reload() == "invalid"
    assert watcher.reload() == "invalid"
    assert registry.get_sample_value("mco_analyzer_rules_source_valid") == 0
    assert engine.rules.version == "cm-1", "the last good rules stay in force"
    events = client.CoreV1Api(api).list_namespaced_event(NS).items
    bad = [e for e in events if e.reason == INVALID_RULES_REASON]
    assert len(bad) == 1, "one Event per distinct bad document"
    assert bad[0].involved_object.kind == "ConfigMap"
    assert bad[0].involved_object.name == "mco-detection-rules"
    assert bad[0].type == "Warning"
    assert "critical (3) must be greater than warn (9)" in (bad[0].message or "")
    put_rules(api, quick_rules_text("cm-2"))
    assert watcher.reload() == "success"
    assert engine.rules.version == "cm-2"
    assert registry.get_sample_value("mco_analyzer_rules_source_valid") == 1
    assert registry.get_sample_value("mco_analyzer_rules_reload_total", {"result": "invalid"}) == 2


def lease(api_client: client.ApiClient) -> Any:
    return client.CoordinationV1Api(api_client).read_namespaced_lease("mco-analyzer", NS)


class LeaseClock:
    """Wall clock and monotonic clock for LeaseElector that move only when the test says so.

    With the real clocks a 1 s lease could expire between two calls on a busy host
    (a follower taking over when the test expects the holder to keep the lease).
    """

    def __init__(self) -> None:
        self.wall = time.time()
        self.mono = 1000.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds

    def elector(self, api_client: client.ApiClient, identity: str) -> LeaseElector:
        return LeaseElector(
            api_client,
            identity=identity,
            lease_duration=1.0,
            clock=lambda: self.wall,
            monotonic=lambda: self.mono,
        )


def test_lease_one_leader_then_handover(api: client.ApiClient) -> None:
    clock = LeaseClock()
    a = clock.elector(api, "analyzer-a")
    b = clock.elector(api, "analyzer-b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock.advance(0.5)
    assert a.try_acquire_or_renew(), "the holder renews"
    clock.advance(0.7)
    assert not b.try_acquire_or_renew(), "renewed 0.7 s ago: not expired"
    first = lease(api)
    assert first.spec.holder_identity == "analyzer-a"
    assert first.spec.lease_duration_seconds == 1
    # a stops renewing (crashed): b takes over once the lease has expired
    clock.advance(0.5)
    assert b.try_acquire_or_renew()
    taken = lease(api)
    assert taken.spec.holder_identity == "analyzer-b"
    assert taken.spec.lease_transitions == 1
    assert not a.try_acquire_or_renew()
    assert not a.is_leader
    # a clean shutdown hands over at once
    b.release()
    assert not b.is_leader
    assert a.try_acquire_or_renew()
    assert lease(api).spec.lease_transitions == 2


def test_only_the_leader_writes(api: client.ApiClient) -> None:
    clock = LeaseClock()
    engines = {}
    loops = {}
    electors = {}
    for name in ("a", "b"):
        engine = Engine(quick_rules(), metrics=AnalyzerMetrics(CollectorRegistry()), identity=name)
        wire.accept(engine, [sample("node-1", 90.0)], Outcome())  # both get the same stream: warm state
        elector = clock.elector(api, name)
        electors[name] = elector
        engines[name] = engine
        loops[name] = ReportLoop(engine, KubeReportStore(api), interval=0.1, is_leader=lambda e=elector: e.is_leader)
    electors["a"].try_acquire_or_renew()
    electors["b"].try_acquire_or_renew()
    assert loops["a"].tick()
    assert not loops["b"].tick()
    assert get_nir(api)["status"]["analyzer"]["identity"] == "a"
    clock.advance(1.5)  # a stops renewing
    assert not loops["a"].tick(), "a lapsed leader does not write"
    assert electors["b"].try_acquire_or_renew()
    assert loops["b"].tick()
    status = get_nir(api)["status"]
    assert status["analyzer"]["identity"] == "b"
    assert status["nodes"][0]["level"] == "High", "the follower's warm state is written at once"


def cluster_process(kubeconfig: Path, identity: str, *extra: str) -> Any:
    from tests.analyzer.test_main import Process

    return Process(
        *extra,
        "--mode",
        "cluster",
        "--kubeconfig",
        str(kubeconfig),
        "--identity",
        identity,
        "--listen",
        "127.0.0.1:0",
        "--metrics-host",
        "127.0.0.1",
        "--metrics-port",
        "0",
        "--report-interval",
        "0.2",
        "--rules-interval",
        "0.2",
        "--lease-duration",
        "3",  # renewed every second; a leader starved for 1 s on a busy host keeps the lease
    )


@pytest.mark.slow
def test_two_analyzer_processes_hand_over_the_report(api: client.ApiClient, kubeconfig: Path) -> None:
    from tests.analyzer.test_main import send

    put_rules(api, quick_rules_text("cm-quick"))  # one sample sets the level
    first = cluster_process(kubeconfig, "analyzer-1")
    second = cluster_process(kubeconfig, "analyzer-2")
    try:
        for seq, proc in enumerate((first, second), start=1):
            send(proc.grpc_port, "node-1", 90.0, seq)  # collectors stream to every replica

        def writer() -> str:
            try:
                return str(get_nir(api)["status"]["analyzer"]["identity"])
            except (client.exceptions.ApiException, KeyError):
                return ""

        assert wait_until(lambda: writer() in ("analyzer-1", "analyzer-2"))
        leader, follower = (first, second) if writer() == "analyzer-1" else (second, first)
        assert "mco_analyzer_leader 1.0" in leader.metrics()
        assert "mco_analyzer_leader 0.0" in follower.metrics()
        assert crd_schema.errors(get_nir(api)) == []
        new_writer = "analyzer-2" if leader is first else "analyzer-1"
        assert leader.stop() == 0  # releases the Lease
        assert wait_until(lambda: writer() == new_writer)
        status = get_nir(api)["status"]
        assert status["nodes"][0]["name"] == "node-1"
        assert status["nodes"][0]["level"] == "High"
    finally:
        first.stop()
        second.stop()


def test_missing_crd_is_explained(kube_api: Any, kubeconfig: Path) -> None:
    api_client = load_api_client(kubeconfig)
    try:
        with pytest.raises(StoreUnavailable, match=r"is the CRD nodeinterferencereports\.mco\.many-core\.io installed"):
            KubeReportStore(api_client).write(report("node-1"))
    finally:
        api_client.close()
