"""Booted nodes for real: up, reach, down, and cleanup after a killed run leaves nothing behind.

Needs root, systemd-nspawn, debootstrap and network namespaces; skipped (with the reason)
otherwise. Builds the node image on first use (~2 min, cached outside the clone).
Each test uses its own bed, so it never touches nodes of other runs on the same host.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed import cgroups, image, nodes, system

REPO = Path(__file__).resolve().parents[2]
CAN_BOOT = os.geteuid() == 0 and all(shutil.which(t) for t in ("systemd-nspawn", "debootstrap", "ip", "socat"))

pytestmark = [
    pytest.mark.booted,
    pytest.mark.slow,
    pytest.mark.skipif(not CAN_BOOT, reason="booted nodes need root, systemd-nspawn, debootstrap, ip and socat"),
    pytest.mark.timeout(600),  # the first run builds the image
]


@pytest.fixture(scope="module")
def node_image() -> Path:
    return image.ensure_image()


@pytest.fixture
def bed(request: pytest.FixtureRequest) -> Iterator[nodes.Bed]:
    bed = nodes.Bed(f"pt{os.getpid() % 100000}{len(request.node.name) % 10}{int(time.time()) % 1000}")
    yield bed
    bed.down_all()
    assert bed.leftovers() == CLEAN


def run_cli(bed: nodes.Bed, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "testbed", "--bed", bed.name, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=check,
    )


CLEAN = {"netns": [], "mounts": [], "processes": [], "state": [], "cgroups": []}


def assert_clean(bed: nodes.Bed) -> None:
    left = bed.leftovers()
    assert left == CLEAN, left


def test_node_boots_answers_over_ssh_and_leaves_nothing_behind(node_image: Path, bed: nodes.Bed) -> None:
    up = run_cli(bed, "up", "node-a", "node-b")
    assert "node-a: up at 10.213.0.10" in up.stdout
    assert "node-b: up at 10.213.0.11" in up.stdout
    hosts_on_a = run_cli(bed, "ssh", "node-a", "--", "getent", "hosts", "node-b").stdout
    assert hosts_on_a.split() == ["10.213.0.11", "node-b"]
    assert run_cli(bed, "up", "node-a").stdout.startswith("node-a: already up")

    state = run_cli(bed, "ssh", "node-a", "--", "systemctl", "is-system-running").stdout.strip()
    assert state in ("running", "degraded")
    assert run_cli(bed, "ssh", "node-a", "--", "hostname").stdout.strip() == "node-a"
    assert run_cli(bed, "ssh", "node-a", "--", "systemctl", "is-active", "containerd").stdout.strip() == "active"
    # node-b reaches node-a over the bridge, by name (every node's /etc/hosts lists the bed's nodes)
    reach = run_cli(bed, "ssh", "node-b", "--", "ping", "-c1", "-W2", "node-a", check=False)
    assert reach.returncode == 0, reach.stdout + reach.stderr
    # nodes never write into the shared image
    run_cli(bed, "ssh", "node-a", "--", "touch", "/etc/mco-written-in-node")
    assert not (node_image / "etc" / "mco-written-in-node").exists()

    run_cli(bed, "down", "node-a")
    assert not bed.is_running("node-a")
    assert bed.known_nodes() == ["node-b"]
    run_cli(bed, "down-all")
    assert_clean(bed)


def test_service_in_the_controller_namespace_is_reachable_from_nodes(node_image: Path, bed: nodes.Bed) -> None:
    (bed.dir).mkdir(parents=True, exist_ok=True)
    serve = run_cli(
        bed, "serve-ctl", "--name", "web", "--wait-port", "8080", "--",
        sys.executable, "-m", "http.server", "--bind", "10.213.0.1", "--directory", str(REPO / "testbed"), "8080",
    )  # fmt: skip
    pid = int(serve.stdout.split("(pid ")[1].split(",")[0])
    run_cli(bed, "up", "node-a")
    page = run_cli(bed, "ssh", "node-a", "--", "curl", "-sf", "http://10.213.0.1:8080/packages.txt").stdout
    assert page == (REPO / "testbed" / "packages.txt").read_text()
    # ...and from the host, through the loopback forwarder
    forward = run_cli(bed, "forward-ctl", "8080").stdout
    host_port = int(forward.split()[0].rsplit(":", 1)[1])
    with urllib.request.urlopen(f"http://127.0.0.1:{host_port}/packages.txt", timeout=10) as response:
        assert response.read().decode() == page
    run_cli(bed, "down-all")
    assert not system.pid_alive(pid)
    assert_clean(bed)


def test_capabilities_and_kvm_reach_the_node(node_image: Path, bed: nodes.Bed) -> None:
    args = ["up", "node-a", "--caps", "CAP_BPF,CAP_PERFMON,CAP_SYS_ADMIN"]
    if Path("/dev/kvm").exists():
        args.append("--kvm")
    run_cli(bed, *args)
    status = run_cli(bed, "ssh", "node-a", "--", "grep", "CapEff", "/proc/1/status").stdout
    cap_eff = int(status.split()[1], 16)
    assert cap_eff & (1 << 39), f"CAP_BPF missing from {status}"  # CAP_BPF = 39
    assert cap_eff & (1 << 38), f"CAP_PERFMON missing from {status}"  # CAP_PERFMON = 38
    if Path("/dev/kvm").exists():
        assert run_cli(bed, "ssh", "node-a", "--", "test", "-c", "/dev/kvm", check=False).returncode == 0


def test_kube_node_has_its_own_cgroups_writable_inside_and_removed_with_it(node_image: Path, bed: nodes.Bed) -> None:
    """--kube: the node's groups are the host's mco-testbed/<bed>/<node>, seen as / and writable inside;
    its /proc/pressure is its own v2 group's."""
    run_cli(bed, "up", "node-a", "--kube")
    groups = cgroups.node_groups(bed.name, "node-a", cgroups.controller_trees())
    assert groups
    assert all(g.is_dir() for g in groups), groups
    script = "mkdir /sys/fs/cgroup/cpu/probe && cat /proc/self/cgroup | grep ':cpu:' && rmdir /sys/fs/cgroup/cpu/probe"
    seen = run_cli(bed, "ssh", "node-a", "--", script).stdout  # ssh hands the remote shell one command line
    assert "1:cpu:/" in seen, seen  # the node's own group is its root
    unified = [g for g in groups if (g / "cgroup.subtree_control").exists()]
    assert len(unified) == 1, groups
    assert (unified[0] / "payload").is_dir(), groups  # the node's v2 group, nspawn's payload in it
    for resource in ("cpu", "memory", "io"):  # its PSI is its own group's
        mount = run_cli(bed, "ssh", "node-a", "--", f"grep ' /proc/pressure/{resource} ' /proc/self/mountinfo").stdout
        assert f" /{resource}.pressure /proc/pressure/{resource} " in mount, mount
        assert " - cgroup2 " in mount, mount
    cap_eff = int(run_cli(bed, "ssh", "node-a", "--", "grep", "CapEff", "/proc/1/status").stdout.split()[1], 16)
    assert cap_eff & (1 << 21), hex(cap_eff)  # CAP_SYS_ADMIN
    assert cap_eff & (1 << 12), hex(cap_eff)  # CAP_NET_ADMIN
    run_cli(bed, "down", "node-a")
    assert not any(g.exists() for g in groups), groups
    assert cgroups.leftovers(bed.name) == []


def kill_up_midway(bed: nodes.Bed, node: str) -> None:
    """Start `up NODE` and kill -9 it once systemd-nspawn runs (netns, overlay, container exist; not ready yet)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "testbed", "--bed", bed.name, "up", node],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not bed.nspawn_pids(node) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.01)
    process.kill()
    process.wait()
    left = bed.leftovers()
    assert left["processes"], "expected a running nspawn process after killing the CLI mid-up"
    assert left["netns"]
    assert left["mounts"]


def test_killing_up_midway_then_down_all_leaves_nothing_and_the_next_run_works(
    node_image: Path, bed: nodes.Bed
) -> None:
    kill_up_midway(bed, "node-a")
    run_cli(bed, "down-all")
    assert_clean(bed)

    # Running `up` again straight after a killed run works too.
    kill_up_midway(bed, "node-a")
    run_cli(bed, "up", "node-a")
    assert run_cli(bed, "ssh", "node-a", "--", "hostname").stdout.strip() == "node-a"
    run_cli(bed, "down-all")
    assert_clean(bed)

    # The state file is gone too: cleanup by name alone must also work.
    run_cli(bed, "up", "node-a")
    (bed.node_dir("node-a") / "state.json").unlink()
    run_cli(bed, "down-all")
    assert_clean(bed)

    # And the next run works as if nothing had happened.
    assert "node-a: up at 10.213.0.10" in run_cli(bed, "up", "node-a").stdout
    run_cli(bed, "down-all")
    assert_clean(bed)
