"""A real control plane on this host: etcd, kube-apiserver and, on request, Volcano, kube-scheduler
and kube-controller-manager with the controllers asked for.

The binaries come from :mod:`tests.cluster.build` (real upstream programs built from pinned Go
modules). There is no kubelet, and kube-controller-manager runs only with ``controllers=``: Nodes
are created with their status (Ready, allocatable set), ServiceAccounts are created by whoever
needs them, and a bound pod stays Pending with its ``spec.nodeName`` set.

    cluster = RealCluster(workdir, binaries())
    cluster.start(nodes=3, volcano=True)
    ... cluster.admin_kubeconfig ...
    cluster.stop()
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.analyzer.certs import TestCA

#: Service CIDR of the test cluster; the first address is the `kubernetes` Service.
SERVICE_CIDR = "10.96.0.0/24"
SERVICE_IP = "10.96.0.1"
#: What pods' ServiceAccount tokens need besides the admission plugin: each namespace's ``default``
#: ServiceAccount, and the ``kube-root-ca.crt`` ConfigMap their projected volume reads.
SERVICE_ACCOUNT_CONTROLLERS = ("serviceaccount", "root-ca-cert-publisher")
ADMIN = "mco-test-admin"
KUBELET_CLIENT = "kube-apiserver-kubelet-client"
#: Node capacity given to every fake node.
NODE_CAPACITY = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"}


class ClusterError(Exception):
    """A component did not start or answer; the message names it and ends with its log's last lines."""


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    with urllib.request.urlopen(url, timeout=2, context=context) as resp:
        return bool(resp.status == 200)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class _Process:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 25) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)


@dataclass
class RealCluster:
    """etcd + kube-apiserver (secure port, RBAC, ServiceAccount tokens) and optional schedulers."""

    workdir: Path
    bins: Mapping[str, Path]
    crds: Path | None = None
    """Directory of the Volcano CRDs (needed for ``volcano=True``)."""
    host: str = "127.0.0.1"
    """Address the API server listens on and is reached at (its certificate names it)."""
    api_port: int = 0
    """Its port; 0 picks a free one."""
    pod_service_accounts: bool = False
    """Pods get their ServiceAccount's token mounted, as on any cluster (the ServiceAccount admission
    plugin on; kube-controller-manager must then run ``SERVICE_ACCOUNT_CONTROLLERS``). Off by default:
    fake nodes run no pods, and tests create a pod right after its namespace, before any controller
    could make the namespace's ``default`` ServiceAccount."""
    processes: list[_Process] = field(default_factory=list)
    admin_kubeconfig: Path = Path()
    ca: TestCA | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(
        self,
        *,
        nodes: int = 3,
        volcano: bool = False,
        volcano_conf: str | None = None,
        kube_scheduler: bool = False,
        scheduler_config: Mapping[str, Any] | None = None,
        controllers: Sequence[str] = (),
        timeout: float = 120.0,
    ) -> RealCluster:
        """Start etcd and the API server, register ``nodes`` fake nodes, then the schedulers asked for
        and kube-controller-manager running ``controllers`` (e.g. ``["namespace", "garbagecollector"]``)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._pki()
            self._etcd(timeout)
            self._apiserver(timeout)
            self.create_nodes([f"node-{i}" for i in range(1, nodes + 1)])
            if volcano:
                self.start_volcano(volcano_conf, timeout=timeout)
            if kube_scheduler:
                self.start_kube_scheduler(scheduler_config or {}, timeout=timeout)
            if controllers:
                self.start_controller_manager(controllers, timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every process, newest first."""
        while self.processes:
            self.processes.pop().stop()

    def __enter__(self) -> RealCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, args: Sequence[str], environment: Mapping[str, str] | None = None) -> _Process:
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(a) for a in args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **environment} if environment else None,
            )
        process = _Process(name, proc, log)
        self.processes.append(process)
        return process

    def _wait(self, process: _Process, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.proc.poll() is not None:
                raise ClusterError(f"{process.name} exited ({process.proc.returncode}):\n{process.tail()}")
            with contextlib.suppress(OSError, urllib.error.URLError, ssl.SSLError, ValueError):
                if ready():
                    return
            time.sleep(0.2)
        raise ClusterError(f"{process.name} not ready after {timeout:.0f}s:\n{process.tail()}")

    # -- PKI ---------------------------------------------------------------------------------------

    def _pki(self) -> None:
        pki = self.workdir / "pki"
        pki.mkdir(exist_ok=True)
        self.ca = TestCA(pki)
        self.server = self.ca.issue(
            "apiserver",
            "kube-apiserver",
            ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
            server=True,
            ips=sorted({"127.0.0.1", self.host, SERVICE_IP}),
        )
        self.admin = self.ca.issue("admin", ADMIN, [], server=False, organization="system:masters")
        # the API server's identity towards kubelets (logs, exec): kubelets allow it by RBAC (kubelet.py)
        self.kubelet_client = self.ca.issue("apiserver-kubelet-client", KUBELET_CLIENT, [], server=False)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.sa_key = pki / "sa.key"
        self.sa_pub = pki / "sa.pub"
        self.sa_key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        self.sa_pub.write_bytes(
            key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )

    # -- etcd and the API server -------------------------------------------------------------------

    def _etcd(self, timeout: float) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        data = self.workdir / "etcd"
        process = self._spawn(
            "etcd",
            [
                self.bins["etcd"],
                "--name=mco-test",
                f"--data-dir={data}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=mco-test=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )

        def healthy() -> bool:
            with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as resp:
                return bool(json.load(resp).get("health") == "true")

        self._wait(process, healthy, timeout)

    def _apiserver(self, timeout: float) -> None:
        assert self.ca is not None
        self.api_port = self.api_port or free_port()
        process = self._spawn(
            "kube-apiserver",
            [
                self.bins["kube-apiserver"],
                f"--etcd-servers={self.etcd_url}",
                f"--secure-port={self.api_port}",
                f"--bind-address={self.host}",
                f"--advertise-address={self.host}",
                f"--tls-cert-file={self.server.cert}",
                f"--tls-private-key-file={self.server.key}",
                f"--client-ca-file={self.ca.path}",
                f"--kubelet-client-certificate={self.kubelet_client.cert}",
                f"--kubelet-client-key={self.kubelet_client.key}",
                f"--kubelet-certificate-authority={self.ca.path}",
                "--kubelet-preferred-address-types=InternalIP",  # no DNS for node names here
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # Node: kubelets of booted test nodes (tests/cluster/kubelet.py) act as system:node:<name>
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={self.sa_pub}",
                f"--service-account-signing-key-file={self.sa_key}",
                # fake nodes must not get a not-ready taint at creation
                "--disable-admission-plugins="
                + ",".join((() if self.pod_service_accounts else ("ServiceAccount",)) + ("TaintNodesByCondition",)),
                "--allow-privileged=true",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
            ],
        )
        self.admin_kubeconfig = self.write_kubeconfig(self.workdir / "admin.kubeconfig", cert=self.admin)
        context = self._ssl_context()

        def ready() -> bool:
            with urllib.request.urlopen(f"{self.url}/readyz", timeout=5, context=context) as resp:
                return bool(resp.status == 200)

        self._wait(process, ready, timeout)

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.api_port}"

    def _ssl_context(self) -> ssl.SSLContext:
        assert self.ca is not None
        context = ssl.create_default_context(cafile=str(self.ca.path))
        context.load_cert_chain(str(self.admin.cert), str(self.admin.key))
        return context

    def write_kubeconfig(self, path: Path, *, cert: Any = None, token: str | None = None) -> Path:
        """A kubeconfig for this cluster authenticating with a client certificate or a bearer token."""
        assert self.ca is not None
        user: dict[str, str] = {}
        if cert is not None:
            user = {"client-certificate": str(cert.cert), "client-key": str(cert.key)}
        if token is not None:
            user = {"token": token}
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "mco-test", "cluster": {"server": self.url, "certificate-authority": str(self.ca.path)}}
            ],
            "users": [{"name": "user", "user": user}],
            "contexts": [{"name": "mco-test", "context": {"cluster": "mco-test", "user": "user"}}],
            "current-context": "mco-test",
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(doc))
        tmp.chmod(0o600)
        tmp.replace(path)
        return path

    # -- API helpers (kubectl, so the tests exercise the real client as an operator would) ---------

    def kubectl(self, *args: str, kubeconfig: Path | None = None, stdin: str | None = None, check: bool = True) -> str:
        out = subprocess.run(
            [str(self.bins["kubectl"]), f"--kubeconfig={kubeconfig or self.admin_kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check and out.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)}: exit {out.returncode}: {out.stderr.strip()}")
        return out.stdout

    def apply(self, docs: Iterable[Mapping[str, Any]], *, server_side: bool = False) -> None:
        text = yaml.safe_dump_all(list(docs))
        args = ["apply", "-f", "-"] + (["--server-side", "--force-conflicts"] if server_side else [])
        self.kubectl(*args, stdin=text)

    def create_nodes(self, names: Iterable[str], *, labels: Mapping[str, str] | None = None) -> None:
        """Fake nodes: Ready, allocatable set, no taints (no kubelet keeps them fresh; nothing expires them)."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        docs = []
        for name in names:
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
                    "status": {
                        "capacity": NODE_CAPACITY,
                        "allocatable": NODE_CAPACITY,
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "True",
                                "reason": "KubeletReady",
                                "message": "fake node (no kubelet)",
                                "lastHeartbeatTime": now,
                                "lastTransitionTime": now,
                            }
                        ],
                    },
                }
            )
        if docs:
            self.kubectl("create", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def service_account_kubeconfig(self, namespace: str, name: str, path: Path, *, seconds: int = 3600) -> Path:
        """A kubeconfig with a bound token of ServiceAccount ``namespace/name`` (TokenRequest)."""
        token = self.kubectl("-n", namespace, "create", "token", name, f"--duration={seconds}s").strip()
        return self.write_kubeconfig(path, token=token)

    # -- schedulers --------------------------------------------------------------------------------

    def start_volcano(self, conf: str | None, *, timeout: float = 120.0) -> None:
        """Volcano's CRDs, vc-controller-manager (PodGroups for plain pods, queues) and vc-scheduler."""
        if self.crds is None:
            raise ClusterError("the Volcano CRDs were not built (tests.cluster.build copies them)")
        for crd in sorted(self.crds.glob("*.yaml")):  # create: the large ones overflow last-applied
            self.kubectl("create", "-f", str(crd))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        self.kubectl("create", "namespace", "volcano-system")
        controller_health = free_port()
        controller = self._spawn(
            "vc-controller-manager",
            [
                self.bins["vc-controller-manager"],
                f"--kubeconfig={self.admin_kubeconfig}",
                "--controllers=pg-controller,queue-controller",
                "--leader-elect=false",
                "--enable-healthz=true",
                f"--healthz-address=127.0.0.1:{controller_health}",
                "--logtostderr",
                "-v=2",
            ],
        )
        # a directory of its own: vc-scheduler watches the file's directory, and the logs change often
        conf_dir = self.workdir / "volcano-conf"
        conf_dir.mkdir(exist_ok=True)
        self.volcano_conf_path = conf_dir / "volcano-scheduler.conf"
        self.volcano_conf_path.write_text(conf or DEFAULT_VOLCANO_CONF)

        def queue_open() -> bool:
            out = self.kubectl("get", "queues.scheduling.volcano.sh", "default", "-o", "json", check=False)
            return bool(out) and json.loads(out).get("status", {}).get("state") == "Open"

        self.start_vc_scheduler(timeout=timeout)
        self._wait(controller, queue_open, timeout)

    def start_vc_scheduler(
        self, *, kubeconfig: Path | None = None, timeout: float = 120.0, environment: Mapping[str, str] | None = None
    ) -> None:
        """vc-scheduler (``bins["vc-scheduler"]``) with the configuration file of :meth:`start_volcano`,
        its metrics on ``volcano_metrics_port``; ``kubeconfig``: its credentials (default the admin's);
        ``environment``: variables added to this process's (a pod's ``env``). A vc-scheduler already running
        is stopped first."""
        self.stop_vc_scheduler()
        health, self.volcano_metrics_port = free_port(), free_port()
        self.vc_scheduler = self._spawn(
            "vc-scheduler",
            [
                self.bins["vc-scheduler"],
                f"--kubeconfig={kubeconfig or self.admin_kubeconfig}",
                f"--scheduler-conf={self.volcano_conf_path}",
                "--leader-elect=false",
                "--schedule-period=1s",
                "--enable-healthz=true",
                f"--healthz-address=127.0.0.1:{health}",
                "--enable-metrics=true",
                "--enable-pprof=true",  # on the metrics port: benchmarks profile it
                f"--listen-address=127.0.0.1:{self.volcano_metrics_port}",
                "--logtostderr",
                "-v=3",
            ],
            environment,
        )
        self._wait(self.vc_scheduler, lambda: _http_ok(f"http://127.0.0.1:{health}/healthz"), timeout)

    def stop_vc_scheduler(self) -> None:
        process = getattr(self, "vc_scheduler", None)
        if process is not None and process in self.processes:
            process.stop()
            self.processes.remove(process)

    def set_volcano_conf(self, conf: str) -> None:
        """Replace vc-scheduler's configuration file, as the kubelet does when its ConfigMap changes
        (vc-scheduler watches the file and reloads it)."""
        tmp = self.volcano_conf_path.with_suffix(".tmp")
        tmp.write_text(conf)
        tmp.replace(self.volcano_conf_path)

    def start_kube_scheduler(self, config: Mapping[str, Any], *, timeout: float = 120.0) -> None:
        """kube-scheduler with ``config`` merged into a KubeSchedulerConfiguration (e.g. ``extenders``)."""
        doc = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(self.admin_kubeconfig)},
            "leaderElection": {"leaderElect": False},
            **config,
        }
        path = self.workdir / "kube-scheduler.yaml"
        path.write_text(yaml.safe_dump(doc))
        port = self.kube_scheduler_port = free_port()
        process = self._spawn(
            "kube-scheduler",
            [
                self.bins["kube-scheduler"],
                f"--config={path}",
                f"--secure-port={port}",
                "--bind-address=127.0.0.1",
                # tests read /metrics, benchmarks profile it
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof,/debug/pprof/*",
                "-v=2",
            ],
        )
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # its self-signed serving certificate: only liveness is asked
        self._wait(process, lambda: _http_ok(f"https://127.0.0.1:{port}/healthz", context), timeout)

    def start_controller_manager(self, controllers: Sequence[str], *, timeout: float = 120.0) -> None:
        """kube-controller-manager running only ``controllers`` (names as in its ``--controllers``:
        ``namespace`` finishes namespace deletion, ``garbagecollector`` follows ownerReferences),
        with the admin client certificate (no per-controller ServiceAccounts)."""
        port = free_port()
        process = self._spawn(
            "kube-controller-manager",
            [
                self.bins["kube-controller-manager"],
                f"--kubeconfig={self.admin_kubeconfig}",
                f"--controllers={','.join(controllers)}",
                "--use-service-account-credentials=false",
                "--leader-elect=false",
                f"--secure-port={port}",
                "--bind-address=127.0.0.1",
                f"--cert-dir={self.workdir / 'controller-manager-certs'}",
                f"--root-ca-file={self.ca.path if self.ca else ''}",
                f"--service-account-private-key-file={self.sa_key}",
                "-v=2",
            ],
        )
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # its self-signed serving certificate: only liveness is asked
        self._wait(process, lambda: _http_ok(f"https://127.0.0.1:{port}/healthz", context), timeout)

    def logs(self) -> dict[str, str]:
        """The last lines of every component's log (for failure messages)."""
        return {p.name: p.tail(40) for p in self.processes}


#: vc-scheduler's own default actions and plugins (what `--scheduler-conf` empty would give).
DEFAULT_VOLCANO_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


def _role_filter() -> Any:
    """``plugins/filter/volcano_conf.py``: the role's own editor of the scheduler conf."""
    path = Path(__file__).resolve().parents[2] / "plugins/filter/volcano_conf.py"
    spec = importlib.util.spec_from_file_location("mco_volcano_conf", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def volcano_conf(
    extender: str, *, reply_format: str = "v1.10", conf: str = DEFAULT_VOLCANO_CONF, predicate: bool = True
) -> str:
    """``conf`` with our extender entry, edited by the volcano role's filter as the role does it.

    ``extender`` is the MCO extender's base URL (``http://127.0.0.1:9879``); the entry's arguments
    are the role's (``roles/volcano/tasks/preflight.yml``): predicate and prioritize, 1 s timeout,
    ignorable. ``predicate=False`` leaves the predicate verb out (scores only: one call per pod).
    """
    arguments: dict[str, object] = {
        "extender.urlPrefix": f"{extender.rstrip('/')}/volcano/{reply_format}",
        "extender.httpTimeout": "1s",
        "extender.predicateVerb": "predicate",
        "extender.prioritizeVerb": "prioritize",
        "extender.ignorable": True,
    }
    if not predicate:
        del arguments["extender.predicateVerb"]
    result: str = _role_filter().set_extender(conf, arguments, f"{extender.rstrip('/')}/volcano/")
    return result


def extender_config(extender: str) -> dict[str, Any]:
    """kube-scheduler ``extenders`` calling the MCO extender's kube routes (filter and prioritize)."""
    return {
        "extenders": [
            {
                "urlPrefix": f"{extender.rstrip('/')}/kube",
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "weight": 1,
                "httpTimeout": "1s",
                "nodeCacheCapable": True,  # as docs/extender.md registers it: node names only
                "ignorable": True,
            }
        ]
    }


def remove_workdir(path: Path) -> None:
    """Remove a cluster's work directory (etcd data, logs, keys)."""
    shutil.rmtree(path, ignore_errors=True)
