"""Fixtures of the `cluster` tier: the real control plane (tests/cluster), MCO's objects applied by
the roles, and MCO's analyzer and extender as processes with their own ServiceAccount tokens."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
import yaml

from mco_py.model import Sample
from mco_py.rpc.analyzer.v1 import analyzer_pb2_grpc as pb_grpc
from tests import waiting
from tests.cluster.build import BuildError, binaries, volcano_crds
from tests.cluster.cluster import RealCluster, extender_config, free_port, volcano_conf
from tests.docs.doc_commands import select
from tests.rpc import wire
from tests.rules_fixtures import quick_rules_text

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT.parent / "shared" / "fixtures"
KATA = FIXTURES / "kata-deploy" / "3.20.0"
NS = "mco-system"
#: The extender's report TTL in these tests (seconds): fallback shows within a few seconds.
TTL = 4.0

pytestmark = pytest.mark.cluster
T = TypeVar("T")


def wait_until(cond: Callable[[], T], what: str, timeout: float = 60.0, every: float = 0.25) -> T:
    """:func:`tests.waiting.wait_until` at the cluster's pace (each ask may be an API call)."""
    return waiting.wait_until(cond, what, timeout, every)


@pytest.fixture(scope="session")
def cluster_binaries() -> dict[str, Path]:
    """The real binaries (built on first use, then cached outside the clone)."""
    try:
        return binaries()
    except BuildError as exc:
        pytest.fail(f"cannot build the control plane: {exc}")


@dataclass
class ServiceProcess:
    """An `mco` service started as a user would, its JSON log lines collected."""

    name: str
    proc: subprocess.Popen[str]
    log: Path

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for raw in self.log.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(raw))
            except ValueError:
                out.append({"message": raw})
        return out

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def start_service(workdir: Path, name: str, *args: str) -> ServiceProcess:
    log = workdir / f"{name}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mco_py.cli", *args],
            stdout=subprocess.DEVNULL,
            stderr=out,
            text=True,
            cwd=ROOT,
        )
    return ServiceProcess(name, proc, log)


@dataclass
class Env:
    """One real cluster with MCO installed on it, shared by a test module."""

    cluster: RealCluster
    workdir: Path
    extender_port: int
    kubeconfigs: dict[str, Path] = field(default_factory=dict)
    analyzer: ServiceProcess | None = None
    extender: ServiceProcess | None = None
    grpc_port: int = 0
    sequence: int = 0

    @property
    def extender_url(self) -> str:
        return f"http://127.0.0.1:{self.extender_port}"

    def kubectl(self, *args: str, **kw: Any) -> str:
        return self.cluster.kubectl(*args, **kw)

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json"))

    # -- MCO services -------------------------------------------------------------------------

    def kubeconfig(self, sa: str) -> Path:
        """The kubeconfig the roles install for ServiceAccount ``mco-system/<sa>``: made by their
        ``mco_sa_kubeconfig`` module from the admin kubeconfig (the roles create the accounts)."""
        if sa not in self.kubeconfigs:
            params = {"kubeconfig": str(self.cluster.admin_kubeconfig), "namespace": NS, "service_account": sa,
                      "dest_dir": str(self.workdir / "credentials"), "expiration_seconds": 3600}  # fmt: skip
            proc = subprocess.run(
                [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local",
                 "-e", f"ansible_python_interpreter={sys.executable}", "-M", str(ROOT / "plugins/modules"),
                 "-m", "mco_sa_kubeconfig", "-a", json.dumps(params)],
                cwd=ROOT, env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
                               "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"},
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
            assert not result.get("failed"), result
            self.kubeconfigs[sa] = Path(result["path"])
        return self.kubeconfigs[sa]

    def start_analyzer(self) -> ServiceProcess:
        if self.analyzer is not None and self.analyzer.running():
            return self.analyzer
        settings = self.workdir / "analyzer.yaml"
        settings.write_text("{}\n")  # not the host's /etc/mco/analyzer.yaml: everything from the flags
        self.analyzer = start_service(
            self.workdir,
            "analyzer",
            "analyzer",
            f"--config={settings}",
            "--mode=cluster",
            f"--kubeconfig={self.kubeconfig('mco-analyzer')}",
            "--identity=analyzer-test",
            "--listen=127.0.0.1:0",
            "--metrics-host=127.0.0.1",
            "--metrics-port=0",
            "--report-interval=0.5",
            "--report-min-interval=0.1",
            "--rules-interval=0.5",
            "--lease-duration=3",
        )
        started = wait_until(
            lambda: (
                next((line for line in self.analyzer.lines() if "grpc_port" in line), None)  # type: ignore[union-attr]
                or (not self.analyzer.running() and pytest.fail(f"analyzer exited: {self.analyzer.lines()[-10:]}"))
            ),  # type: ignore[union-attr]
            "the analyzer to listen",
        )
        self.grpc_port = int(started["grpc_port"])
        return self.analyzer

    def start_extender(self, *, volcano_version: str = "1.10") -> ServiceProcess:
        if self.extender is not None and self.extender.running():
            return self.extender
        config = self.workdir / "extender.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "mode": "cluster",
                    "kubeconfig": str(self.kubeconfig("mco-scheduler-extender")),
                    "listen": f"127.0.0.1:{self.extender_port}",
                    "crStatusTTLSeconds": TTL,
                    "volcanoVersion": volcano_version,
                }
            )
        )
        self.extender = start_service(self.workdir, "extender", "extender", f"--config={config}")
        wait_until(self._ready, "the extender to answer /readyz")
        return self.extender

    def _ready(self) -> bool:
        assert self.extender is not None
        if not self.extender.running():
            pytest.fail(f"extender exited: {self.extender.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{self.extender_url}/readyz", timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def send(self, node: str, **values: float) -> None:
        """One sample for ``node`` to the analyzer, as a collector streams it."""
        self.sequence += 1
        sample = Sample(node, time.time(), dict(values))
        with grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}") as channel:
            replies = list(
                pb_grpc.AnalyzerStub(channel).StreamSamples(
                    iter([wire.batch_to_proto([sample], collector=node, sequence=self.sequence)]), timeout=30
                )
            )
        acks = [r.ack for r in replies if r.WhichOneof("kind") == "ack"]
        assert acks, replies
        assert acks[0].accepted == 1, replies

    def report_nodes(self) -> dict[str, dict[str, Any]]:
        out = self.kubectl("get", "nir", "cluster", "-o", "json", check=False)
        if not out:
            return {}
        return {n["name"]: n for n in json.loads(out).get("status", {}).get("nodes", [])}

    # -- pods -----------------------------------------------------------------------------------

    def create_pods(
        self,
        prefix: str,
        count: int,
        *,
        scheduler: str = "volcano",
        runtime_class: str | None = None,
        annotations: dict[str, str] | None = None,
    ) -> list[str]:
        names = [f"{prefix}-{i}" for i in range(count)]
        docs = []
        for name in names:
            spec: dict[str, Any] = {
                "schedulerName": scheduler,
                "containers": [
                    {"name": "c", "image": "registry.invalid/app:1", "resources": {"requests": {"cpu": "10m"}}}
                ],
            }
            if runtime_class:
                spec["runtimeClassName"] = runtime_class
            meta: dict[str, Any] = {"name": name, "namespace": "default"}
            if annotations:
                meta["annotations"] = annotations
            docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
        self.kubectl("create", "-f", "-", stdin=yaml.safe_dump_all(docs))
        return names

    def placements(self, names: list[str], timeout: float = 60.0) -> dict[str, str]:
        """Where each pod was bound (waits until every one is)."""

        def bound() -> dict[str, str] | None:
            pods = {p["metadata"]["name"]: p for p in self.json("get", "pods", "-n", "default")["items"]}
            got = {n: pods[n]["spec"].get("nodeName", "") for n in names if n in pods}
            return got if len(got) == len(names) and all(got.values()) else None

        result: dict[str, str] = wait_until(bound, f"pods {names} to be bound", timeout)
        return result

    def delete_pods(self) -> None:
        self.kubectl("delete", "pods", "--all", "-n", "default", "--grace-period=0", "--force", "--wait=false")
        wait_until(lambda: not self.json("get", "pods", "-n", "default")["items"], "pods to go")


def run_playbook(env: Env, extra: dict[str, Any], playbook: Path | None = None) -> dict[str, Any]:
    """ansible-playbook tests/cluster_tests/playbooks/k8s_objects.yml (or ``playbook``, with the same
    inventory); returns the play recap of localhost."""
    run, document = run_playbook_raw(env, extra, playbook)
    assert run.returncode == 0, "\n".join(failure_messages(document)) or run.stdout[-6000:] + run.stderr[-3000:]
    stats: dict[str, Any] = document["stats"]["localhost"]
    return stats


def run_playbook_raw(
    env: Env, extra: dict[str, Any], playbook: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """The same run, whatever its outcome: the process and its JSON report."""
    inventory = env.workdir / "inventory.json"
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "mco_mode": "cluster",
        "mco_kubeconfig": str(env.cluster.admin_kubeconfig),
        # kvm_check: this host's /dev/kvm, labelled on Node node-1
        "kvm_check_kubeconfig": str(env.cluster.admin_kubeconfig),
        "kvm_check_label_node": True,
        "kvm_check_node_name": "node-1",
        # kata_runtime: the kata-deploy objects and RuntimeClasses, node-3 labelled
        "kata_runtime_method": "kata-deploy",
        "kata_runtime_kubeconfig": str(env.cluster.admin_kubeconfig),
        "kata_runtime_node_name": "node-3",
        "kata_runtime_require_kvm": False,
        "kata_runtime_deploy_manifests": [
            str(KATA / "kata-rbac" / "base" / "kata-rbac.yaml"),
            str(KATA / "kata-deploy" / "base" / "kata-deploy.yaml"),
        ],
        "kata_runtime_deploy_image": "quay.io/kata-containers/kata-deploy:3.20.0",
        # volcano: an existing Volcano v1.14 (not installed by us; its version is read from the scheduler's
        # image tag); our entry in its ConfigMap
        "volcano_install": False,
        "volcano_kubeconfig": str(env.cluster.admin_kubeconfig),
        "volcano_extender_service": "127.0.0.1",
        "volcano_extender_port": env.extender_port,
        # mco_crds
        "mco_crds_kubeconfig": str(env.cluster.admin_kubeconfig),
        "mco_crds_repo_root": str(ROOT),
        "mco_crds_services_enabled": False,
        "mco_crds_monitoring_labels": {"release": "kube-prometheus-stack"},
        "mco_analyzer_detection_rules": yaml.safe_load(quick_rules_text("cluster-tier")),
        **extra,
    }
    inventory.write_text(json.dumps({"all": {"hosts": {"localhost": host}}}))
    env_vars = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "TMPDIR": str(env.workdir),
    }
    run = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(playbook or PLAYBOOK)],
        cwd=ROOT,
        env=env_vars,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    document: dict[str, Any] = json.loads(run.stdout) if run.stdout.strip().startswith("{") else {}
    return run, document


def _results(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Every host's result of every task in an ansible.posix.json report."""
    return [result for play in document.get("plays", []) for task in play["tasks"] for result in task["hosts"].values()]


def failure_messages(document: dict[str, Any]) -> list[str]:
    """The messages of the failed tasks in an ansible.posix.json report."""
    return [str(result.get("msg", "")) for result in _results(document) if result.get("failed")]


def item_messages(document: dict[str, Any]) -> list[str]:
    """The messages of the failed items of looped tasks in an ansible.posix.json report."""
    return [
        str(item.get("msg", ""))
        for result in _results(document)
        for item in result.get("results", [])
        if isinstance(item, dict) and item.get("failed")
    ]


def control_inventory(path: Path, cluster: RealCluster, **settings: Any) -> Path:
    """An operator's inventory (JSON) with this controller as the one ``mco_control`` host, in cluster mode
    on ``cluster``, with ``settings`` as its variables."""
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "mco_mode": "cluster",
        "mco_kubeconfig": str(cluster.admin_kubeconfig),
        **settings,
    }
    inventory = {"all": {"hosts": {"localhost": host}, "children": {"mco_control": {"hosts": {"localhost": {}}}}}}
    path.write_text(json.dumps(inventory))
    return path


@dataclass
class RunbookBed:
    """A real cluster and the operator's inventory (``$INV``) on which a runbook section's commands run
    as the docs write them (tests of a role against the real control plane subclass it)."""

    cluster: RealCluster
    workdir: Path
    inventory: Path

    def kubectl(self, *args: str, check: bool = True, **kw: Any) -> str:
        return self.cluster.kubectl(*args, check=check, **kw)

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json"))

    def run(self, command: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        """A command as the docs write it (placeholders filled): ansible-playbook with its JSON report,
        or kubectl (the cluster's, with the admin kubeconfig)."""
        argv = shlex.split(command)
        if argv[0] == "kubectl":
            argv[0] = str(self.cluster.bins["kubectl"])
        env = {
            **os.environ,
            "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
            "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
            "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
            "TMPDIR": str(self.workdir),
            "KUBECONFIG": str(self.cluster.admin_kubeconfig),
        }
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
        document: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
        return proc, document

    def play(self, command: str) -> dict[str, Any]:
        """Run an ansible-playbook command that must succeed; the recap of localhost."""
        proc, document = self.run(command)
        assert proc.returncode == 0, "\n".join(failure_messages(document)) or proc.stdout[-6000:] + proc.stderr[-3000:]
        stats: dict[str, Any] = document["stats"]["localhost"]
        return stats

    def playbook(self, playbook: Path, extra: dict[str, Any] | None = None) -> str:
        """An ansible-playbook command line with this inventory."""
        command = f"{Path(sys.executable).parent / 'ansible-playbook'} -i {self.inventory} {playbook}"
        return command + (f" -e {shlex.quote(json.dumps(extra))}" if extra else "")

    def commands(self, section: str, match: str) -> list[str]:
        """docs/runbooks.md's commands of ``section`` that ``match`` finds, ``$INV`` filled."""
        return select(ROOT / "docs" / "runbooks.md", section, match, {"$INV": str(self.inventory)})

    def runbook(self, section: str, what: str, *, setting: str = "") -> str:
        """The section's one ansible-playbook command that ``what`` picks: ``check`` (with --check),
        ``plain`` (neither --check nor -e) or ``setting`` (the one that sets ``setting``)."""
        commands = self.commands(section, r"ansible-playbook")
        chosen = {
            "check": [c for c in commands if "--check" in c],
            "plain": [c for c in commands if "--check" not in c and " -e " not in c],
            "setting": [c for c in commands if setting and setting in c],
        }[what]
        assert len(chosen) == 1, commands
        return chosen[0]


PLAYBOOK = Path(__file__).parent / "playbooks" / "k8s_objects.yml"
UNINSTALL = Path(__file__).parent / "playbooks" / "uninstall_objects.yml"


def existing_volcano(cluster: RealCluster) -> None:
    """What a Volcano install leaves for our role to find: its scheduler ConfigMap and Deployment."""
    conf = cluster.volcano_conf_path.read_text()
    cluster.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                "data": {"volcano-scheduler.conf": conf},
            },
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "volcano-scheduler", "namespace": "volcano-system"},
                "spec": {
                    "replicas": 0,  # the real vc-scheduler runs as a process of this test
                    "selector": {"matchLabels": {"app": "volcano-scheduler"}},
                    "template": {
                        "metadata": {"labels": {"app": "volcano-scheduler"}},
                        "spec": {
                            "containers": [{"name": "volcano-scheduler", "image": "volcanosh/vc-scheduler:v1.14.1"}]
                        },
                    },
                },
            },
        ]
    )


#: The Prometheus Operator kinds mco_crds creates objects of when their CRDs exist.
PROMETHEUS_OPERATOR_KINDS = {"servicemonitors": "ServiceMonitor", "prometheusrules": "PrometheusRule"}


def prometheus_operator_crds(cluster: RealCluster) -> None:
    """The Prometheus Operator's ServiceMonitor and PrometheusRule CRDs (schema-less: only served)."""
    cluster.apply(
        [
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.monitoring.coreos.com"},
                "spec": {
                    "group": "monitoring.coreos.com",
                    "scope": "Namespaced",
                    "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
                    "versions": [
                        {
                            "name": "v1",
                            "served": True,
                            "storage": True,
                            "schema": {
                                "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                            },
                        }
                    ],
                },
            }
            for plural, kind in PROMETHEUS_OPERATOR_KINDS.items()
        ]
    )


def mount_scheduler_configmap(env: Env) -> None:
    """Copy the scheduler ConfigMap into vc-scheduler's configuration file, as the kubelet's volume does."""
    cm = env.json("get", "configmap", "-n", "volcano-system", "volcano-scheduler-configmap")
    env.cluster.set_volcano_conf(cm["data"]["volcano-scheduler.conf"])


@pytest.fixture(scope="module")
def env(cluster_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    workdir = tmp_path_factory.mktemp("real-cluster")
    port = free_port()
    cluster = RealCluster(workdir / "cluster", cluster_binaries, crds=volcano_crds(cluster_binaries))
    cluster.start(
        nodes=3,
        volcano=True,
        kube_scheduler=True,
        scheduler_config=extender_config(f"http://127.0.0.1:{port}"),
        controllers=["namespace"],  # deleting a namespace (uninstall) needs it, as on any cluster
    )
    environment = Env(cluster, workdir, port)
    try:
        yield environment
    finally:
        for service in (environment.analyzer, environment.extender):
            if service is not None:
                service.stop()
        cluster.stop()


__all__ = ["TTL", "Env", "existing_volcano", "mount_scheduler_configmap", "run_playbook", "volcano_conf", "wait_until"]
