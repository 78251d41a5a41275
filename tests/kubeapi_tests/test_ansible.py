"""kubernetes.core.k8s from a real ansible-playbook run against the emulated API.

Applies the real Volcano installers (v1.9.0 and v1.12.4, one server each), the
kata-deploy RBAC, DaemonSet and RuntimeClasses and the MCO CRD, reads the
objects back with the kubernetes client, and checks a second run changes nothing.

Emulator only: it counts the servers' requests and resource versions (``requests``, ``store``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, dynamic

from tests.kubeapi import EmulatedAPI, start
from tests.kubeapi_tests.conftest import CRD_PATH, ROOT

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures"
VOLCANO = {v: FIXTURES / "volcano" / v / "volcano-development.yaml" for v in ("v1.9.0", "v1.12.4")}
KATA = FIXTURES / "kata-deploy" / "3.20.0"
KATA_FILES = [
    KATA / "kata-rbac" / "base" / "kata-rbac.yaml",
    KATA / "kata-deploy" / "base" / "kata-deploy.yaml",
    KATA / "runtimeclasses" / "kata-runtimeClasses.yaml",
]
PLAYBOOK = Path(__file__).parent / "playbooks" / "apply_manifests.yml"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),  # above the playbook's own 240 s limit, which reports its output
    pytest.mark.skipif(
        not all(p.exists() for p in [*VOLCANO.values(), *KATA_FILES]), reason="fixtures under ../shared missing"
    ),
    pytest.mark.skipif(
        not (ROOT / "collections" / "ansible_collections" / "kubernetes" / "core").is_dir(),
        reason="kubernetes.core not installed in ./collections: run `make setup`",
    ),
]


# A custom resource of the CRD applied just before it: kubernetes.core must rediscover, and on the
# second run fall back from strategic merge (415 for custom resources) to merge patch.
REPORT = """---
apiVersion: mco.many-core.io/v1alpha1
kind: NodeInterferenceReport
metadata:
  name: cluster
spec:
  description: applied by kubernetes.core.k8s
"""


def _bundle(path: Path, files: list[Path], extra: str = "") -> Path:
    """One multi-document file per server: one module run each keeps the test fast."""
    path.write_text("".join(f"---\n{f.read_text()}\n" for f in files) + extra)
    return path


def _playbook(servers: dict[str, dict[str, str]], tmp: Path) -> dict[str, dict[str, Any]]:
    """Run the playbook with one local host per server; return each host's task result."""
    inventory = tmp / "inventory.json"
    hosts = {
        name: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, **host_vars}
        for name, host_vars in servers.items()
    }
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "TMPDIR": str(tmp),  # kubernetes.core keeps a discovery cache there, keyed by server URL
    }
    ansible = Path(sys.executable).parent / "ansible-playbook"
    run = subprocess.run(
        [str(ansible), "-i", str(inventory), str(PLAYBOOK)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    results: dict[str, dict[str, Any]] = json.loads(run.stdout)["plays"][0]["tasks"][0]["hosts"]
    return results


@pytest.fixture
def servers() -> Any:
    a, b = start(), start()
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def _dyn(api: EmulatedAPI, tmp: Path, name: str) -> dynamic.DynamicClient:
    kubeconfig = api.write_kubeconfig(tmp / f"{name}.kubeconfig")
    return dynamic.DynamicClient(config.new_client_from_config(str(kubeconfig)), cache_file=str(tmp / f"{name}.json"))


def test_playbook_applies_volcano_kata_and_mco_crd_idempotently(
    servers: tuple[EmulatedAPI, EmulatedAPI], tmp_path: Path
) -> None:
    old, new = servers
    work = tmp_path / "work"
    work.mkdir()
    hosts = {
        "old": {
            "kubeapi_kubeconfig": str(old.write_kubeconfig(tmp_path / "old")),
            "kubeapi_src": str(_bundle(tmp_path / "old.yaml", [VOLCANO["v1.9.0"], *KATA_FILES, CRD_PATH], REPORT)),
        },
        "new": {
            "kubeapi_kubeconfig": str(new.write_kubeconfig(tmp_path / "new")),
            "kubeapi_src": str(_bundle(tmp_path / "new.yaml", [VOLCANO["v1.12.4"]])),
        },
    }
    first = _playbook(hosts, work)
    assert {h: r["changed"] for h, r in first.items()} == {"old": True, "new": True}
    writes_after_first = [sum(1 for r in s.requests if r.method != "GET") for s in servers]

    second = _playbook(hosts, work)
    assert {h: r["changed"] for h, r in second.items()} == {"old": False, "new": False}, second
    # The second run patched with identical content: no object got a new resourceVersion.
    assert [s.store.rv for s in servers] == [old.store.rv, new.store.rv]
    assert writes_after_first[0] < sum(1 for r in old.requests if r.method != "GET")

    for api, version in ((old, "v1.9.0"), (new, "v1.12.4")):
        dyn = _dyn(api, tmp_path, version)
        scheduler_cm = dyn.resources.get(api_version="v1", kind="ConfigMap").get(
            name="volcano-scheduler-configmap", namespace="volcano-system"
        )
        assert "actions:" in scheduler_cm.data["volcano-scheduler.conf"]
        deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment").get(namespace="volcano-system")
        assert {d.metadata.name for d in deployments.items} >= {"volcano-scheduler", "volcano-controllers"}
        crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition").get()
        established = {c.metadata.name for c in crds.items if any(x.type == "Established" for x in c.status.conditions)}
        assert {
            "jobs.batch.volcano.sh",
            "podgroups.scheduling.volcano.sh",
            "queues.scheduling.volcano.sh",
        } <= established
        # CRD-defined kinds are served: a Queue can be created and read back.
        queues = dyn.resources.get(api_version="scheduling.volcano.sh/v1beta1", kind="Queue")
        queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q1"}}
        queues.create(body={**queue, "spec": {"weight": 1}})
        assert queues.get(name="q1").spec.weight == 1
        webhooks = dyn.resources.get(
            api_version="admissionregistration.k8s.io/v1", kind="ValidatingWebhookConfiguration"
        )
        assert webhooks.get().items
        roles = dyn.resources.get(api_version="rbac.authorization.k8s.io/v1", kind="ClusterRole")
        assert roles.get(name="volcano-scheduler").rules

    dyn = _dyn(old, tmp_path, "kata")
    runtime_classes = dyn.resources.get(api_version="node.k8s.io/v1", kind="RuntimeClass")
    assert runtime_classes.get(name="kata-qemu").handler == "kata-qemu"
    daemonset = dyn.resources.get(api_version="apps/v1", kind="DaemonSet").get(
        name="kata-deploy", namespace="kube-system"
    )
    assert daemonset.spec.template.spec.serviceAccountName == "kata-deploy-sa"
    reports = dyn.resources.get(api_version="mco.many-core.io/v1alpha1", kind="NodeInterferenceReport")
    assert reports.get(name="cluster").spec.description == "applied by kubernetes.core.k8s"
    patches = [r for r in old.requests if r.method == "PATCH" and r.path.endswith("/nodeinterferencereports/cluster")]
    assert [r.code for r in patches] == [415, 200]  # second run: strategic merge refused, merge patch no-op
    core = client.CoreV1Api(dyn.client)
    assert core.read_namespaced_service_account("kata-deploy-sa", "kube-system").metadata.uid
