"""MCO against the real programs: kube-apiserver (RBAC, ServiceAccount tokens), etcd, Volcano's
vc-scheduler and vc-controller-manager, kube-scheduler — built from pinned Go modules.

One cluster for the module, in order: the roles install MCO's objects (idempotently), the analyzer
and the extender run with their own ServiceAccounts' tokens, then both schedulers place pods through
the extender, with the report fresh, stale, and with the extender down.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import ssl
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import bcrypt
import grpc
import pytest
import yaml
from msgspec.structs import replace

from mco_py.doctor.cluster_view import CLOCK_SLACK_S
from mco_py.kube.client import load_api_client
from mco_py.model import SIGNAL_NAMES, DimensionScore, Level, NodeAssessment, Report, Sample
from mco_py.report.builder import ReportBuilder
from mco_py.report.shards import ShardPlanner
from mco_py.report.size import DEFAULT_STATUS_BUDGET
from mco_py.rpc.analyzer.v1.analyzer_pb2 import Control, GuardAction
from mco_py.rpc.analyzer.v1.analyzer_pb2_grpc import AnalyzerStub
from mco_py.store.kube import KubeReportStore
from tests.analyzer.certs import TestCA
from tests.cluster.cluster import free_port, volcano_conf
from tests.cluster_tests.conftest import (
    NS,
    TTL,
    UNINSTALL,
    Env,
    existing_volcano,
    failure_messages,
    mount_scheduler_configmap,
    prometheus_operator_crds,
    run_playbook,
    run_playbook_raw,
    start_service,
    wait_until,
)
from tests.cluster_tests.identities import IDENTITIES
from tests.docs.doc_commands import select
from tests.docs.examples import check as check_example
from tests.playbooks.test_preflight import preflight
from tests.rpc import wire
from tests.rules_fixtures import quick_rules_text

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

KATA_LABEL = "katacontainers.io/kata-runtime"
RUNBOOKS = Path(__file__).resolve().parents[2] / "docs" / "runbooks.md"
PROMETHEUS_RULES = Path(__file__).resolve().parents[2] / "roles" / "mco_crds" / "files" / "prometheus-rules.yaml"
GRAFANA_DASHBOARD = PROMETHEUS_RULES.with_name("grafana-dashboard.json")
#: A Kata RuntimeClass without `scheduling.nodeSelector` (the role's ones have it), made by the first test.
KATA_NO_SELECTOR = "kata-no-selector"


def test_the_roles_install_mcos_objects_on_an_existing_volcano_idempotently(env: Env) -> None:
    existing_volcano(env.cluster)
    prometheus_operator_crds(env.cluster)
    first = run_playbook(env, {})
    assert first["failures"] == 0
    assert first["changed"] > 0
    second = run_playbook(env, {})
    assert second["changed"] == 0, "a second converge changes nothing"
    # the CRD is served with its printer columns; the detection rules are in place
    crd = env.json("get", "crd", "nodeinterferencereports.mco.many-core.io")
    assert any(c["type"] == "Established" and c["status"] == "True" for c in crd["status"]["conditions"])
    assert "cluster-tier" in env.json("get", "configmap", "-n", NS, "mco-detection-rules")["data"]["rules.yaml"]
    # our extender entry went into the existing Volcano's ConfigMap, in the v1.10+ reply format
    conf = env.json("get", "configmap", "-n", "volcano-system", "volcano-scheduler-configmap")["data"]
    plugins = [p for tier in yaml.safe_load(conf["volcano-scheduler.conf"])["tiers"] for p in tier["plugins"]]
    extender = next(p for p in plugins if p["name"] == "extender")
    assert extender["arguments"]["extender.urlPrefix"] == f"{env.extender_url}/volcano/v1.10"
    assert extender["arguments"]["extender.ignorable"] is True
    # the rollout restart the role asks for reached the Deployment
    deployment = env.json("get", "deployment", "-n", "volcano-system", "volcano-scheduler")
    assert "kubectl.kubernetes.io/restartedAt" in deployment["spec"]["template"]["metadata"].get("annotations", {})
    # kata-deploy objects, RuntimeClasses, and kvm_check's node label
    assert env.json("get", "daemonset", "-n", "kube-system", "kata-deploy")["metadata"]["name"] == "kata-deploy"
    assert env.json("get", "runtimeclass", "kata-qemu")["handler"] == "kata-qemu"
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in env.json("get", "nodes")["items"]}
    assert "mco.many-core.io/kvm-ready" in labels["node-1"]
    # the Prometheus Operator's objects, with the labels its Prometheus selects on; the alerts
    # as in the plain rules file, their {{ $labels }} templates left for Prometheus
    monitors = env.json("get", "servicemonitors", "-n", NS)["items"]
    names = sorted(m["metadata"]["name"] for m in monitors)
    assert names == ["mco-analyzer", "mco-collector", "mco-scheduler-extender"]
    alerts = env.json("get", "prometheusrule", "-n", NS, "mco-alerts")
    for obj in [*monitors, alerts]:
        assert obj["metadata"]["labels"] == {"app.kubernetes.io/part-of": "mco", "release": "kube-prometheus-stack"}
    assert alerts["spec"] == yaml.safe_load(PROMETHEUS_RULES.read_text())
    assert "{{ $labels.instance }}" in json.dumps(alerts["spec"])
    # the Grafana dashboard, byte for byte, for Grafana's sidecar (its {{ legend }} templates kept)
    dashboard = env.json("get", "configmap", "-n", NS, "mco-grafana-dashboard")
    assert dashboard["metadata"]["labels"] == {"app.kubernetes.io/part-of": "mco", "grafana_dashboard": "1"}
    assert dashboard["data"] == {"mco-interference.json": GRAFANA_DASHBOARD.read_text()}
    # what the cluster's own agents would do next (there is no kubelet): kata-deploy's pod labels the
    # node it installed Kata on, and the kubelet projects the edited ConfigMap into vc-scheduler's file
    env.kubectl("label", "node", "node-3", f"{KATA_LABEL}=true")
    mount_scheduler_configmap(env)
    env.cluster.apply(
        [
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": KATA_NO_SELECTOR},
                "handler": "kata-qemu",
            }
        ]
    )


def test_the_running_volcano_version_decides_and_is_never_guessed(env: Env) -> None:
    """The first converge read v1.14.1 from the scheduler's image (its entry is in the v1.10 format)."""
    run, document = run_playbook_raw(env, {"volcano_version": "v1.9.0"})
    assert run.returncode != 0
    assert any("but the running scheduler is v1.14.1" in m for m in failure_messages(document))
    deployment = ["-n", "volcano-system", "deployment/volcano-scheduler"]
    env.kubectl("set", "image", *deployment, "volcano-scheduler=volcanosh/vc-scheduler:latest")
    try:
        run, document = run_playbook_raw(env, {})
        assert run.returncode != 0
        assert any("MCO does not guess" in m for m in failure_messages(document)), failure_messages(document)
        # told the version, the role goes on (and changes nothing: the entry is already right)
        assert run_playbook(env, {"volcano_version": "v1.14.1"})["changed"] == 0
    finally:
        env.kubectl("set", "image", *deployment, "volcano-scheduler=volcanosh/vc-scheduler:v1.14.1")


@pytest.mark.parametrize("inventory", ["inventory/example", "inventory/example-existing"])
def test_the_example_inventories_pass_preflight_on_a_real_cluster(env: Env, inventory: str) -> None:
    run = preflight({"mco_kubeconfig": str(env.cluster.admin_kubeconfig)}, inventory=inventory)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "Ask the API server for the kube-system namespace" in run.stdout


def test_preflight_says_when_the_api_server_does_not_answer(env: Env, tmp_path: Path) -> None:
    dead = yaml.safe_load(env.cluster.admin_kubeconfig.read_text())
    dead["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    kubeconfig = tmp_path / "dead.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(dead))
    run = preflight({"mco_kubeconfig": str(kubeconfig)}, inventory="inventory/example")
    assert run.returncode != 0
    assert "did not answer as expected" in " ".join(run.stdout.split()), run.stdout[-4000:]


BROKEN_RULES = "version: broken\nsignals:\n  psiIoSomeAvg10: {warn: 9, critical: 3}\n"


def test_each_identity_has_least_privilege(env: Env) -> None:
    """``kubectl auth can-i`` as each MCO ServiceAccount: what it needs is allowed, the rest denied."""
    table = []
    for sa, checks in IDENTITIES.items():
        for expected, verb, resource, namespace in checks:
            name, _, subresource = resource.partition("#")
            args = ["auth", "can-i", verb, name, f"--as=system:serviceaccount:{NS}:{sa}"]
            args += [f"--subresource={subresource}"] if subresource else []
            args += ["-n", namespace] if namespace else []
            answer = env.kubectl(*args, check=False).strip()
            table.append((sa, verb, resource, namespace or "(cluster)", expected, answer))
    wrong = [row for row in table if row[4] != row[5]]
    assert not wrong, "\n".join(f"{r[0]}: can-i {r[1]} {r[2]} in {r[3]}: expected {r[4]}, got {r[5]}" for r in wrong)


def test_the_analyzer_works_with_its_own_serviceaccount_token_only(env: Env) -> None:
    env.start_analyzer()
    env.send("node-1", psiIoSomeRate=1.0, psiIoSomeAvg10=1.0)
    env.send("node-2", psiIoSomeRate=40.0, psiIoSomeAvg10=35.0)  # over the extender's io hard constraint (20)
    env.send("node-3", psiCpuSomeRate=90.0, psiIoSomeAvg10=1.0)  # High (cpu), no hard constraint
    nodes = wait_until(lambda: len(env.report_nodes()) == 3 and env.report_nodes(), "the report with 3 nodes")
    assert {n: v["level"] for n, v in nodes.items()} == {"node-1": "None", "node-2": "Medium", "node-3": "High"}
    assert nodes["node-3"]["dominant"] == "cpu"
    # `kubectl get nir` shows the printer columns
    table = env.kubectl("get", "nir").splitlines()
    assert table[0].split() == ["NAME", "NODES", "HIGH", "UNKNOWN", "RULES", "UPDATED"]
    assert table[1].split()[:5] == ["cluster", "3", "1", "0", "cluster-tier"]
    # it holds the Lease, with the identity it was given
    lease = env.json("get", "lease", "-n", NS, "mco-analyzer")
    assert lease["spec"]["holderIdentity"] == "analyzer-test"
    # a bad rules document is refused with an Event on the ConfigMap (and the rules stay)
    env.kubectl(
        "-n", NS, "patch", "configmap", "mco-detection-rules", "--type=merge",
        "-p", json.dumps({"data": {"rules.yaml": BROKEN_RULES}}),
    )  # fmt: skip
    event = wait_until(
        lambda: next(
            (e for e in env.json("get", "events", "-n", NS)["items"] if e["reason"] == "InvalidDetectionRules"), None
        ),
        "an InvalidDetectionRules Event",
    )
    assert event["involvedObject"]["name"] == "mco-detection-rules"
    assert "critical (3) must be greater than warn (9)" in event["message"]
    env.kubectl(
        "-n", NS, "patch", "configmap", "mco-detection-rules", "--type=merge",
        "-p", json.dumps({"data": {"rules.yaml": quick_rules_text("cluster-tier-2")}}),
    )  # fmt: skip
    wait_until(lambda: "cluster-tier-2" in env.kubectl("get", "nir"), "the good rules in force again")
    # every call it made was its own: no other credential is in its kubeconfig
    config = yaml.safe_load(env.kubeconfigs["mco-analyzer"].read_text())
    assert set(config["users"][0]["user"]) == {"token"}
    errors = [line for line in env.analyzer.lines() if line.get("level") == "error"]  # type: ignore[union-attr]
    assert not [e for e in errors if "forbidden" in json.dumps(e).lower()], errors


def _doctor(env: Env, kubeconfig: Path | None = None) -> tuple[int, dict[str, tuple[str, str]]]:
    """``mco doctor --cluster -o json`` as an operator runs it: exit code, and per check its worst
    verdict and that verdict's detail."""
    run = subprocess.run(
        [sys.executable, "-m", "mco_py.cli", "doctor", "--cluster", "-o", "json", "--ttl", str(TTL),
         "--kubeconfig", str(kubeconfig or env.cluster.admin_kubeconfig)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    order = {"ok": 0, "warn": 1, "fail": 2}
    checks: dict[str, tuple[str, str]] = {}
    for check in json.loads(run.stdout)["checks"]:
        seen = checks.get(check["name"])
        if seen is None or order[check["verdict"]] > order[seen[0]]:
            checks[check["name"]] = (check["verdict"], check["detail"])
    return run.returncode, checks


def _can_i(env: Env, verb: str, resource: str, namespace: str = "") -> str:
    args = ["auth", "can-i", verb, resource, f"--as=system:serviceaccount:{NS}:mco-analyzer"]
    return env.kubectl(*args, *(["-n", namespace] if namespace else []), check=False).strip()


GUARD_RIGHTS = [("list", "pods", ""), ("watch", "pods", ""), ("create", "events", "default")]


def test_guard_pods_with_the_analyzers_own_token_and_the_rights_taken_back(env: Env) -> None:
    """mco_guard_pods grants the analyzer Pods and Node Events; the analyzer, with only its own
    token, tells a node's stream its pods and posts the node's guard change as an Event; switched
    off, the rights are gone again."""
    keep_rules = {"mco_crds_rules_configmap": "create"}  # the tests before edited them
    assert run_playbook(env, {"mco_guard_pods": True, **keep_rules})["failures"] == 0
    assert [_can_i(env, *right) for right in GUARD_RIGHTS] == ["yes", "yes", "yes"]
    assert _can_i(env, "delete", "pods", "default") == "no"
    assert _can_i(env, "create", "events", "kube-system") == "no"
    if env.analyzer is not None:
        env.analyzer.stop()  # the same identity takes the Lease back at once, with --guard-pods
    env.analyzer = None
    batch_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "guard-batch", "namespace": "default"},
                 "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]}}  # fmt: skip
    env.kubectl("apply", "-f", "-", stdin=json.dumps(batch_pod))
    settings = env.workdir / "analyzer-guard.yaml"
    settings.write_text("guardPods: true\n")
    analyzer = start_service(
        env.workdir, "analyzer-guard", "analyzer", f"--config={settings}", "--mode=cluster",
        f"--kubeconfig={env.kubeconfig('mco-analyzer')}", "--identity=analyzer-test", "--listen=127.0.0.1:0",
        "--metrics-host=127.0.0.1", "--metrics-port=0", "--lease-duration=3",
    )  # fmt: skip
    try:
        started = wait_until(lambda: next((ln for ln in analyzer.lines() if "grpc_port" in ln), None), "it listens")
        port = int(started["grpc_port"])
        change = GuardAction(node="node-1", timestamp_unix_nanos=time.time_ns(), action="throttle",
                             limit_before=1.0, limit=0.5, pressure=42.0, cpus=2)  # fmt: skip

        def one_batch() -> list[Control]:
            sample = Sample("node-1", time.time(), {"psiCpuSomeRate": 1.0})
            batch = wire.batch_to_proto([sample], collector="node-1", sequence=1)
            batch.guard_actions.append(change)
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                return list(AnalyzerStub(channel).StreamSamples(iter([batch]), timeout=30))

        def pods_told() -> list[str] | None:
            for reply in one_batch():
                if reply.WhichOneof("kind") == "workloads":
                    return [f"{p.name}:{'offline' if p.offline else 'online'}" for p in reply.workloads.pods]
            return None

        assert "guard-batch:offline" in wait_until(pods_told, "node-1's pods on its stream")
        events = wait_until(
            lambda: env.json("get", "events", "-n", "default",
                             "--field-selector=involvedObject.kind=Node,involvedObject.name=node-1")["items"],
            "the guard's Event on node-1",
        )  # fmt: skip
        assert {e["reason"] for e in events} == {"OfflineCPUThrottled"}
        assert events[0]["source"]["component"] == "mco-analyzer"
    finally:
        analyzer.stop()
        env.kubectl("delete", "pod", "guard-batch", "-n", "default", "--grace-period=0", "--force", check=False)
    assert run_playbook(env, {"mco_guard_pods": False, **keep_rules})["changed"] > 0
    assert [_can_i(env, *right) for right in GUARD_RIGHTS] == ["no", "no", "no"]


def test_doctor_checks_the_cluster_and_names_each_broken_part(env: Env) -> None:
    env.start_analyzer()
    _fresh(env)
    code, checks = _doctor(env)
    assert {name: verdict for name, (verdict, _) in checks.items()} == {
        "report CRD": "ok",
        "cluster report": "ok",
        "nodes in the report": "ok",
        "analyzer leader": "ok",
        "volcano scheduler": "ok",
        "kata runtime": "ok",
        "rbac mco-analyzer": "ok",
        "rbac mco-scheduler-extender": "ok",
    }, checks
    assert code == 0
    assert "by analyzer-test" in checks["cluster report"][1]
    assert checks["analyzer leader"][1].startswith("analyzer-test, renewed")
    assert f"extender {env.extender_url}/volcano/v1.10, Volcano v1.14" in checks["volcano scheduler"][1]
    assert checks["kata runtime"][1] == "1 Nodes run kata-qemu: node-3"
    (command,) = select(RUNBOOKS, "Troubleshoot", r"^mco doctor --cluster")
    table = subprocess.run(
        [sys.executable, "-m", "mco_py.cli", *shlex.split(command)[1:], "--ttl", str(TTL)],
        env={**os.environ, "KUBECONFIG": str(env.cluster.admin_kubeconfig)},
        capture_output=True, text=True, timeout=120, check=False,
    ).stdout  # fmt: skip
    assert table.splitlines()[-1] == "verdict: ok (8 ok, 0 warn, 0 fail)", table
    check_example("doctor-cluster", table)  # docs/operations.md shows it
    # one more right than it needs: named, with the right that is too much
    env.kubectl("-n", NS, "create", "role", "doctor-extra", "--verb=get", "--resource=secrets")
    env.kubectl("-n", NS, "create", "rolebinding", "doctor-extra", "--role=doctor-extra",
                f"--serviceaccount={NS}:mco-scheduler-extender")  # fmt: skip
    try:
        code, checks = _doctor(env)
        extra = ("warn", "has more than it needs: may get secrets in mco-system")
        assert checks["rbac mco-scheduler-extender"] == extra
        assert code == 1
    finally:
        env.kubectl("-n", NS, "delete", "rolebinding,role", "doctor-extra")
    # Volcano's entry with ignorable as a string (Volcano would read it as false)
    configmap = env.json("get", "configmap", "-n", "volcano-system", "volcano-scheduler-configmap")
    conf = configmap["data"]["volcano-scheduler.conf"]
    assert "extender.ignorable: true" in conf
    broken = conf.replace("extender.ignorable: true", 'extender.ignorable: "true"')
    patch = ["-n", "volcano-system", "patch", "configmap", "volcano-scheduler-configmap", "--type=merge", "-p"]
    env.kubectl(*patch, json.dumps({"data": {"volcano-scheduler.conf": broken}}))
    try:
        _, checks = _doctor(env)
        assert checks["volcano scheduler"][0] == "fail"
        assert "ignorable must be the YAML bool true (is a string)" in checks["volcano scheduler"][1]
    finally:
        env.kubectl(*patch, json.dumps({"data": {"volcano-scheduler.conf": conf}}))
    # a kubeconfig that may not ask the authorizer (the extender's own) says so instead of guessing
    _, checks = _doctor(env, env.kubeconfig("mco-scheduler-extender"))
    assert checks["rbac mco-analyzer"][0] == "warn"
    assert "cannot ask the authorizer: SubjectAccessReview: HTTP 403" in checks["rbac mco-analyzer"][1]
    assert checks["report CRD"][0] == "fail"
    assert "HTTP 403" in checks["report CRD"][1]
    assert checks["cluster report"][0] == "ok"  # it may read the report
    # the analyzer stops: no leader, and the report goes stale past the TTL
    assert env.analyzer is not None
    env.analyzer.stop()
    time.sleep(TTL + CLOCK_SLACK_S + 1.0)  # doctor forgives a little clock difference
    code, checks = _doctor(env)
    assert code == 2
    assert checks["analyzer leader"][0] == "fail"
    assert "no analyzer leads" in checks["analyzer leader"][1]
    assert checks["cluster report"][0] == "fail"
    assert "beyond the extender's TTL (4 s)" in checks["cluster report"][1]
    env.start_analyzer()  # the next tests need it


def test_rules_edited_by_hand_are_never_silently_overwritten(env: Env) -> None:
    """The previous test edited mco-detection-rules with kubectl: each ownership mode does what it says."""
    edited = env.json("get", "configmap", "-n", NS, "mco-detection-rules")["data"]["rules.yaml"]
    assert "cluster-tier-2" in edited
    # guarded (the default): the run stops, says what to do, and the edit stays
    run, document = run_playbook_raw(env, {})
    assert run.returncode != 0
    assert any("MCO does not overwrite edits" in m for m in failure_messages(document)), failure_messages(document)
    assert env.json("get", "configmap", "-n", NS, "mco-detection-rules")["data"]["rules.yaml"] == edited
    # create: the ConfigMap exists, so it is left alone
    assert run_playbook(env, {"mco_crds_rules_configmap": "create"})["changed"] == 0
    assert env.json("get", "configmap", "-n", NS, "mco-detection-rules")["data"]["rules.yaml"] == edited
    # managed: the inventory's rules replace the edit; guarded runs then follow the inventory again
    assert run_playbook(env, {"mco_crds_rules_configmap": "managed"})["changed"] > 0
    written = env.json("get", "configmap", "-n", NS, "mco-detection-rules")["data"]["rules.yaml"]
    assert "cluster-tier-2" not in written
    assert "cluster-tier" in written
    assert run_playbook(env, {})["changed"] == 0
    wait_until(lambda: "cluster-tier-2" not in env.kubectl("get", "nir"), "the inventory's rules in force again")


def _fresh(env: Env) -> None:
    """Keep every node's data fresh (the analyzer forgets nothing, the extender sees a current report)."""
    env.send("node-1", psiIoSomeRate=1.0, psiIoSomeAvg10=1.0)
    env.send("node-2", psiIoSomeRate=40.0, psiIoSomeAvg10=35.0)
    env.send("node-3", psiCpuSomeRate=90.0, psiIoSomeAvg10=1.0)


@pytest.mark.parametrize("scheduler", ["volcano", "default-scheduler"])
def test_schedulers_place_pods_through_the_extender(env: Env, scheduler: str) -> None:
    env.start_analyzer()
    env.start_extender()
    _fresh(env)
    wait_until(lambda: env.report_nodes().get("node-3", {}).get("level") == "High", "node-3 High")
    try:
        # one at a time: the quiet node scores highest, the constrained one is never chosen
        first = env.placements(env.create_pods(f"{scheduler[:3]}-one", 1, scheduler=scheduler))
        assert list(first.values()) == ["node-1"], first
        spread = env.placements(env.create_pods(f"{scheduler[:3]}-many", 6, scheduler=scheduler))
        assert "node-2" not in spread.values(), spread
        # a Kata pod fits only the node labelled for Kata (node-3), even though it is busy: the RuntimeClass
        # has no nodeSelector of its own, so the extender's Kata rule is what keeps it there
        kata = env.placements(
            env.create_pods(f"{scheduler[:3]}-kata", 2, scheduler=scheduler, runtime_class=KATA_NO_SELECTOR)
        )
        assert set(kata.values()) == {"node-3"}, kata
    finally:
        env.delete_pods()
    # and it was the extender that said so, through the routes of that scheduler
    filter_route = "volcano_predicate" if scheduler == "volcano" else "kube_filter"
    prioritize_route = "volcano_prioritize" if scheduler == "volcano" else "kube_prioritize"
    decisions = _decisions(env)
    assert decisions.get((filter_route, "reject", "constraint"), 0) > 0, decisions
    assert decisions.get((filter_route, "reject", "kata"), 0) > 0, decisions
    assert decisions.get((prioritize_route, "score", "report"), 0) > 0, decisions


@pytest.mark.parametrize("scheduler", ["volcano", "default-scheduler"])
def test_stale_report_falls_back_and_kata_still_holds(env: Env, scheduler: str) -> None:
    env.start_extender()
    analyzer = env.start_analyzer()
    _fresh(env)
    analyzer.stop()
    time.sleep(TTL + 1.5)  # the report is older than the TTL now: basic mode
    try:
        assert b"mode=basic" in _readyz(env)
        pods = env.placements(env.create_pods(f"{scheduler[:3]}-stale", 6, scheduler=scheduler))
        assert len(pods) == 6
        kata = env.placements(
            env.create_pods(f"{scheduler[:3]}-kstale", 2, scheduler=scheduler, runtime_class=KATA_NO_SELECTOR)
        )
        assert set(kata.values()) == {"node-3"}, kata
    finally:
        env.delete_pods()


@pytest.mark.parametrize("scheduler", ["volcano", "default-scheduler"])
def test_a_down_extender_does_not_stop_scheduling(env: Env, scheduler: str) -> None:
    extender = env.start_extender()
    extender.stop()
    try:
        pods = env.placements(env.create_pods(f"{scheduler[:3]}-down", 4, scheduler=scheduler))
        assert len(pods) == 4, "ignorable: the scheduler goes on without the extender"
    finally:
        env.delete_pods()
        env.start_extender()


def test_volcano_v1_14_decodes_only_the_v1_10_reply_format(env: Env) -> None:
    """With node-2 the only candidate: the v1.10+ reply rejects it; a v1.9 reply cannot be decoded by
    Volcano v1.14, `ignorable` turns that into a pass, and the rejection is lost."""
    env.start_analyzer()
    env.start_extender()
    _fresh(env)
    wait_until(lambda: env.report_nodes().get("node-2", {}).get("level") == "Medium", "node-2 in the report")
    env.kubectl("cordon", "node-1", "node-3")
    v110 = env.cluster.volcano_conf_path.read_text()
    try:
        (name,) = env.create_pods("fmt", 1)
        time.sleep(6)  # several scheduling cycles
        _fresh(env)
        pod = env.json("get", "pod", "-n", "default", name)
        assert not pod["spec"].get("nodeName"), "v1.10 format: node-2 rejected over its hard constraint"
        env.cluster.set_volcano_conf(volcano_conf(env.extender_url, reply_format="v1.9"))
        assert env.placements([name], timeout=60) == {name: "node-2"}, "v1.9 format: the rejection is lost"
    finally:
        env.cluster.set_volcano_conf(v110)
        env.kubectl("uncordon", "node-1", "node-3")
        env.delete_pods()


def _decisions(env: Env) -> dict[tuple[str, str, str], float]:
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"{env.extender_url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "mco_extender_decisions":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    labels = sample.labels
                    out[(labels["verb"], labels["result"], labels["reason"])] = sample.value
    return out


def _readyz(env: Env) -> bytes:
    import urllib.request

    with urllib.request.urlopen(f"{env.extender_url}/readyz", timeout=5) as resp:
        body: bytes = resp.read()
        return body


SCALE_NODES = 65_000


def _scale_node(i: int, level: Level, t: float) -> NodeAssessment:
    """A node with every signal and two reasons (full detail, as a loaded node has); every tenth one
    over the extender's io hard constraint (20)."""
    io = 35.0 if i % 10 == 0 else 1.5 + i % 7
    signals = dict.fromkeys(SIGNAL_NAMES, 0.0) | {"psiIoSomeAvg10": io, "llcMissRate": 0.02, "bioLatencyP99Ms": 3.25}
    return NodeAssessment(
        f"scale-{i:05d}", level, float(i % 40), signals, t, (f"io: psiIoSomeAvg10 {io} above 1", "cpu: steady"),
        "io", {"io": DimensionScore(level if level is not Level.UNKNOWN else Level.NONE, float(i % 40))},
    )  # fmt: skip


def test_a_65000_node_report_is_sharded_accepted_read_back_and_served(env: Env) -> None:
    """The real kube-apiserver and etcd take a 65,000-node report, every node in full, written with the
    analyzer's own token (its RBAC on shards); it reads back whole, 5 % of the nodes changing level is
    a few lines of the report object, and an extender started afterwards serves every node. Needs
    only the roles' objects (the first test)."""
    try:
        _scale_report(env)
    finally:  # 128 objects of ~400 KiB each: never left behind for the next tests
        env.kubectl("delete", "nirs", "-l", "mco.many-core.io/report=scale", "--wait=false", check=False)
        env.kubectl("delete", "nir", "scale", "--ignore-not-found", check=False)


def _scale_report(env: Env) -> None:
    levels = (Level.NONE, Level.LOW, Level.MEDIUM, Level.HIGH)
    t = float(int(time.time()))  # whole seconds: lastSampleTime reads back equal
    nodes = {i: _scale_node(i, levels[i % 4], t) for i in range(SCALE_NODES)}
    builder = ReportBuilder(DEFAULT_STATUS_BUDGET, shards=ShardPlanner(DEFAULT_STATUS_BUDGET))
    writer = KubeReportStore(load_api_client(env.kubeconfig("mco-analyzer")), name="scale", request_timeout=30)
    started = time.monotonic()
    built = builder.build(Report(t, "analyzer-scale", "r1", tuple(nodes.values())))
    assert built.shards is not None
    assert built.detail_dropped == 0
    writer.publish(built)
    first_write = time.monotonic() - started
    count = built.shards.index.count
    print(f"65,000 nodes: {count} shards, largest {max(built.shards.sizes)} B, first write {first_write:.1f} s")
    assert max(built.shards.sizes) <= 512 * 1024
    reader = KubeReportStore(load_api_client(env.cluster.admin_kubeconfig), name="scale", request_timeout=60)
    got = reader.read()
    assert len(got.nodes) == SCALE_NODES
    assert got.node("scale-01234") == nodes[1234]  # every field back as written
    # 5 % change level: lines in the report object; a shard is written only when due (whole)
    t += 5
    for i in range(0, SCALE_NODES, 20):
        nodes[i] = _scale_node(i, Level.HIGH if nodes[i].level is not Level.HIGH else Level.LOW, t)
    built = builder.build(Report(t, "analyzer-scale", "r1", tuple(nodes.values())))
    assert built.shards is not None
    assert not built.shards.new_generation
    changes = built.shards.index.changes
    whole = {n for w in built.shards.writes for n in w.nodes}  # the shards due for their refresh
    assert set(changes) | whole >= {nodes[i].name for i in range(0, SCALE_NODES, 20)}
    assert len(built.shards.writes) < count // 4
    started = time.monotonic()
    writer.publish(built)
    print(f"5 % level changes: {len(changes)} in the report object, {len(built.shards.writes)} shards due, "
          f"written in {time.monotonic() - started:.1f} s")  # fmt: skip
    got = reader.read()
    assert {n.name: n.level for n in got.nodes} == {n.name: n.level for n in nodes.values()}
    table = env.kubectl("get", "nir", "scale").splitlines()
    assert table[1].split()[:3] == ["scale", str(SCALE_NODES), str(sum(n.level is Level.HIGH for n in nodes.values()))]
    assert len(env.kubectl("get", "nirs", "-l", "mco.many-core.io/report=scale", "-o", "name").split()) == count
    # an extender started now, with its own token, serves every node: filter and scores from the shards
    port = free_port()
    config = env.workdir / "extender-scale.yaml"
    config.write_text(yaml.safe_dump({
        "mode": "cluster", "kubeconfig": str(env.kubeconfig("mco-scheduler-extender")), "crName": "scale",
        "listen": f"127.0.0.1:{port}", "crStatusTTLSeconds": 3600, "logLevel": "warning",
    }))  # fmt: skip
    extender = start_service(env.workdir, "extender-scale", "extender", f"--config={config}")
    try:
        names = [n.name for n in nodes.values()]
        args = json.dumps({"Pod": {"metadata": {"name": "p", "namespace": "default"}, "spec": {}}, "NodeNames": names})

        def ask(path: str) -> Any:
            request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=args.encode(), method="POST")
            with urllib.request.urlopen(request, timeout=60) as resp:
                return json.loads(resp.read())

        def served() -> Any:
            if not extender.running():
                pytest.fail(f"extender exited: {extender.log.read_text()[-2000:]}")
            try:
                answer = ask("/kube/filter")
            except OSError:
                return None
            return answer if answer.get("FailedNodes") else None

        answer = wait_until(served, "the extender to serve the sharded report", timeout=180, every=1.0)
        assert sorted(answer["FailedNodes"]) == sorted(n for i, n in enumerate(names) if i % 10 == 0)
        assert len(answer["NodeNames"]) == SCALE_NODES - SCALE_NODES // 10
        scores = {p["Host"]: p["Score"] for p in ask("/kube/prioritize")}
        assert len(scores) == SCALE_NODES
        assert all(scores[n.name] == round((100 - n.score) / 10) for n in nodes.values())  # no node on the neutral 5
        # a level change, from the analyzer's build to the extender's answer (one report object write)
        t += 5
        nodes[1] = replace(_scale_node(1, Level.HIGH, t), score=99.0)
        one = json.dumps(
            {"Pod": {"metadata": {"name": "p", "namespace": "default"}, "spec": {}}, "NodeNames": [nodes[1].name]}
        )
        started = time.monotonic()
        writer.publish(builder.build(Report(t, "analyzer-scale", "r1", tuple(nodes.values()))))
        written = time.monotonic() - started

        def moved() -> bool:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/kube/prioritize", data=one.encode(), method="POST"
            )
            with urllib.request.urlopen(request, timeout=60) as resp:
                return bool(json.loads(resp.read())[0]["Score"] == 0)

        wait_until(moved, "the extender to see the level change", timeout=60, every=0.02)
        print(
            f"level change: build + write {written:.2f} s, visible in the extender {time.monotonic() - started:.2f} s"
        )
    finally:
        extender.stop()


def _https_requests(url: str, context: ssl.SSLContext, authorization: str) -> float:
    """Volcano's calls the extender answered (mco_extender_requests_total of its predicate route), over HTTPS."""
    from prometheus_client.parser import text_string_to_metric_families

    request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": authorization})
    with urllib.request.urlopen(request, timeout=5, context=context) as resp:
        text = resp.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "mco_extender_requests"
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels.get("route") == "volcano_predicate"
    )


def _foreign_trust_configmap(env: Env) -> None:
    """The CA bundle's ConfigMap as an operator makes it by hand (volcano_manage_scheduler_config: false)."""
    env.kubectl("delete", "configmap", "-n", "volcano-system", "mco-extender-trust", "--ignore-not-found")
    env.kubectl("create", "configmap", "-n", "volcano-system", "mco-extender-trust", "--from-literal=ca.pem=theirs")


def test_volcano_reaches_an_https_extender_with_basic_auth_through_the_role(env: Env) -> None:
    """The volcano role registers https://volcano:PASSWORD@... and has the scheduler trust MCO's CA; the real
    vc-scheduler, run as the kubelet would run the patched Deployment (its env, the ConfigMap's file in the
    mount), calls the HTTPS extender with basic auth. An existing Volcano's Deployment is changed only on request."""
    existing_volcano(env.cluster)
    run_playbook(env, {})  # MCO's objects (the extender's ServiceAccount) and the plain http:// entry
    pki = env.workdir / "extender-pki"
    pki.mkdir(exist_ok=True)
    ca = TestCA(pki)
    pair = ca.issue("extender", "mco-scheduler-extender", ["localhost"], server=True, ips=["127.0.0.1"])
    password = "s3cret/@:pw"  # characters a URL's userinfo must escape
    authorization = "Basic " + base64.b64encode(f"volcano:{password}".encode()).decode()
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    if env.extender is not None:
        env.extender.stop()
    config = env.workdir / "extender-https.yaml"
    config.write_text(yaml.safe_dump({
        "mode": "cluster", "kubeconfig": str(env.kubeconfig("mco-scheduler-extender")),
        "listen": f"127.0.0.1:{env.extender_port}", "crStatusTTLSeconds": TTL, "volcanoVersion": "1.10",
        "web": {"tls": {"certFile": str(pair.cert), "keyFile": str(pair.key)}, "basicAuthUsers": {"volcano": hashed}},
    }))  # fmt: skip
    extender = env.extender = start_service(env.workdir, "extender-https", "extender", f"--config={config}")
    url = f"https://127.0.0.1:{env.extender_port}"
    context = ssl.create_default_context(cafile=str(ca.path))

    def answers() -> bool:
        assert extender.running(), extender.log.read_text()[-3000:]
        try:
            _https_requests(url, context, authorization)
        except OSError:  # URLError too: not listening yet
            return False
        return True

    wait_until(answers, "the HTTPS extender")
    https = {  # the entry's host stays the inventory's 127.0.0.1 (an IP address in the certificate)
        "volcano_extender_tls": True,
        "volcano_extender_ca_file": str(ca.path),
        "volcano_extender_basic_auth": True,
        "volcano_extender_basic_auth_user": "volcano",
        "volcano_extender_basic_auth_password": password,
    }
    deployment = env.json("get", "deployment", "-n", "volcano-system", "volcano-scheduler")
    try:
        # a ConfigMap of the bundle's name that MCO did not make is never overwritten
        _foreign_trust_configmap(env)
        run, document = run_playbook_raw(env, {**https, "volcano_patch_existing_scheduler_for_https": True})
        assert run.returncode != 0
        messages = "\n".join(failure_messages(document))
        assert "exists and MCO did not make it" in messages, messages
        assert env.json("get", "configmap", "-n", "volcano-system", "mco-extender-trust")["data"]["ca.pem"] == "theirs"
        env.kubectl("delete", "configmap", "-n", "volcano-system", "mco-extender-trust")
        # an existing Volcano: the role stops with the patch to apply by hand, and leaves the Deployment alone
        run, document = run_playbook_raw(env, https)
        assert run.returncode != 0
        messages = "\n".join(failure_messages(document))
        assert "volcano_patch_existing_scheduler_for_https: true" in messages, messages
        assert "kubectl -n volcano-system patch deploy/volcano-scheduler --patch" in messages
        assert env.json("get", "deployment", "-n", "volcano-system", "volcano-scheduler")["spec"] == deployment["spec"]
        trust = env.json("get", "configmap", "-n", "volcano-system", "mco-extender-trust")
        assert trust["data"]["ca.pem"].strip() == ca.path.read_text().strip()
        assert password not in run.stdout + run.stderr
        escaped = urllib.parse.quote(password, safe="")
        assert escaped not in run.stdout + run.stderr
        # asked to: the role adds the trust to the Deployment and writes the https:// entry
        run, document = run_playbook_raw(env, {**https, "volcano_patch_existing_scheduler_for_https": True})
        assert run.returncode == 0, "\n".join(failure_messages(document))
        assert password not in run.stdout + run.stderr
        assert escaped not in run.stdout + run.stderr
        patched = env.json("get", "deployment", "-n", "volcano-system", "volcano-scheduler")
        assert patched["metadata"]["annotations"]["mco.many-core.io/extender-trust"] == "mco-extender-trust"
        (container,) = patched["spec"]["template"]["spec"]["containers"]
        cert_dir = {e["name"]: e["value"] for e in container["env"]}["SSL_CERT_DIR"]
        (mount,) = container["volumeMounts"]
        assert mount["mountPath"] in cert_dir.split(":")
        conf = env.json("get", "configmap", "-n", "volcano-system", "volcano-scheduler-configmap")["data"]
        prefix = f"https://volcano:{escaped}@127.0.0.1:{env.extender_port}/volcano/v1.10"
        assert f"extender.urlPrefix: {prefix}" in conf["volcano-scheduler.conf"]
        assert run_playbook(env, {**https, "volcano_patch_existing_scheduler_for_https": True})["changed"] == 0
        # the real vc-scheduler as the kubelet runs that pod: the ConfigMaps' files, the container's env
        mount_scheduler_configmap(env)
        mounted = env.workdir / "extender-trust"
        mounted.mkdir(exist_ok=True)
        (mounted / "ca.pem").write_text(trust["data"]["ca.pem"])
        env.cluster.start_vc_scheduler(environment={"SSL_CERT_DIR": cert_dir.replace(mount["mountPath"], str(mounted))})
        before = _https_requests(url, context, authorization)
        env.placements(env.create_pods("https", 2))
        assert _https_requests(url, context, authorization) > before, "Volcano's calls reached the HTTPS extender"
        env.delete_pods()
        # without MCO's CA in its roots the same scheduler cannot verify the extender: no call gets through
        env.cluster.start_vc_scheduler()
        before = _https_requests(url, context, authorization)
        env.placements(env.create_pods("untrusted", 2))  # ignorable: placed without MCO
        assert _https_requests(url, context, authorization) == before
    finally:
        env.delete_pods()
        extender.stop()
        env.extender = None
        # back to plain HTTP: the entry is http:// again and what MCO added to the Deployment is gone
        run_playbook(env, {})
        restored = env.json("get", "deployment", "-n", "volcano-system", "volcano-scheduler")
        assert restored["spec"] == deployment["spec"]
        mount_scheduler_configmap(env)
        env.cluster.start_vc_scheduler()


def test_uninstall_removes_mcos_objects_and_only_its_volcano_lines(env: Env) -> None:
    """Last in this module: it takes MCO out of the cluster."""
    before = env.json("get", "configmap", "-n", "volcano-system", "volcano-scheduler-configmap")["data"]
    _foreign_trust_configmap(env)  # made by hand, still mounted by the scheduler it was made for: it stays
    assert run_playbook(env, {}, UNINSTALL)["changed"] > 0
    assert env.json("get", "configmap", "-n", "volcano-system", "mco-extender-trust")["data"] == {"ca.pem": "theirs"}
    env.kubectl("delete", "configmap", "-n", "volcano-system", "mco-extender-trust")
    after = env.json("get", "configmap", "-n", "volcano-system", "volcano-scheduler-configmap")["data"]
    old, new = before["volcano-scheduler.conf"].splitlines(), after["volcano-scheduler.conf"].splitlines()
    cut = next(i for i, (a, b) in enumerate(zip([*old, ""], [*new, ""], strict=False)) if a != b)
    removed = len(old) - len(new)
    assert old[cut].strip() == "- name: extender"
    assert old[:cut] + old[cut + removed :] == new, "only the extender entry's lines are gone"
    assert all("extender." in line or line.strip() == "arguments:" for line in old[cut + 1 : cut + removed])
    assert {k: v for k, v in after.items() if k != "volcano-scheduler.conf"} == {
        k: v for k, v in before.items() if k != "volcano-scheduler.conf"
    }
    for kind, name in [
        ("crd", "nodeinterferencereports.mco.many-core.io"),
        ("crd", "nodeinterferencereportshards.mco.many-core.io"),
        ("namespace", NS),
        ("clusterrole", "mco-analyzer"),
        ("clusterrolebinding", "mco-scheduler-extender"),
    ]:
        assert env.kubectl("get", kind, name, "--ignore-not-found", "-o", "name") == "", f"{kind}/{name} is still there"
    assert env.kubectl("get", "prometheusrules,servicemonitors", "-A", "-o", "name") == ""
    labels = env.json("get", "node", "node-1")["metadata"]["labels"]
    assert "mco.many-core.io/kvm-ready" not in labels
    # Volcano itself, and what MCO did not make, are untouched; a second run changes nothing
    assert env.json("get", "deployment", "-n", "volcano-system", "volcano-scheduler")["metadata"]["name"]
    assert run_playbook(env, {}, UNINSTALL)["changed"] == 0
