"""The volcano role in plugin mode on the real kube-apiserver: an existing Volcano v1.14.1 gets MCO's
``mco-plugin`` entry, MCO's vc-scheduler image and the plugin's RBAC, and gives them all back.

One cluster for the module, in order: the runbook's commands (docs/runbooks.md, "Volcano: mco-plugin
or the extender") switch an existing Volcano to the plugin (check mode first, then twice, the second
run changing nothing), the RBAC is exactly what the plugin needs, the rollback to the extender and
back, a Volcano that is not v1.14 refused, the uninstall, and last the role installing Volcano v1.14.1
from its installer manifest straight onto MCO's scheduler image.

The existing Volcano is what its installer leaves for the role to find (tests.cluster.build copies the
v1.14.1 installer manifest): the scheduler's ServiceAccount, ClusterRole and binding, its ConfigMap,
and its Deployment with the image tag of the release and no replicas (there is no kubelet).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.build import volcano_crds, volcano_installer
from tests.cluster.cluster import RealCluster
from tests.cluster_tests.conftest import RunbookBed, control_inventory, failure_messages

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SECTION = "Volcano: mco-plugin or the extender"
UNINSTALL = Path(__file__).parent / "playbooks" / "volcano_uninstall.yml"
NS = "volcano-system"
SA = f"system:serviceaccount:{NS}:volcano-scheduler"
#: MCO's vc-scheduler as an operator names the copy in their registry (no node pulls it here).
IMAGE = "registry.example/mco/vc-scheduler:v1.14.1-mco0.1.0"
VOLCANO_IMAGE = "volcanosh/vc-scheduler:v1.14.1"
REPLACED, OURS, POLICY = (
    "mco.many-core.io/replaced-image",
    "mco.many-core.io/plugin-image",
    "mco.many-core.io/replaced-image-pull-policy",
)
PLUGIN_RULES = [
    {
        "apiGroups": ["mco.many-core.io"],
        "resources": ["nodeinterferencereports", "nodeinterferencereportshards"],
        "verbs": ["get", "list", "watch"],
    }
]
#: The entry the role writes with the extender's default settings (roles/mco_scheduler_extender).
PLUGIN_LINES = (
    "  - name: mco-plugin\n"
    "    arguments:\n"
    "      crName: cluster\n"
    "      crStatusTTLSeconds: 30\n"
    "      fallbackWhenCROutdated: true\n"
    "      hardConstraints: {psiMemoryFullAvg10: 0.0, psiIoSomeAvg10Threshold: 20.0}\n"
    "      kataRuntimeClassPrefixes: [kata]\n"
    "      scoreWeight: 1.0\n"
)
EXTENDER_LINES = (
    "  - name: extender\n"
    "    arguments:\n"
    "      extender.urlPrefix: http://mco-scheduler-extender.mco-system.svc:9879/volcano/{segment}\n"
    "      extender.httpTimeout: 1s\n"
    "      extender.predicateVerb: predicate\n"
    "      extender.prioritizeVerb: prioritize\n"
    "      extender.ignorable: true\n"
)


@dataclass
class Bed(RunbookBed):
    """The cluster, the existing Volcano's objects as they were, and the operator's inventory ($INV)."""

    installer: Path
    conf: str
    deployment: dict[str, Any]

    # -- what the cluster holds ------------------------------------------------------------------

    def conf_now(self) -> str:
        return str(
            self.json("get", "configmap", "-n", NS, "volcano-scheduler-configmap")["data"]["volcano-scheduler.conf"]
        )

    def scheduler(self) -> dict[str, Any]:
        return dict(self.json("get", "deployment", "-n", NS, "volcano-scheduler"))

    def plugin_rbac(self) -> list[dict[str, Any]]:
        out = self.kubectl(
            "get", "clusterrole,clusterrolebinding", "mco-scheduler-plugin", "--ignore-not-found", "-o", "json"
        )
        return list(json.loads(out)["items"]) if out.strip() else []

    def versions(self) -> tuple[str, str]:
        return (
            self.json("get", "configmap", "-n", NS, "volcano-scheduler-configmap")["metadata"]["resourceVersion"],
            self.scheduler()["metadata"]["resourceVersion"],
        )


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


@pytest.fixture(scope="module")
def bed(cluster_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    workdir = tmp_path_factory.mktemp("volcano-plugin")
    cluster = RealCluster(workdir / "cluster", cluster_binaries, crds=volcano_crds(cluster_binaries))
    cluster.start(nodes=1, volcano=True)
    try:
        installer = volcano_installer(cluster_binaries)
        docs = _docs(installer)
        conf = _named(docs, "ConfigMap", "volcano-scheduler-configmap")["data"]["volcano-scheduler.conf"]
        deployment = copy.deepcopy(_named(docs, "Deployment", "volcano-scheduler"))
        deployment["spec"]["replicas"] = 0  # no kubelet: nothing would run it
        deployment["spec"]["template"]["spec"]["containers"][0]["image"] = VOLCANO_IMAGE
        cluster.apply(
            [
                _named(docs, "ServiceAccount", "volcano-scheduler"),
                _named(docs, "ClusterRole", "volcano-scheduler"),
                _named(docs, "ClusterRoleBinding", "volcano-scheduler-role"),
                _named(docs, "ConfigMap", "volcano-scheduler-configmap"),
                deployment,
            ]
        )
        for crd in sorted((ROOT / "mco_py" / "data" / "crds").glob("*.yaml")):
            cluster.kubectl("create", "-f", str(crd))
        inventory = control_inventory(
            workdir / "inventory.json",
            cluster,
            mco_volcano_enabled=False,  # Volcano is there: never installed or upgraded
            mco_manage_scheduler_config=True,
            volcano_plugin_image=IMAGE,
        )
        existing = json.loads(cluster.kubectl("get", "deployment", "-n", NS, "volcano-scheduler", "-o", "json"))
        yield Bed(cluster, workdir, inventory, installer, conf, existing)
    finally:
        cluster.stop()


def _commands(bed: Bed, match: str) -> list[str]:
    return bed.commands(SECTION, match)


def _runbook(bed: Bed, what: str) -> str:
    """The runbook's ansible-playbook command that ``what`` picks (check, plain, extender)."""
    if what == "extender":
        return bed.runbook(SECTION, "setting", setting="mco_scheduler_integration=extender")
    return bed.runbook(SECTION, what)


def _spec(deployment: dict[str, Any]) -> dict[str, Any]:
    """The Deployment's spec without the role's rollout-restart stamp (a restart after an edit of the conf)."""
    spec = copy.deepcopy(deployment["spec"])
    template = spec["template"]["metadata"]
    template.get("annotations", {}).pop("kubectl.kubernetes.io/restartedAt", None)
    if not template.get("annotations", True):
        del template["annotations"]
    return spec


def _without_ours(deployment: dict[str, Any]) -> dict[str, Any]:
    """The Deployment's spec and metadata labels/annotations with MCO's image and annotations taken out."""
    spec = _spec(deployment)
    for container in spec["template"]["spec"]["containers"]:
        container.pop("image")
    annotations = {
        k: v for k, v in (deployment["metadata"].get("annotations") or {}).items() if k not in (REPLACED, OURS, POLICY)
    }
    return {"spec": spec, "labels": deployment["metadata"].get("labels"), "annotations": annotations}


def _assert_plugin_mode(bed: Bed) -> None:
    conf = bed.conf_now()
    assert PLUGIN_LINES in conf, conf
    assert conf.replace(PLUGIN_LINES, "", 1) == bed.conf, "every other byte of the conf is kept"
    assert "name: extender" not in conf
    deployment = bed.scheduler()
    assert [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]] == [IMAGE]
    assert {k: v for k, v in deployment["metadata"]["annotations"].items() if k.startswith("mco.many-core.io/")} == {
        REPLACED: VOLCANO_IMAGE,
        OURS: IMAGE,
    }
    assert _without_ours(deployment) == _without_ours(bed.deployment), "only the image changed"
    role, binding = sorted(bed.plugin_rbac(), key=lambda o: str(o["kind"]))
    assert role["kind"] == "ClusterRole"
    assert role["rules"] == PLUGIN_RULES
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "mco-scheduler-plugin",
    }
    # the ServiceAccount the Deployment runs as (the installer names it in spec.template.spec.serviceAccount)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "volcano-scheduler", "namespace": NS}]


def test_check_mode_then_the_plugin_on_an_existing_volcano_idempotently(bed: Bed) -> None:
    before = bed.versions()
    check = bed.play(_runbook(bed, "check"))
    assert check["changed"] > 0, "check mode tells what would change"
    assert bed.versions() == before, "and changes nothing"
    assert bed.plugin_rbac() == []
    first = bed.play(_runbook(bed, "plain"))
    assert first["changed"] > 0
    _assert_plugin_mode(bed)
    # the new image rolled the scheduler: no extra restart annotation in the pod template
    assert "kubectl.kubernetes.io/restartedAt" not in (
        bed.scheduler()["spec"]["template"]["metadata"].get("annotations") or {}
    )
    assert bed.play(_runbook(bed, "plain"))["changed"] == 0, "a second run changes nothing"
    assert bed.play(_runbook(bed, "check"))["changed"] == 0


def test_the_docs_kubectl_commands_show_the_plugin(bed: Bed) -> None:
    outputs = {}
    for command in _commands(bed, r"^kubectl "):
        proc, _ = bed.run(command)
        assert proc.returncode == 0, (command, proc.stderr)
        outputs[command] = proc.stdout
    shown = "\n".join(outputs.values())
    assert IMAGE in shown
    assert VOLCANO_IMAGE in shown  # the image it replaced, from the annotation
    assert "clusterrole.rbac.authorization.k8s.io/mco-scheduler-plugin" in shown
    assert "name: mco-plugin" in shown


def test_the_plugins_rbac_is_all_the_scheduler_needs_beyond_volcanos_own(bed: Bed) -> None:
    """The scheduler's own token: Volcano's ClusterRole (installer) plus the role's reads the report, no more."""
    kubeconfig = bed.cluster.service_account_kubeconfig(NS, "volcano-scheduler", bed.workdir / "scheduler.kubeconfig")

    def can(verb: str, resource: str, **kw: str) -> str:
        args = ["auth", "can-i", verb, resource]
        if "as_" in kw:
            return bed.kubectl(*args, f"--as={kw['as_']}", check=False).strip()
        return bed.cluster.kubectl(*args, kubeconfig=kubeconfig, check=False).strip()

    for resource in ("nodeinterferencereports.mco.many-core.io", "nodeinterferencereportshards.mco.many-core.io"):
        for verb in ("get", "list", "watch"):
            assert can(verb, resource) == "yes", (verb, resource)
        for verb in ("create", "update", "patch", "delete"):
            assert can(verb, resource) == "no", (verb, resource)
        assert can("patch", resource + "/status") == "no"
    assert can("list", "nodeinterferencereportshards.mco.many-core.io", as_=SA) == "yes"
    assert can("create", "nodeinterferencereportshards.mco.many-core.io", as_=SA) == "no"
    assert can("get", "nodes", as_=SA) == "yes"  # Volcano's own ClusterRole
    # the token reads what the plugin's informer lists
    assert bed.cluster.kubectl("get", "nir,nirs", kubeconfig=kubeconfig).strip() == ""
    # the plugin's ClusterRole alone grants the report and nothing else (no nodes of its own)
    bed.kubectl("-n", NS, "create", "serviceaccount", "plugin-only")
    bed.kubectl("create", "clusterrolebinding", "plugin-only", "--clusterrole=mco-scheduler-plugin",
                f"--serviceaccount={NS}:plugin-only")  # fmt: skip
    try:
        only = f"system:serviceaccount:{NS}:plugin-only"
        assert can("watch", "nodeinterferencereports.mco.many-core.io", as_=only) == "yes"
        for verb, resource in [("get", "nodes"), ("list", "pods"), ("get", "configmaps"), ("create", "pods/binding")]:
            assert can(verb, resource, as_=only) == "no", (verb, resource)
    finally:
        bed.kubectl("delete", "clusterrolebinding", "plugin-only")
        bed.kubectl("-n", NS, "delete", "serviceaccount", "plugin-only")


def test_the_rollback_to_the_extender_and_back(bed: Bed) -> None:
    plugin_conf, plugin_annotations = bed.conf_now(), bed.scheduler()["metadata"]["annotations"]
    assert bed.play(_runbook(bed, "extender"))["changed"] > 0
    conf = bed.conf_now()
    assert conf.replace(EXTENDER_LINES.format(segment="v1.10"), "", 1) == bed.conf, conf
    deployment = bed.scheduler()
    assert _spec(deployment) == _spec(bed.deployment), "Volcano's own image back, nothing else changed"
    assert not {k for k in deployment["metadata"].get("annotations") or {} if k.startswith("mco.many-core.io/")}
    assert bed.plugin_rbac() == []
    shown = [bed.run(c)[0].stdout for c in _commands(bed, r"^kubectl ")]
    assert any(VOLCANO_IMAGE in out for out in shown)
    assert not any(IMAGE in out or "mco-scheduler-plugin" in out for out in shown)
    assert bed.play(_runbook(bed, "extender"))["changed"] == 0
    # and back: the same text and annotations as the first time
    assert bed.play(_runbook(bed, "plain"))["changed"] > 0
    assert bed.conf_now() == plugin_conf
    assert bed.scheduler()["metadata"]["annotations"] == plugin_annotations
    _assert_plugin_mode(bed)


def test_a_volcano_that_is_not_v1_14_is_refused_and_auto_picks_the_extender(bed: Bed) -> None:
    """Someone put a v1.9.0 scheduler in (MCO's annotations now stale): the plugin cannot run there."""
    bed.kubectl(
        "-n", NS, "set", "image", "deployment/volcano-scheduler", "volcano-scheduler=volcanosh/vc-scheduler:v1.9.0"
    )
    try:
        before = bed.versions()
        proc, document = bed.run(
            bed.playbook(ROOT / "playbooks" / "volcano.yml", {"mco_scheduler_integration": "plugin"})
        )
        assert proc.returncode != 0
        message = " ".join(" ".join(failure_messages(document)).split())
        assert "needs Volcano v1.14.x" in message, message
        assert "Volcano v1.9.0 runs (scheduler image volcanosh/vc-scheduler:v1.9.0)" in message, message
        assert "Use mco_scheduler_integration: extender" in message, message
        assert bed.versions() == before, "nothing changed"
        # auto: the extender, in the v1.9 reply format; the v1.9.0 image stays, the stale annotations go
        assert bed.play(bed.playbook(ROOT / "playbooks" / "volcano.yml"))["changed"] > 0
        assert bed.conf_now().replace(EXTENDER_LINES.format(segment="v1.9"), "", 1) == bed.conf
        deployment = bed.scheduler()
        assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "volcanosh/vc-scheduler:v1.9.0"
        assert not {k for k in deployment["metadata"].get("annotations") or {} if k.startswith("mco.many-core.io/")}
        assert bed.plugin_rbac() == []
    finally:
        bed.kubectl("-n", NS, "set", "image", "deployment/volcano-scheduler", f"volcano-scheduler={VOLCANO_IMAGE}")
    assert bed.play(_runbook(bed, "plain"))["changed"] > 0
    _assert_plugin_mode(bed)


def test_uninstall_gives_volcano_back_byte_for_byte(bed: Bed) -> None:
    assert bed.play(bed.playbook(UNINSTALL))["changed"] > 0
    assert bed.conf_now() == bed.conf
    deployment = bed.scheduler()
    assert _spec(deployment) == _spec(bed.deployment)
    assert (deployment["metadata"].get("annotations") or {}) == (bed.deployment["metadata"].get("annotations") or {})
    assert bed.plugin_rbac() == []
    assert bed.play(bed.playbook(UNINSTALL))["changed"] == 0


def test_an_install_over_a_volcano_of_another_release_is_refused(bed: Bed) -> None:
    """mco_volcano_enabled where Volcano v1.12.4 runs: stopped before anything is applied, unless
    volcano_overwrite_running_version says so (shown in check mode, which changes nothing)."""
    extra = {"mco_volcano_enabled": True, "volcano_manifest_src": str(bed.installer), "volcano_wait": False}
    bed.kubectl(
        "-n", NS, "set", "image", "deployment/volcano-scheduler", "volcano-scheduler=volcanosh/vc-scheduler:v1.12.4"
    )
    try:
        before = bed.versions()
        proc, document = bed.run(bed.playbook(ROOT / "playbooks" / "volcano.yml", extra))
        assert proc.returncode != 0
        message = " ".join(" ".join(failure_messages(document)).split())
        assert (
            "Volcano v1.12.4 runs (scheduler image volcanosh/vc-scheduler:v1.12.4 in volcano-system/volcano-scheduler)"
            ", and mco_volcano_enabled (volcano_install) would apply Volcano v1.14.1's manifest"
        ) in message, message
        assert "set volcano_overwrite_running_version: true" in message, message
        assert bed.versions() == before, "nothing applied"
        assert bed.plugin_rbac() == []
        overwrite = {**extra, "volcano_overwrite_running_version": True}
        proc, document = bed.run(bed.playbook(ROOT / "playbooks" / "volcano.yml", overwrite) + " --check")
        assert proc.returncode == 0, "\n".join(failure_messages(document)) or proc.stdout[-6000:]
        assert bed.versions() == before
    finally:
        bed.kubectl("-n", NS, "set", "image", "deployment/volcano-scheduler", f"volcano-scheduler={VOLCANO_IMAGE}")


def test_the_role_installs_volcano_v1_14_1_running_mcos_scheduler(bed: Bed) -> None:
    """Last: the installer's webhooks stay in this cluster. Its scheduler Deployment is applied with MCO's
    image already, so a re-run never puts Volcano's back in between; the uninstall restores the installer's."""
    extra = {"mco_volcano_enabled": True, "volcano_manifest_src": str(bed.installer), "volcano_wait": False}
    assert bed.play(bed.playbook(ROOT / "playbooks" / "volcano.yml", extra))["changed"] > 0
    deployment = bed.scheduler()
    upstream = _named(_docs(bed.installer), "Deployment", "volcano-scheduler")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == IMAGE
    assert container["args"] == upstream["spec"]["template"]["spec"]["containers"][0]["args"]
    assert deployment["metadata"]["annotations"][REPLACED] == "docker.io/volcanosh/vc-scheduler:v1.14.0"
    assert PLUGIN_LINES in bed.conf_now()
    assert bed.play(bed.playbook(ROOT / "playbooks" / "volcano.yml", extra))["changed"] == 0
    assert bed.play(bed.playbook(UNINSTALL))["changed"] > 0
    assert (
        bed.scheduler()["spec"]["template"]["spec"]["containers"][0]["image"]
        == "docker.io/volcanosh/vc-scheduler:v1.14.0"
    )
