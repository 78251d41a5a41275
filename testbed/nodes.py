"""Node lifecycle: overlay root, network namespace, systemd-nspawn --boot, ssh readiness, cleanup.

Layout of one *bed* (a set of nodes that share a controller namespace; ``--bed`` or
``MCO_TESTBED_BED``, default ``dev``):

- controller network namespace ``mcotb-<bed>-ctl`` with bridge ``br0`` at 10.213.0.1/24;
- per node ``NAME``: network namespace ``mcotb-<bed>-NAME`` whose ``eth0`` is one end of a
  veth pair, the other end (``vn<octet>``) enslaved to ``br0``; address 10.213.0.<octet>;
- per node an overlay mount ``<state>/<bed>/nodes/NAME/root`` over the shared image, with
  ``upper``/``work`` next to it, and a ``systemd-nspawn --boot`` process.

The private addresses exist only inside these namespaces. Every step is recorded in
``<state>/<bed>/nodes/NAME/state.json`` before it is taken, and cleanup also finds
leftovers by name (netns prefix, mounts under the state dir, nspawn command lines), so
``down-all`` works after a crashed or killed run even when no state file was written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import ipaddress
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from testbed import cgroups, system
from testbed.errors import TestbedError

PREFIX = "mcotb-"
SUBNET = ipaddress.IPv4Network("10.213.0.0/24")
CONTROLLER_ADDRESS = ipaddress.IPv4Address("10.213.0.1")
FIRST_NODE_OCTET = 10
BRIDGE = "br0"
READY_STATES = ("running", "degraded")
DEFAULT_READY_TIMEOUT = 60.0
BED_PATTERN = re.compile(r"[a-z0-9]{1,20}")
NODE_PATTERN = re.compile(r"[a-z][a-z0-9-]{0,30}")
RESERVED_NODE_NAMES = ("ctl",)
CAPABILITY_PATTERN = re.compile(r"CAP_[A-Z_]+")
#: What a Kubernetes node (``NodeOptions.kube``) needs beyond nspawn's defaults: mounts and cgroup
#: writes for runc, container and pod networks, /dev/kmsg (the kubelet's OOM watcher reads it), and
#: the keyring calls runc makes for each container's session key. (CAP_SYS_RESOURCE is asked for,
#: but this host's root has none to give: tests/cluster/kubelet.py keeps OOM scores at 0 and above.)
KUBE_CAPABILITIES = ("CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SYS_RESOURCE", "CAP_SYSLOG")
KUBE_SYSCALLS = "@keyring"
#: containerd's store: its overlayfs snapshots cannot sit on the node's overlay root.
CONTAINERD_DIR = "/var/lib/containerd"
#: The unit that makes the node's cgroup v1 hierarchies writable (nspawn mounts them read-only).
CGROUP_UNIT = "mco-testbed-cgroups.service"
#: The node's cgroup v2 tree (its own group: testbed/cgroups.py) and the PSI files shown from it.
UNIFIED = "/sys/fs/cgroup/unified"
NODE_PSI = ("cpu", "memory", "io")


def state_root() -> Path:
    """Where beds keep their state (MCO_TESTBED_STATE overrides ``/run/mco-testbed``)."""
    return Path(os.environ.get("MCO_TESTBED_STATE") or "/run/mco-testbed")


def default_bed() -> str:
    return os.environ.get("MCO_TESTBED_BED") or "dev"


def check_bed_name(bed: str) -> str:
    if not BED_PATTERN.fullmatch(bed):
        raise TestbedError(f"bed name {bed!r} is invalid: use 1-20 lower-case letters and digits (no '-')")
    return bed


def check_node_name(name: str) -> str:
    if not NODE_PATTERN.fullmatch(name) or name in RESERVED_NODE_NAMES:
        raise TestbedError(
            f"node name {name!r} is invalid: start with a letter, then up to 30 lower-case letters, digits or '-'"
            f" (not {', '.join(RESERVED_NODE_NAMES)})"
        )
    return name


def check_capabilities(caps: Sequence[str]) -> list[str]:
    bad = [cap for cap in caps if not CAPABILITY_PATTERN.fullmatch(cap)]
    if bad:
        raise TestbedError(f"capabilities {bad} are invalid: use names like CAP_BPF,CAP_PERFMON")
    return list(caps)


def check_binds(binds: Sequence[str]) -> list[str]:
    """``SRC`` or ``SRC:DST`` with absolute paths and an existing source."""
    for bind in binds:
        source, _, dest = bind.partition(":")
        if not source.startswith("/") or (dest and not dest.startswith("/")):
            raise TestbedError(f"bind {bind!r} is invalid: use /host/path or /host/path:/node/path")
        if not Path(source).exists():
            raise TestbedError(f"bind source {source} does not exist on this host")
    return list(binds)


@dataclasses.dataclass(frozen=True)
class NodeOptions:
    """What a node is booted with, beyond the defaults."""

    kvm: bool = False
    """Bind /dev/kvm into the node."""
    capabilities: tuple[str, ...] = ()
    """Extra capabilities for the node's init (e.g. CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN)."""
    binds: tuple[str, ...] = ()
    """Extra ``SRC[:DST]`` bind mounts from the host."""
    kube: bool = False
    """Ready to run a kubelet and containers: its own cgroups, the v1 groups made writable inside and
    its own PSI as /proc/pressure (testbed/cgroups.py), CAP_SYS_ADMIN, runc's session keyring,
    containerd's store off the overlay."""

    def nspawn_args(self) -> list[str]:
        args = []
        if self.kvm:
            if not Path("/dev/kvm").exists():
                raise TestbedError("--kvm asked for /dev/kvm, but this host has no /dev/kvm")
            args.append("--bind=/dev/kvm")
        capabilities = list(self.capabilities)
        if self.kube:
            capabilities += [c for c in KUBE_CAPABILITIES if c not in capabilities]
            args += [
                f"--system-call-filter={KUBE_SYSCALLS}",
                "--bind-ro=/dev/kmsg",
            ]  # the kubelet's OOM watcher reads it
        if capabilities:
            args.append(f"--capability={','.join(capabilities)}")
        args.extend(f"--bind={bind}" for bind in self.binds)
        return args


@dataclasses.dataclass
class NodeState:
    """What ``state.json`` records for one node (enough to undo every step)."""

    name: str
    bed: str
    address: str
    netns: str
    root: str
    image: str
    pid: int | None = None
    options: dict[str, Any] = dataclasses.field(default_factory=dict)


class Bed:
    """One set of nodes sharing a controller namespace; every name derives from ``name``."""

    def __init__(self, name: str | None = None, *, root: Path | None = None) -> None:
        self.name = check_bed_name(name or default_bed())
        self.state_root = root or state_root()
        self.dir = self.state_root / self.name
        self.ctl_netns = f"{PREFIX}{self.name}-ctl"
        self.ssh_key = self.state_root / "id_ed25519"

    # --- names -------------------------------------------------------------------
    def node_netns(self, node: str) -> str:
        return f"{PREFIX}{self.name}-{node}"

    def node_dir(self, node: str) -> Path:
        return self.dir / "nodes" / node

    def known_nodes(self) -> list[str]:
        """Nodes with a state dir or a leftover namespace of this bed."""
        names: set[str] = set()
        nodes_dir = self.dir / "nodes"
        if nodes_dir.is_dir():
            names.update(p.name for p in nodes_dir.iterdir() if p.is_dir())
        prefix = f"{PREFIX}{self.name}-"
        names.update(ns[len(prefix) :] for ns in system.netns_names() if ns.startswith(prefix))
        names.discard("ctl")
        return sorted(names)

    def is_running(self, node: str) -> bool:
        state = self.load(node)
        return bool(state and state.pid and system.pid_alive(state.pid))

    def load(self, node: str) -> NodeState | None:
        path = self.node_dir(node) / "state.json"
        try:
            return NodeState(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def save(self, state: NodeState) -> None:
        path = self.node_dir(state.name) / "state.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(".tmp")
        scratch.write_text(json.dumps(dataclasses.asdict(state), indent=2) + "\n")
        scratch.replace(path)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Serialise changes to this bed (released by the kernel if the process dies)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with (self.dir / "lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    # --- ssh -----------------------------------------------------------------------
    def ensure_ssh_key(self) -> Path:
        self.state_root.mkdir(parents=True, exist_ok=True)
        if not self.ssh_key.exists():
            scratch = self.ssh_key.with_name(f".key-{os.getpid()}")
            system.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mco-testbed", "-f", str(scratch)])
            scratch.with_suffix(".pub").replace(self.ssh_key.with_suffix(".pub"))
            scratch.replace(self.ssh_key)
        return self.ssh_key

    def proxy_command(self) -> str:
        return f"ip netns exec {self.ctl_netns} socat - TCP:%h:%p"

    def ssh_config(self) -> list[tuple[str, str]]:
        """ssh ``-o`` options that reach this bed's nodes through the controller namespace."""
        return [
            ("StrictHostKeyChecking", "no"),
            ("UserKnownHostsFile", "/dev/null"),
            ("LogLevel", "ERROR"),
            ("BatchMode", "yes"),
            ("ConnectTimeout", "5"),
            ("ProxyCommand", self.proxy_command()),
        ]

    def ssh_options(self) -> list[str]:
        argv = ["-i", str(self.ssh_key)]
        for key, value in self.ssh_config():
            argv += ["-o", f"{key}={value}"]
        return argv

    def ssh_argv(self, node: str, command: Sequence[str], *, tty: bool = False) -> list[str]:
        state = self.load(node)
        if state is None:
            raise TestbedError(f"node {node!r} is not up in bed {self.name!r}; `python -m testbed up {node}` first")
        return ["ssh", *self.ssh_options(), *(["-t"] if tty else []), f"root@{state.address}", *command]

    # --- network -------------------------------------------------------------------
    def ensure_controller(self) -> None:
        if system.netns_inode(self.ctl_netns) is not None:
            return
        ns = self.ctl_netns
        system.run(["ip", "netns", "add", ns])
        system.run(["ip", "-n", ns, "link", "set", "lo", "up"])
        system.run(["ip", "-n", ns, "link", "add", BRIDGE, "type", "bridge"])
        system.run(["ip", "-n", ns, "addr", "add", f"{CONTROLLER_ADDRESS}/{SUBNET.prefixlen}", "dev", BRIDGE])
        system.run(["ip", "-n", ns, "link", "set", BRIDGE, "up"])

    def allocate_address(self, wanted: str | None) -> str:
        used = {s.address for s in (self.load(n) for n in self.known_nodes()) if s is not None}
        if wanted:
            try:
                address = ipaddress.IPv4Address(wanted)
            except ValueError as exc:
                raise TestbedError(f"--address {wanted!r} is not an IPv4 address") from exc
            if address not in SUBNET or int(address) - int(SUBNET.network_address) < FIRST_NODE_OCTET:
                raise TestbedError(f"--address {wanted} must be in {SUBNET} from .{FIRST_NODE_OCTET} to .254")
            if wanted in used:
                raise TestbedError(f"--address {wanted} is taken by another node of bed {self.name!r}")
            return wanted
        for host in SUBNET.hosts():
            if int(host) - int(SUBNET.network_address) >= FIRST_NODE_OCTET and str(host) not in used:
                return str(host)
        raise TestbedError(f"no free address left in {SUBNET} for bed {self.name!r}")

    def _wire_node(self, state: NodeState) -> None:
        ns = state.netns
        octet = state.address.rsplit(".", 1)[1]
        peer = f"vn{octet}"
        system.run(["ip", "netns", "add", ns])
        system.run(["ip", "-n", ns, "link", "set", "lo", "up"])
        system.run(
            ["ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", peer, "netns", self.ctl_netns]
        )
        system.run(["ip", "-n", self.ctl_netns, "link", "set", peer, "master", BRIDGE, "up"])
        system.run(["ip", "-n", ns, "addr", "add", f"{state.address}/{SUBNET.prefixlen}", "dev", "eth0"])
        system.run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        system.run(["ip", "-n", ns, "route", "add", "default", "via", str(CONTROLLER_ADDRESS)])

    # --- lifecycle -------------------------------------------------------------------
    def up(
        self,
        node: str,
        *,
        image: Path,
        options: NodeOptions | None = None,
        address: str | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
    ) -> NodeState:
        """Boot ``node`` and wait until ssh works and systemd says running/degraded.

        Idempotent: a node that is already up and healthy is returned as it is.
        """
        check_node_name(node)
        options = options or NodeOptions()
        system.preflight()
        key = self.ensure_ssh_key()
        with self.locked():
            existing = self.load(node)
            if existing is not None and existing.pid and system.pid_alive(existing.pid):
                self.wait_ready(node, timeout=ready_timeout)
                return existing
            self._teardown(node)  # leftovers of an earlier, interrupted run of this node
            try:
                state = self._start(node, image=image, options=options, address=address, key=key)
            except BaseException:
                self._teardown(node)
                raise
        try:
            self.wait_ready(node, timeout=ready_timeout)
        except BaseException:
            self.down(node)
            raise
        return state

    def _start(self, node: str, *, image: Path, options: NodeOptions, address: str | None, key: Path) -> NodeState:
        """Record, wire, mount and boot one node (the caller holds the bed lock)."""
        node_dir = self.node_dir(node)
        state = NodeState(
            name=node,
            bed=self.name,
            address=self.allocate_address(address),
            netns=self.node_netns(node),
            root=str(node_dir / "root"),
            image=str(image),
            options=dataclasses.asdict(options),
        )
        self.save(state)
        self.ensure_controller()
        self._wire_node(state)
        self._mount_root(state, key)
        state.pid = self._boot(state, options)
        self.save(state)
        return state

    def _mount_root(self, state: NodeState, key: Path) -> None:
        node_dir = self.node_dir(state.name)
        upper, work, root = node_dir / "upper", node_dir / "work", Path(state.root)
        for path in (upper, work, root):
            path.mkdir(parents=True, exist_ok=True)
        system.run(
            [
                "mount",
                "-t",
                "overlay",
                "overlay",
                "-o",
                f"lowerdir={state.image},upperdir={upper},workdir={work}",
                str(root),
            ]
        )
        ssh_dir = root / "root" / ".ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        authorized = ssh_dir / "authorized_keys"
        authorized.write_text(key.with_suffix(".pub").read_text())
        authorized.chmod(0o600)
        (root / "etc" / "hostname").write_text(f"{state.name}\n")
        if state.options.get("kube"):
            _write_cgroup_unit(root)
        self._write_hosts()

    def _write_hosts(self) -> None:
        """Give every mounted node of the bed an /etc/hosts naming all of them (nodes have no DNS)."""
        states = [s for s in (self.load(n) for n in self.known_nodes()) if s is not None]
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        lines += [f"{CONTROLLER_ADDRESS}\tmco-testbed-controller"]
        lines += [f"{s.address}\t{s.name}" for s in sorted(states, key=lambda s: ipaddress.IPv4Address(s.address))]
        mounted = set(system.mount_points())
        for state in states:
            if Path(state.root) in mounted:
                (Path(state.root) / "etc" / "hosts").write_text("\n".join(lines) + "\n")

    def _boot(self, state: NodeState, options: NodeOptions) -> int:
        console = self.node_dir(state.name) / "console.log"
        argv = [
            "systemd-nspawn",
            f"--directory={state.root}",
            "--boot",
            "--register=no",
            "--keep-unit",
            f"--machine={state.name}",
            f"--network-namespace-path=/run/netns/{state.netns}",
            "--console=pipe",
            "--resolv-conf=off",
            "--link-journal=no",
            *options.nspawn_args(),
        ]
        if options.kube:
            store = self.node_dir(state.name) / "containerd"
            store.mkdir(exist_ok=True)
            argv.append(f"--bind={store}:{CONTAINERD_DIR}")
            argv = cgroups.enter_argv(cgroups.create(self.name, state.name), argv)
        return system.spawn_detached(argv, console)

    def wait_ready(self, node: str, *, timeout: float = DEFAULT_READY_TIMEOUT) -> str:
        """Poll over ssh until ``systemctl is-system-running`` says running or degraded."""
        state = self.load(node)
        if state is None or state.pid is None:
            raise TestbedError(f"node {node!r} has no boot record in bed {self.name!r}")
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if not system.pid_alive(state.pid):
                raise TestbedError(f"node {node!r} stopped while booting; console:\n{self.console_tail(node)}")
            argv = self.ssh_argv(node, ["systemctl", "is-system-running", "--wait"])
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
            except subprocess.TimeoutExpired:
                last = "ssh timed out"
                continue
            answer = done.stdout.strip()
            if answer in READY_STATES:
                return answer
            last = answer or done.stderr.strip() or f"ssh exit {done.returncode}"
            time.sleep(0.1)
        raise TestbedError(
            f"node {node!r} not ready within {timeout:.0f} s (last answer: {last}); console:\n{self.console_tail(node)}"
        )

    def console_tail(self, node: str, lines: int = 30) -> str:
        try:
            text = (self.node_dir(node) / "console.log").read_text(errors="replace")
        except OSError:
            return "(no console log)"
        return "\n".join(text.splitlines()[-lines:])

    def down(self, node: str) -> None:
        with self.locked():
            self._teardown(node)

    def down_all(self) -> list[str]:
        """Remove every node, the controller namespace and the bed's state dir; verify nothing is left."""
        with self.locked():
            nodes = self.known_nodes()
            for node in nodes:
                self._teardown(node)
            self._remove_netns(self.ctl_netns)
            self._stop_forwarders()
            system.unmount_tree(self.dir)
            for path in sorted(self.dir.iterdir()) if self.dir.is_dir() else []:
                if path.is_dir():
                    system.remove_tree(path)
                elif path.name != "lock":
                    path.unlink()
        with contextlib.suppress(OSError):
            (self.dir / "lock").unlink()
            self.dir.rmdir()
        left = {kind: items for kind, items in self.leftovers().items() if items}
        if left:
            raise TestbedError(f"bed {self.name}: still on this host after down-all: {json.dumps(left)}")
        return nodes

    def nspawn_pids(self, node: str | None = None) -> list[int]:
        """systemd-nspawn processes of this bed (or of one node), found by command line."""
        wanted = f"--network-namespace-path=/run/netns/{self.node_netns(node) if node else PREFIX + self.name + '-'}"
        found = []
        for pid, argv in system.processes():
            if argv and Path(argv[0]).name == "systemd-nspawn":
                match = any(a == wanted for a in argv) if node else any(a.startswith(wanted) for a in argv)
                if match:
                    found.append(pid)
        return found

    def _teardown(self, node: str) -> None:
        """Undo every step of ``up`` that may have happened; safe to repeat."""
        state = self.load(node)
        pids = set(self.nspawn_pids(node))
        if state is not None and state.pid and system.pid_alive(state.pid):
            pids.add(state.pid)
        for pid in pids:
            system.stop_process(pid)
        self._remove_netns(self.node_netns(node))
        busy = cgroups.remove(self.name, node)
        node_dir = self.node_dir(node)
        system.remove_tree(node_dir)
        if busy:
            raise TestbedError(f"node {node}: cgroups still busy after its processes stopped: {', '.join(busy)}")

    def _remove_netns(self, name: str) -> None:
        inode = system.netns_inode(name)
        if inode is None:
            return
        for pid in system.pids_in_netns(inode):
            if pid != os.getpid():
                system.stop_process(pid, grace=5)
        system.run(["ip", "netns", "delete", name])

    def serve(self, name: str, command: Sequence[str], *, wait_port: int | None, timeout: float = 30) -> int:
        """Start ``command`` detached inside the controller namespace; return its pid.

        Its output goes to ``<bed dir>/<name>.log``. With ``wait_port`` it returns once
        ``CONTROLLER_ADDRESS:wait_port`` accepts connections. ``down-all`` stops it (every
        process left in the controller namespace is stopped before the namespace goes).
        """
        check_node_name(name)
        system.preflight()
        with self.locked():
            self.ensure_controller()
        log_path = self.dir / f"{name}.log"
        pid = system.spawn_detached(["ip", "netns", "exec", self.ctl_netns, *command], log_path)
        (self.dir / f"{name}.pid").write_text(f"{pid}\n")
        if wait_port is None:
            return pid
        probe = [
            "ip",
            "netns",
            "exec",
            self.ctl_netns,
            "socat",
            "-u",
            "OPEN:/dev/null",
            f"TCP:{CONTROLLER_ADDRESS}:{wait_port}",
        ]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not system.pid_alive(pid):
                tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
                raise TestbedError(f"{name} exited before listening; {log_path}:\n{tail}")
            if subprocess.run(probe, capture_output=True, check=False).returncode == 0:
                return pid
            time.sleep(0.1)
        system.stop_process(pid)
        raise TestbedError(
            f"{name} did not listen on {CONTROLLER_ADDRESS}:{wait_port} within {timeout:.0f} s; see {log_path}"
        )

    def service_pid(self, name: str) -> int | None:
        """The pid of what ``serve(name, ...)`` started, while it runs; else None."""
        check_node_name(name)
        try:
            pid = int((self.dir / f"{name}.pid").read_text())
        except (OSError, ValueError):
            return None
        return pid if system.pid_alive(pid) else None

    def forward(self, port: int, *, timeout: float = 10) -> int:
        """Make ``CONTROLLER_ADDRESS:port`` reachable from the host; return the host port on 127.0.0.1.

        Two socat processes joined by a unix socket in the bed's state dir (a unix socket
        is reachable from every network namespace): one inside the controller namespace
        relays to the service, one on host loopback relays to the socket. ``down-all``
        stops both (found by the socket path in their command lines).
        """
        if not 0 < port < 65536:
            raise TestbedError(f"port {port} is not a TCP port (1-65535)")
        system.preflight()
        with self.locked():
            self.ensure_controller()
        sock = self.dir / f"forward-{port}.sock"
        system.spawn_detached(
            ["ip", "netns", "exec", self.ctl_netns, "socat", f"UNIX-LISTEN:{sock},fork,unlink-early",
             f"TCP:{CONTROLLER_ADDRESS}:{port}"],
            self.dir / f"forward-{port}-ctl.log",
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        for _attempt in range(3):  # the free port can be taken between probe and bind: try another
            host_port = system.free_loopback_port()
            pid = system.spawn_detached(
                ["socat", f"TCP-LISTEN:{host_port},bind=127.0.0.1,fork,reuseaddr", f"UNIX-CONNECT:{sock}"],
                self.dir / f"forward-{port}-host.log",
            )
            while time.monotonic() < deadline:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
                if not system.pid_alive(pid):
                    break
                if system.loopback_port_open(host_port):
                    return host_port
                time.sleep(0.02)
        self._stop_forwarders()
        raise TestbedError(f"could not forward {CONTROLLER_ADDRESS}:{port} to the host; see {self.dir}/forward-*.log")

    def _stop_forwarders(self) -> None:
        marker = f"{self.dir}/forward-"
        for pid, argv in system.processes():
            if pid != os.getpid() and any(marker in arg for arg in argv):
                system.stop_process(pid, grace=2)

    # --- reporting ---------------------------------------------------------------------
    def leftovers(self) -> dict[str, list[str]]:
        """What of this bed is still on the host: namespaces, mounts, nspawn processes, state dir."""
        prefix = f"{PREFIX}{self.name}-"
        nspawn = set(self.nspawn_pids())
        return {
            "netns": [ns for ns in system.netns_names() if ns.startswith(prefix)],
            "mounts": [str(p) for p in system.mounts_under(self.dir)],
            "processes": [
                f"{pid} {' '.join(argv)}"
                for pid, argv in system.processes()
                if pid in nspawn or any(f"{self.dir}/forward-" in arg for arg in argv)
            ],
            "state": [str(self.dir)] if self.dir.exists() else [],
            "cgroups": cgroups.leftovers(self.name),
        }

    def status(self) -> list[dict[str, Any]]:
        mounts = set(system.mount_points())
        rows = []
        for node in self.known_nodes():
            state = self.load(node)
            rows.append(
                {
                    "node": node,
                    "address": state.address if state else None,
                    "pid": state.pid if state else None,
                    "running": bool(state and state.pid and system.pid_alive(state.pid)),
                    "netns": system.netns_inode(self.node_netns(node)) is not None,
                    "mounted": Path(state.root) in mounts if state else False,
                }
            )
        return rows


def leftovers(root: Path | None = None) -> dict[str, list[str]]:
    """Everything of any bed still on this host: namespaces, mounts, nspawn processes, state."""
    root = root or state_root()
    netns = [ns for ns in system.netns_names() if ns.startswith(PREFIX)]
    mounts = [str(p) for p in system.mount_points() if p == root or root in p.parents]
    procs = []
    for pid, argv in system.processes():
        nspawn = Path(argv[0]).name == "systemd-nspawn" and any(
            a.startswith(f"--network-namespace-path=/run/netns/{PREFIX}") for a in argv
        )
        forwarder = any(a.startswith(("UNIX-LISTEN:", "UNIX-CONNECT:")) and f"{root}/" in a for a in argv)
        if nspawn or forwarder:
            procs.append(f"{pid} {' '.join(argv)}")
    return {"netns": netns, "mounts": mounts, "processes": procs, "cgroups": cgroups.leftovers()}


def _write_cgroup_unit(root: Path) -> None:
    """Install and enable, in a node's root, the unit that remounts its cgroup v1 hierarchies
    read-write (the mounts only: the groups are the node's own, see testbed/cgroups.py) and shows
    the node's own pressure as the machine's: its group's ``{cpu,memory,io}.pressure`` bound over
    ``/proc/pressure/*``, as a machine of its own sees its PSI (the host's counts every node and
    whatever else the host runs)."""
    unit = root / "etc" / "systemd" / "system" / CGROUP_UNIT
    unit.write_text(
        "[Unit]\n"
        "Description=Writable cgroup v1 hierarchies for the kubelet and runc, the node's own PSI (MCO test bed)\n"
        "DefaultDependencies=no\n"
        "Before=containerd.service kubelet.service\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        'ExecStart=/bin/sh -c \'awk "/ - cgroup / && !/name=/ {print \\$5}" /proc/self/mountinfo'
        ' | while read -r m; do mount -o remount,bind,rw "$m"; done\'\n'
        # $$: a literal $ for the shell (systemd expands $NAME itself)
        f"ExecStart=/bin/sh -c 'for r in {' '.join(NODE_PSI)}; do mountpoint -q /proc/pressure/$$r"
        f" || mount --bind {UNIFIED}/$$r.pressure /proc/pressure/$$r || exit 1; done'\n\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )
    wants = root / "etc" / "systemd" / "system" / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / CGROUP_UNIT
    if not link.is_symlink():
        link.symlink_to(f"/etc/systemd/system/{CGROUP_UNIT}")


def all_beds(root: Path | None = None) -> list[str]:
    """Beds with state on disk or a leftover namespace."""
    root = root or state_root()
    beds = {p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()
    for ns in system.netns_names():
        if ns.startswith(PREFIX):
            beds.add(ns[len(PREFIX) :].split("-", 1)[0])
    return sorted(b for b in beds if BED_PATTERN.fullmatch(b))
