"""Make booted test nodes real Kubernetes nodes of the tests.cluster control plane: kubelet (built
with the API server, tests/cluster/go.mod), Debian's containerd and runc, the CNI plugins of
tests/node, and images imported from archives (no registry).

    python -m tests.cluster.kubelet --bed B --workdir W [--image ARCHIVE ...] NODE...

Every node imports the test images of scripts/build_images.py (pause, the sandbox image its
containerd is configured with; redis, memcached, stress-ng) and the ``--image`` archives.

``W`` is the running control plane's work directory (``python -m tests.cluster --workdir W``): its
CA signs each node's credentials (client ``system:node:<node>`` in ``system:nodes``; a serving
certificate for the node's address, which the API server checks). Nodes must be up with
``--kube`` (testbed/nodes.py). Each node gets pod network ``10.244.<octet>.0/24`` (its address's
last octet) on a bridge, routed through the controller namespace, so pods reach the API server,
each other and are reached back without NAT.

The kubelet leaves the kernel alone. It checks six kernel settings at start and, by default,
writes the ones it dislikes (``vm.overcommit_memory``, ``kernel.panic``, ...); the nodes share this
host's kernel. Here ``protectKernelDefaults: true`` makes it refuse instead of write, a oneshot unit
binds files holding the values it wants over those six ``/proc/sys`` entries (read-only, in the
node's mount namespace: the kernel's values stay as they are; containers mount a /proc of their own
and see the kernel's), and ``/proc/sys`` is read-only inside nspawn anyway. On
this hybrid-cgroup host the kubelet also needs ``failCgroupV1: false`` (1.34 is the last minor that
runs on cgroup v1 at all).
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from scripts import build_images
from testbed.errors import TestbedError
from testbed.nodes import CONTROLLER_ADDRESS, Bed
from tests.analyzer.certs import Issued, TestCA
from tests.cluster.build import BuildError, binaries
from tests.cluster.cluster import KUBELET_CLIENT, SERVICE_IP
from tests.node.build import cni_plugins

POD_NETWORK = "10.244.{octet}.0/24"
#: What kubelet v1.34 wants of the kernel (pkg/kubelet/cm/container_manager_linux.go,
#: setupKernelTunables): it reads these and, unless they match, writes them or refuses to start.
KERNEL_WANTED = {
    "vm/overcommit_memory": 1,
    "vm/panic_on_oom": 0,
    "kernel/panic": 10,
    "kernel/panic_on_oops": 1,
    "kernel/keys/root_maxkeys": 1000000,
    "kernel/keys/root_maxbytes": 25000000,
}
SEEN_BY_KUBELET = "/etc/mco-testbed/kubelet-kernel"
KERNEL_VIEW_UNIT = "mco-testbed-kubelet-kernel.service"
KERNEL_RECORD = "kernel-before-kubelets.json"
SERVICE_RELAY = "kube-service-relay"


class JoinError(RuntimeError):
    """A node could not join (the message says which and why)."""


def pod_network(address: str) -> str:
    return POD_NETWORK.format(octet=address.rsplit(".", 1)[1])


def kubelet_config(address: str) -> dict[str, object]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,  # this host's cpu, memory and blkio controllers are cgroup v1
        "cgroupDriver": "cgroupfs",  # runc writes the node's own groups (testbed/cgroups.py)
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "protectKernelDefaults": True,
        "address": address,
        "readOnlyPort": 0,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": "/etc/kubernetes/pki/ca.pem"},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": "/etc/kubernetes/pki/kubelet.pem",
        "tlsPrivateKeyFile": "/etc/kubernetes/pki/kubelet-key.pem",
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "clusterDomain": "cluster.local",
        "resolvConf": "/etc/resolv.conf",
        "failSwapOn": False,
        # the nodes share one disk and one page cache: evict only when really short
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 99,
        "imageGCLowThresholdPercent": 98,
        "serializeImagePulls": False,
        "nodeStatusReportFrequency": "10s",
        # each pod sync also rewrites the QoS-level groups (pkg/kubelet/cm/qos_container_manager_linux.go;
        # else every minute): a test that watches the guard's limits for 20 s sees a few of both
        "syncFrequency": "10s",
        "oomScoreAdj": 0,  # -999 needs CAP_SYS_RESOURCE, which this host's root lacks (docs/testbed.md)
    }


def containerd_config(sandbox_image: str) -> str:
    return (
        "version = 2\n"
        '[plugins."io.containerd.grpc.v1.cri"]\n'
        f'  sandbox_image = "{sandbox_image}"\n'
        # this host's root lacks CAP_SYS_RESOURCE: no process may lower an OOM score below 0, so the
        # containers' scores are kept at or above containerd's own (the setting rootless CRI uses)
        "  restrict_oom_score_adj = true\n"
        '[plugins."io.containerd.grpc.v1.cri".containerd]\n'
        '  snapshotter = "overlayfs"\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
        "  SystemdCgroup = false\n"
        '[plugins."io.containerd.grpc.v1.cri".cni]\n'
        '  bin_dir = "/opt/cni/bin"\n'
        '  conf_dir = "/etc/cni/net.d"\n'
    )


def cni_config(address: str) -> dict[str, object]:
    return {
        "cniVersion": "1.0.0",
        "name": "mco-testbed",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,  # routed by the controller namespace: pods keep their address
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": pod_network(address)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kernel_view_unit() -> str:
    """A oneshot unit binding the values the kubelet wants over the six ``/proc/sys`` files it checks,
    read-only, in the node's own mount namespace (module docstring). Not in the kubelet's unit: that
    would give the kubelet a private mount namespace, and the volumes it mounts for pods
    (ServiceAccount tokens, secrets: tmpfs) would stay invisible to containerd and runc."""
    return (
        "[Unit]\n"
        "Description=The kernel settings the kubelet checks, as it wants them (MCO test bed; the kernel's stay)\n"
        "DefaultDependencies=no\n"
        "Before=kubelet.service\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        # $$: a literal $ for the shell (systemd expands $NAME itself)
        f"ExecStart=/bin/sh -c 'for f in {SEEN_BY_KUBELET}/*; do p=/proc/sys/$$(basename $$f | tr . /);"
        " mountpoint -q $$p || mount --bind -o ro $$f $$p || exit 1; done'\n"
    )


def kubelet_unit(address: str) -> str:
    return (
        "[Unit]\n"
        "Description=kubelet (MCO test bed node)\n"
        f"After=containerd.service mco-testbed-cgroups.service {KERNEL_VIEW_UNIT}\n"
        f"Requires=containerd.service mco-testbed-cgroups.service {KERNEL_VIEW_UNIT}\n\n"
        "[Service]\n"
        "ExecStart=/usr/local/bin/kubelet --config=/var/lib/kubelet/config.yaml"
        f" --kubeconfig=/etc/kubernetes/kubelet.kubeconfig --node-ip={address} --v=1\n"
        "Restart=always\n"
        "RestartSec=2\n\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def _kubeconfig(server: str, ca: Path, cert: Issued) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "mco-test", "cluster": {"server": server, "certificate-authority-data": _b64(ca)}}],
        "users": [
            {"name": "node", "user": {"client-certificate-data": _b64(cert.cert), "client-key-data": _b64(cert.key)}}
        ],
        "contexts": [{"name": "node", "context": {"cluster": "mco-test", "user": "node"}}],
        "current-context": "node",
    }
    return yaml.safe_dump(doc)


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _write(root: Path, path: str, data: str | bytes, mode: int = 0o644) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    target.write_bytes(data)
    target.chmod(mode)


def _install(root: Path, source: Path, path: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    target.chmod(0o755)


def prepare(
    bed: Bed,
    node: str,
    *,
    ca: TestCA,
    server: str,
    bins: Mapping[str, Path],
    plugins: Mapping[str, Path],
    images: Sequence[Path],
    sandbox_image: str,
) -> str:
    """Write everything the node needs into its root; returns its address."""
    state = bed.load(node)
    if state is None or not state.options.get("kube"):
        raise JoinError(f"node {node!r} of bed {bed.name!r} is not up with --kube (python -m testbed up {node} --kube)")
    root, address = Path(state.root), state.address
    client = ca.issue(f"node-{node}", f"system:node:{node}", [], server=False, organization="system:nodes")
    serving = ca.issue(f"node-{node}-serving", f"system:node:{node}", [node], server=True, ips=[address])
    _write(root, "/etc/kubernetes/pki/ca.pem", ca.path.read_bytes())
    _write(root, "/etc/kubernetes/pki/kubelet.pem", serving.cert.read_bytes())
    _write(root, "/etc/kubernetes/pki/kubelet-key.pem", serving.key.read_bytes(), 0o600)
    _write(root, "/etc/kubernetes/kubelet.kubeconfig", _kubeconfig(server, ca.path, client), 0o600)
    _write(root, "/var/lib/kubelet/config.yaml", yaml.safe_dump(kubelet_config(address)))
    _write(root, "/etc/containerd/config.toml", containerd_config(sandbox_image))
    _write(root, "/etc/cni/net.d/10-mco-testbed.conflist", json.dumps(cni_config(address), indent=2))
    _write(root, "/etc/systemd/system/kubelet.service", kubelet_unit(address))
    _write(root, f"/etc/systemd/system/{KERNEL_VIEW_UNIT}", kernel_view_unit())
    for name, value in KERNEL_WANTED.items():
        _write(root, f"{SEEN_BY_KUBELET}/{name.replace('/', '.')}", f"{value}\n")
    _install(root, bins["kubelet"], "/usr/local/bin/kubelet")
    for name, path in plugins.items():
        _install(root, path, f"/opt/cni/bin/{name}")
    for archive in images:
        _install(root, archive, f"/var/cache/mco-testbed/images/{archive.name}")
    return address


def start(bed: Bed, node: str, images: Sequence[Path], *, timeout: float = 120) -> None:
    """containerd with its new configuration, the images imported, then the kubelet."""
    imports = " && ".join(
        f"ctr -n k8s.io images import /var/cache/mco-testbed/images/{a.name} >/dev/null" for a in images
    )
    script = "set -e; systemctl daemon-reload; systemctl restart containerd; " + (f"{imports}; " if imports else "")
    script += "systemctl enable --now kubelet >/dev/null 2>&1"
    done = subprocess.run(
        bed.ssh_argv(node, ["sh", "-c", script]), capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise JoinError(
            f"node {node}: starting containerd and the kubelet failed: {(done.stderr or done.stdout).strip()[-1500:]}"
        )


def route_pods(bed: Bed, node: str, address: str) -> None:
    """The controller namespace routes the node's pod network to it (pods keep their addresses), and
    both forward. ``net.ipv4.ip_forward`` is per network namespace: these are the bed's own, set from
    the host because /proc/sys is read-only inside a node (the bridge plugin then finds it set)."""
    for netns in (bed.ctl_netns, bed.node_netns(node)):
        subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
    subprocess.run(["ip", "-n", bed.ctl_netns, "route", "replace", pod_network(address), "via", address], check=True)


def relay_service(bed: Bed, server: str) -> None:
    """Pods reach the API server at the ``kubernetes`` Service (``SERVICE_IP:443``, what in-cluster
    clients such as Volcano's read from ``KUBERNETES_SERVICE_HOST``): the controller namespace owns
    that address and relays it to the API server (no kube-proxy here). Pod traffic is routed through
    that namespace already, so one relay serves every node; a second join keeps the running one."""
    subprocess.run(["ip", "-n", bed.ctl_netns, "address", "replace", f"{SERVICE_IP}/32", "dev", "lo"], check=True)
    if bed.service_pid(SERVICE_RELAY) is not None:
        return
    api = urlsplit(server)
    bed.serve(
        SERVICE_RELAY,
        ["socat", f"TCP-LISTEN:443,bind={SERVICE_IP},fork,reuseaddr", f"TCP:{api.hostname}:{api.port}"],
        wait_port=None,
    )


def wait_ready(kubectl: Sequence[str], nodes: Sequence[str], *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    waiting = list(nodes)
    last = ""
    while waiting and time.monotonic() < deadline:
        out = subprocess.run(
            [*kubectl, "get", "nodes", "-o", "json"], capture_output=True, text=True, timeout=30, check=False
        )
        ready = set()
        if out.returncode == 0:
            for item in json.loads(out.stdout)["items"]:
                conditions = {c["type"]: c for c in item["status"].get("conditions", [])}
                ready_cond = conditions.get("Ready", {})
                if ready_cond.get("status") == "True":
                    ready.add(item["metadata"]["name"])
                elif item["metadata"]["name"] in waiting:
                    last = f"{item['metadata']['name']}: {ready_cond.get('reason')}: {ready_cond.get('message')}"
        else:
            last = out.stderr.strip()
        waiting = [n for n in waiting if n not in ready]
        if waiting:
            time.sleep(1)
    if waiting:
        raise JoinError(
            f"nodes not Ready within {timeout:.0f} s: {', '.join(waiting)} (last: {last or 'not registered'})"
        )


def allow_apiserver(kubectl: Sequence[str]) -> None:
    """The API server's client certificate may use the kubelets' API (logs, exec, port-forward)."""
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "mco-testbed:apiserver-kubelet-api"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:kubelet-api-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": KUBELET_CLIENT}],
    }
    done = subprocess.run(
        [*kubectl, "apply", "-f", "-"],
        input=json.dumps(binding),
        text=True,
        capture_output=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise JoinError(f"kubectl apply of the API server's kubelet binding failed: {done.stderr.strip()}")


def kernel_settings() -> dict[str, str]:
    """This host's values of what the kubelet wants of the kernel."""
    return {name: Path("/proc/sys", name).read_text().strip() for name in KERNEL_WANTED}


def join(bed: Bed, nodes: Sequence[str], *, workdir: Path, images: Sequence[Path] = (), timeout: float = 120) -> None:
    """Join ``nodes`` (up with ``--kube``) to the control plane whose work directory is ``workdir``.

    Records the host's kernel settings first (``<bed dir>/kernel-before-kubelets.json``, for later
    checks) and fails if they changed by the time the nodes are Ready."""
    try:
        bins, plugins, test_images = binaries(), cni_plugins(), build_images.images()["images"]
    except BuildError as exc:
        raise JoinError(str(exc)) from exc
    images = [*(Path(i["archive"]) for i in test_images.values()), *images]
    ca = TestCA.load(workdir / "pki")
    admin = workdir / "admin.kubeconfig"
    server = yaml.safe_load(admin.read_text())["clusters"][0]["cluster"]["server"]
    # the API server listens in the controller namespace only (10.213.0.1)
    kubectl = ["ip", "netns", "exec", bed.ctl_netns, str(bins["kubectl"]), f"--kubeconfig={admin}"]
    allow_apiserver(kubectl)
    relay_service(bed, server)
    record = bed.dir / KERNEL_RECORD
    if not record.exists():
        record.write_text(json.dumps(kernel_settings(), indent=2) + "\n")
    before = json.loads(record.read_text())
    for node in nodes:
        address = prepare(
            bed,
            node,
            ca=ca,
            server=server,
            bins=bins,
            plugins=plugins,
            images=images,
            sandbox_image=test_images["pause"]["image"],
        )
        route_pods(bed, node, address)
        start(bed, node, images)
    wait_ready(kubectl, nodes, timeout=timeout)
    after = kernel_settings()
    if after != before:
        changed = {k: f"{before.get(k)} -> {v}" for k, v in after.items() if before.get(k) != v}
        raise JoinError(f"the host kernel's settings changed while the kubelets started: {changed}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.kubelet", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bed", required=True)
    parser.add_argument("--workdir", required=True, type=Path, help="the control plane's work directory")
    parser.add_argument(
        "--image", action="append", type=Path, default=[], help="another image archive to import (repeatable)"
    )
    parser.add_argument("--timeout", type=float, default=120, help="seconds for the nodes to become Ready")
    parser.add_argument("nodes", nargs="+")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        join(Bed(args.bed), args.nodes, workdir=args.workdir, images=args.image, timeout=args.timeout)
    except (JoinError, BuildError, TestbedError, OSError, subprocess.SubprocessError) as exc:
        print(f"kubelet: {exc}", file=sys.stderr)
        return 1
    print(f"kubelet: {', '.join(args.nodes)} Ready in {time.monotonic() - started:.1f} s (via {CONTROLLER_ADDRESS})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
