"""The mco_kube_scheduler role on the real kube-apiserver: MCO's kube-scheduler as a second scheduler.

One cluster for the module (two fake nodes, the report's CRDs and the namespace mco-system, as
mco_crds leaves them), in order: the runbook's commands (docs/runbooks.md, "kube-scheduler: a second
scheduler with mco-plugin") install it (check mode first, then twice, the second run changing
nothing); the objects are exactly these (RBAC rules and bindings, the KubeSchedulerConfiguration,
the Deployment); then the part that matters: MCO's kube-scheduler binary runs with the configuration
as the role wrote it and a token of the role's ServiceAccount - it becomes leader on its own Lease,
places a pod that names it, keeps a pod off a node the report puts over the io constraint, places it
once the report clears, and is never refused the report. Without the role's report rights it never
leads. Last the switch-off and the uninstall remove exactly what the role made, and an object of
its name that MCO did not make is neither taken over nor removed.

There is no kubelet: the Deployment is never run. The scheduler runs as a process of this test with
the ConfigMap's configuration, only ``clientConnection.kubeconfig`` pointing at the token's kubeconfig
(in a pod it is empty: the ServiceAccount's mounted token).
"""

from __future__ import annotations

import hashlib
import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from scripts.build_schedulers import schedulers
from scripts.gobuild import BuildError
from tests.cluster.cluster import RealCluster
from tests.cluster_tests.conftest import RunbookBed, control_inventory, item_messages, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SECTION = "kube-scheduler: a second scheduler with mco-plugin"
UNINSTALL = Path(__file__).parent / "playbooks" / "kube_scheduler_uninstall.yml"
NS = "mco-system"
NAME = "mco-kube-scheduler"
SA = f"system:serviceaccount:{NS}:{NAME}"
SUBJECTS = [{"kind": "ServiceAccount", "name": NAME, "namespace": NS}]
#: MCO's kube-scheduler as an operator names the copy in their registry (no node pulls it here).
IMAGE = "registry.example/mco/kube-scheduler:v1.34.1-mco0.1.0"
LABELS = {
    "app.kubernetes.io/name": NAME,
    "app.kubernetes.io/component": "scheduler",
    "app.kubernetes.io/part-of": "mco",
    "app.kubernetes.io/managed-by": "mco-ansible",
}
REPORT_RULES = [
    {
        "apiGroups": ["mco.many-core.io"],
        "resources": ["nodeinterferencereports", "nodeinterferencereportshards"],
        "verbs": ["get", "list", "watch"],
    }
]
#: The arguments playbooks/kube_scheduler.yml passes: the extender's default settings, as Volcano's entry.
PLUGIN_ARGS = {
    "crName": "cluster",
    "crStatusTTLSeconds": 30,
    "fallbackWhenCROutdated": True,
    "hardConstraints": {"psiMemoryFullAvg10": 0.0, "psiIoSomeAvg10Threshold": 20.0},
    "kataRuntimeClassPrefixes": ["kata"],
    "scoreWeight": 1.0,
}
CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "leaderElection": {"leaderElect": True, "resourceLock": "leases", "resourceName": NAME, "resourceNamespace": NS},
    "profiles": [
        {
            "schedulerName": "mco-scheduler",
            "plugins": {"multiPoint": {"enabled": [{"name": "mco-plugin", "weight": 5}]}},
            "pluginConfig": [{"name": "mco-plugin", "args": PLUGIN_ARGS}],
        }
    ],
}
#: (kind, namespace or "", name) of every object the role makes.
OBJECTS = [
    ("serviceaccount", NS, NAME),
    ("configmap", NS, NAME),
    ("deployment", NS, NAME),
    ("clusterrolebinding", "", f"{NAME}-kube-scheduler"),
    ("clusterrolebinding", "", f"{NAME}-volume-scheduler"),
    ("clusterrole", "", f"{NAME}-plugin"),
    ("clusterrolebinding", "", f"{NAME}-plugin"),
    ("rolebinding", "kube-system", f"{NAME}-authentication-reader"),
    ("role", NS, f"{NAME}-leader-election"),
    ("rolebinding", NS, f"{NAME}-leader-election"),
]
#: The cluster's own objects the role binds or sits beside, which must not change.
THEIRS = [
    ("clusterrole", "", "system:kube-scheduler"),
    ("clusterrole", "", "system:volume-scheduler"),
    ("role", "kube-system", "extension-apiserver-authentication-reader"),
    ("configmap", "kube-system", "extension-apiserver-authentication"),
    ("namespace", "", NS),
]


def _node(name: str, level: str, score: float, psi_io: float) -> dict[str, Any]:
    return {"name": name, "level": level, "score": score, "signals": {"psiIoSomeAvg10": psi_io}, "reasons": []}


@dataclass
class Bed(RunbookBed):
    """The cluster (MCO's kube-scheduler binary as its ``kube-scheduler``) and the operator's inventory ($INV)."""

    theirs: dict[tuple[str, str, str], str]

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        args = [kind, name, "--ignore-not-found", "-o", "json"] + (["-n", namespace] if namespace else [])
        out = self.kubectl("get", *args)
        return json.loads(out) if out.strip() else None

    def versions(self, objects: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], str]:
        """resourceVersion of each object that exists."""
        return {o: found["metadata"]["resourceVersion"] for o in objects if (found := self.get(*o)) is not None}

    def report(self, nodes: list[dict[str, Any]]) -> None:
        """Write the report's status now, as the analyzer would."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        status = {"lastUpdateTime": stamp, "analyzer": {"identity": "test", "rulesVersion": "1"}, "nodes": nodes}
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump({"apiVersion": "mco.many-core.io/v1alpha1",
                                                              "kind": "NodeInterferenceReport",
                                                              "metadata": {"name": "cluster"}}))  # fmt: skip
        self.kubectl("patch", "nir", "cluster", "--subresource=status", "--type=merge", "-p",
                     json.dumps({"status": status}))  # fmt: skip

    def pod(self, name: str) -> str:
        """A pod that asks for MCO's scheduler."""
        self.kubectl("create", "-f", "-", stdin=yaml.safe_dump({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulerName": "mco-scheduler", "containers": [
                {"name": "c", "image": "registry.invalid/app:1", "resources": {"requests": {"cpu": "10m"}}}]},
        }))  # fmt: skip
        return name

    def node_of(self, pod: str) -> str:
        return str(self.json("get", "pod", pod, "-n", "default")["spec"].get("nodeName", ""))

    def lease_holder(self) -> str:
        lease = self.get("lease", NS, NAME)
        return str((lease or {}).get("spec", {}).get("holderIdentity") or "")

    # -- MCO's kube-scheduler as a process ------------------------------------------------------

    def start_scheduler(self) -> Path:
        """MCO's kube-scheduler with the role's configuration (from its ConfigMap) and a token of the role's
        ServiceAccount; the path of its log."""
        self.stop_scheduler()
        text = self.json("get", "configmap", "-n", NS, NAME)["data"]["config.yaml"]
        config = yaml.safe_load(text)
        kubeconfig = self.cluster.service_account_kubeconfig(NS, NAME, self.workdir / "scheduler.kubeconfig")
        config.setdefault("clientConnection", {})["kubeconfig"] = str(kubeconfig)
        self.cluster.start_kube_scheduler(config)
        return self.cluster.workdir / "kube-scheduler.log"

    def stop_scheduler(self) -> None:
        for process in [p for p in self.cluster.processes if p.name == "kube-scheduler"]:
            process.stop()
            self.cluster.processes.remove(process)

    def metric(self, name: str) -> float | None:
        """A sample without labels of the scheduler's /metrics (its secure port)."""
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        url = f"https://127.0.0.1:{self.cluster.kube_scheduler_port}/metrics"
        with urllib.request.urlopen(url, timeout=10, context=context) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and not sample.labels:
                    return float(sample.value)
        return None

    def ready(self) -> bool:
        """The scheduler's /readyz (its informers synced, the report's included)."""
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        try:
            url = f"https://127.0.0.1:{self.cluster.kube_scheduler_port}/readyz"
            with urllib.request.urlopen(url, timeout=5, context=context) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False


@pytest.fixture(scope="module")
def bed(cluster_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    try:
        built = schedulers()
    except BuildError as exc:
        pytest.fail(f"cannot build MCO's schedulers: {exc}")
    workdir = tmp_path_factory.mktemp("kube-scheduler-role")
    # MCO's kube-scheduler is the one this cluster starts (only when the tests ask: there is none at first)
    cluster = RealCluster(
        workdir / "cluster", {**cluster_binaries, "kube-scheduler": built["binaries"]["kube-scheduler"]}
    )
    cluster.start(nodes=2)
    try:
        for crd in sorted((ROOT / "mco_py" / "data" / "crds").glob("*.yaml")):
            cluster.kubectl("create", "-f", str(crd))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        cluster.apply([{"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": NS, "labels": {"app.kubernetes.io/part-of": "mco"}}}])  # fmt: skip
        inventory = control_inventory(
            workdir / "inventory.json",
            cluster,
            mco_kube_scheduler_enabled=True,
            mco_kube_scheduler_image=IMAGE,
        )
        probe = Bed(cluster, workdir, inventory, {})
        yield Bed(cluster, workdir, inventory, probe.versions(THEIRS))
    finally:
        cluster.stop()


def _commands(bed: Bed, match: str) -> list[str]:
    return bed.commands(SECTION, match)


def _runbook(bed: Bed, what: str) -> str:
    """The runbook's ansible-playbook command that ``what`` picks (check, plain, off)."""
    if what == "off":
        return bed.runbook(SECTION, "setting", setting="mco_kube_scheduler_enabled=false")
    return bed.runbook(SECTION, what)


def _ours(bed: Bed) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {o: found for o in OBJECTS if (found := bed.get(*o)) is not None}


def test_check_mode_then_the_install_idempotently(bed: Bed) -> None:
    check = bed.play(_runbook(bed, "check"))
    assert check["changed"] > 0, "check mode tells what would change"
    assert _ours(bed) == {}, "and makes nothing"
    assert bed.play(_runbook(bed, "plain"))["changed"] > 0
    assert set(_ours(bed)) == set(OBJECTS)
    assert bed.play(_runbook(bed, "plain"))["changed"] == 0, "a second run changes nothing"
    assert bed.play(_runbook(bed, "check"))["changed"] == 0
    assert bed.versions(THEIRS) == bed.theirs, "the cluster's own objects are untouched"


def test_the_rbac_is_exactly_what_a_second_scheduler_needs(bed: Bed) -> None:
    objects = _ours(bed)
    for obj in objects.values():
        assert obj["metadata"]["labels"] == LABELS, obj["metadata"]

    def ref(kind: str, name: str) -> dict[str, str]:
        return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}

    bindings = {
        (kind, ns, name): (obj["roleRef"], obj["subjects"])
        for (kind, ns, name), obj in objects.items()
        if kind.endswith("binding")
    }
    assert bindings == {
        ("clusterrolebinding", "", f"{NAME}-kube-scheduler"): (ref("ClusterRole", "system:kube-scheduler"), SUBJECTS),
        ("clusterrolebinding", "", f"{NAME}-volume-scheduler"): (
            ref("ClusterRole", "system:volume-scheduler"),
            SUBJECTS,
        ),
        ("clusterrolebinding", "", f"{NAME}-plugin"): (ref("ClusterRole", f"{NAME}-plugin"), SUBJECTS),
        ("rolebinding", "kube-system", f"{NAME}-authentication-reader"): (
            ref("Role", "extension-apiserver-authentication-reader"),
            SUBJECTS,
        ),
        ("rolebinding", NS, f"{NAME}-leader-election"): (ref("Role", f"{NAME}-leader-election"), SUBJECTS),
    }
    assert objects[("clusterrole", "", f"{NAME}-plugin")]["rules"] == REPORT_RULES
    # the same rules as the volcano role's ClusterRole for vc-scheduler's mco-plugin
    volcano = yaml.safe_load_all((ROOT / "roles/volcano/templates/plugin-rbac.yaml.j2").read_text().split("---")[0])
    assert next(d for d in volcano if d)["rules"] == REPORT_RULES
    assert objects[("role", NS, f"{NAME}-leader-election")]["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [NAME],
         "verbs": ["get", "update"]},
    ]  # fmt: skip

    def can(verb: str, resource: str, namespace: str = "") -> str:
        """``resource`` as in docs/security.md: ``plural[.group][/name][#subresource]``."""
        resource, _, subresource = resource.partition("#")
        args = ["auth", "can-i", verb, resource, f"--as={SA}"] + (["-n", namespace] if namespace else [])
        return bed.kubectl(*args, *([f"--subresource={subresource}"] if subresource else []), check=False).strip()

    assert can("get", f"leases.coordination.k8s.io/{NAME}", NS) == "yes"
    assert can("update", f"leases.coordination.k8s.io/{NAME}", NS) == "yes"
    assert can("update", "leases.coordination.k8s.io/other", NS) == "no"
    assert can("get", "configmaps/extension-apiserver-authentication", "kube-system") == "yes"
    assert can("create", "pods#binding", "default") == "yes"  # system:kube-scheduler
    assert can("update", "persistentvolumeclaims", "default") == "yes"  # system:volume-scheduler
    for resource in ("nodeinterferencereports.mco.many-core.io", "nodeinterferencereportshards.mco.many-core.io"):
        for verb in ("get", "list", "watch"):
            assert can(verb, resource) == "yes", (verb, resource)
        for verb in ("create", "update", "patch", "delete"):
            assert can(verb, resource) == "no", (verb, resource)
        assert can("patch", resource + "#status") == "no"
    assert can("get", "secrets", NS) == "no"
    # a known limit (docs/roles/mco_kube_scheduler.md): the built-in role's Lease rule has no namespace
    assert can("update", "leases.coordination.k8s.io/kube-scheduler", "kube-system") == "yes"


def test_the_configuration_and_the_deployment(bed: Bed) -> None:
    text = bed.json("get", "configmap", "-n", NS, NAME)["data"]["config.yaml"]
    assert yaml.safe_load(text) == CONFIG
    deployment = bed.json("get", "deployment", "-n", NS, NAME)
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["selector"] == {"matchLabels": {"app.kubernetes.io/name": NAME}}
    template = deployment["spec"]["template"]
    assert template["metadata"]["annotations"] == {
        "mco.many-core.io/config-sha256": hashlib.sha256(text.encode()).hexdigest()
    }
    pod = template["spec"]
    assert pod["serviceAccountName"] == NAME
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["schedulerName"] == "default-scheduler", "the cluster's scheduler places MCO's scheduler"
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    (container,) = pod["containers"]
    assert container["image"] == IMAGE
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert "command" not in container, "the image's entrypoint is /kube-scheduler"
    assert container["args"] == ["--config=/etc/mco-kube-scheduler/config.yaml"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"}}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"] == {"path": path, "port": 10259, "scheme": "HTTPS"}, container[probe]
    assert {m["mountPath"]: m.get("readOnly", False) for m in container["volumeMounts"]} == {
        "/etc/mco-kube-scheduler": True,
        "/tmp": False,
    }
    assert {"name": "config", "configMap": {"name": NAME, "defaultMode": 420}} in pod["volumes"]


def test_doctor_judges_the_roles_configuration(bed: Bed) -> None:
    """`mco doctor --cluster` reads the role's ConfigMap as MCO's kube-scheduler's and accepts it."""
    run = subprocess.run(
        [sys.executable, "-m", "mco_py.cli", "doctor", "--cluster", "-o", "json",
         "--kubeconfig", str(bed.cluster.admin_kubeconfig)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    checks = {c["name"]: c for c in json.loads(run.stdout)["checks"]}
    assert (checks["kube-scheduler"]["verdict"], checks["kube-scheduler"]["detail"]) == (
        "ok",
        f"{NS}/{NAME}: mco-plugin in profile mco-scheduler",
    ), checks["kube-scheduler"]


def test_the_scheduler_runs_with_the_roles_configuration_and_rights(bed: Bed) -> None:
    """The important part: the role's configuration and RBAC, as a scheduler uses them."""
    log = bed.start_scheduler()
    try:
        wait_until(bed.lease_holder, f"the scheduler to lead on its Lease {NS}/{NAME}", timeout=60)
        assert bed.ready()
        bed.report([_node("node-1", "None", 0, 1.0), _node("node-2", "Medium", 55, 35.0)])
        # a first pod, node-2 closed: placed whatever the plugin knows yet (its own informers may still
        # be listing: basic mode, every node passes)...
        bed.kubectl("cordon", "node-2")
        first = bed.pod("ks-first")
        assert wait_until(lambda: bed.node_of(first), f"{first} to be bound") == "node-1"
        # ...after which its gauges say what it reads now: the report, two nodes
        wait_until(lambda: bed.metric("mco_scheduler_plugin_report_nodes") == 2, "mco-plugin to read the report")
        assert bed.metric("mco_extender_basic_mode") == 0
        # node-1 closed, node-2 open but over the io constraint: the pod waits...
        bed.kubectl("uncordon", "node-2")
        bed.kubectl("cordon", "node-1")
        waiting = bed.pod("ks-waiting")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            assert bed.node_of(waiting) == "", "bound to the node over the io constraint"
            time.sleep(0.5)
        events = bed.kubectl("get", "events", "-n", "default", "--field-selector", f"involvedObject.name={waiting}")
        assert "mco: node node-2 psiIoSomeAvg10=35 > threshold 20" in events, events
        # ...until the report clears it (the plugin's requeue event: kube-scheduler's informer on the report)
        bed.report([_node("node-1", "None", 0, 1.0), _node("node-2", "Low", 20, 3.0)])
        assert wait_until(lambda: bed.node_of(waiting), f"{waiting} to be bound") == "node-2"
        # what the runbook's kubectl commands show while it runs
        shown = {}
        for command in _commands(bed, r"^kubectl "):
            proc, _ = bed.run(command)
            assert proc.returncode == 0, (command, proc.stderr)
            shown[command] = proc.stdout
        text = "\n".join(shown.values())
        assert bed.lease_holder() in text
        assert f"deployment.apps/{NAME}" in text
        assert first in text
        assert waiting in text
        output = log.read_text(errors="replace")
        assert "successfully acquired lease mco-system/mco-kube-scheduler" in output
        assert "forbidden" not in output.lower(), [line for line in output.splitlines() if "forbidden" in line.lower()]
    finally:
        bed.stop_scheduler()
        bed.kubectl("uncordon", "node-1", "node-2")
        bed.kubectl("delete", "pods", "--all", "-n", "default", "--grace-period=0", "--force", "--wait=false")


def test_without_the_report_rights_it_never_leads(bed: Bed) -> None:
    """kube-scheduler lists the report (mco-plugin's requeue event) before it leads or schedules:
    the role's report rights are not optional for it. A run of the role gives them back."""
    bed.kubectl("delete", "clusterrolebinding", f"{NAME}-plugin")
    bed.kubectl("delete", "lease", "-n", NS, NAME, "--ignore-not-found")
    log = bed.start_scheduler()
    try:
        wait_until(lambda: "forbidden" in log.read_text(errors="replace"), "the scheduler to be refused the report")
        time.sleep(5)
        assert bed.lease_holder() == "", "it must not lead without having listed the report"
        assert not bed.ready()
        refused = [line for line in log.read_text(errors="replace").splitlines() if "forbidden" in line]
        assert all("nodeinterferencereports" in line for line in refused), refused
    finally:
        bed.stop_scheduler()
    assert bed.play(_runbook(bed, "plain"))["changed"] > 0
    assert set(_ours(bed)) == set(OBJECTS)


def test_switched_off_it_removes_exactly_what_it_made(bed: Bed) -> None:
    bed.start_scheduler()  # its Lease, as a running scheduler leaves it
    wait_until(bed.lease_holder, "the scheduler to lead")
    bed.stop_scheduler()
    assert bed.get("lease", NS, NAME) is not None
    assert bed.play(_runbook(bed, "off"))["changed"] > 0
    assert _ours(bed) == {}
    assert bed.get("lease", NS, NAME) is None
    assert bed.versions(THEIRS) == bed.theirs, "the cluster's own objects, and the namespace, stay as they were"
    assert bed.get("crd", "", "nodeinterferencereports.mco.many-core.io") is not None
    assert bed.play(_runbook(bed, "off"))["changed"] == 0


def test_the_uninstall_playbook_removes_it_too(bed: Bed) -> None:
    assert bed.play(_runbook(bed, "plain"))["changed"] > 0
    assert bed.play(bed.playbook(UNINSTALL))["changed"] > 0
    assert _ours(bed) == {}
    assert bed.versions(THEIRS) == bed.theirs
    assert bed.play(bed.playbook(UNINSTALL))["changed"] == 0


def test_a_deployment_of_its_name_that_mco_did_not_make_is_left_alone(bed: Bed) -> None:
    foreign = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "theirs"}},
            "template": {"metadata": {"labels": {"app": "theirs"}},
                         "spec": {"containers": [{"name": "c", "image": "registry.invalid/theirs:1"}]}},
        },
    }  # fmt: skip
    bed.cluster.apply([foreign])
    try:
        before = bed.versions([("deployment", NS, NAME)])
        proc, document = bed.run(_runbook(bed, "plain"))
        assert proc.returncode != 0
        message = " ".join(" ".join(item_messages(document)).split())
        assert f"Deployment {NS}/{NAME} exists without the label app.kubernetes.io/managed-by=mco-ansible" in message
        assert [o for o in _ours(bed) if o[0] != "deployment"] == [], "nothing was made"
        bed.play(_runbook(bed, "off"))
        assert bed.versions([("deployment", NS, NAME)]) == before, "nor removed"
    finally:
        bed.kubectl("delete", "deployment", "-n", NS, NAME)
