"""What tests/cluster/kubelet.py writes into a Kubernetes test node (no node needed)."""

from __future__ import annotations

import shlex
import subprocess
import tomllib
from pathlib import Path

from tests.cluster import kubelet


def test_the_kubelet_refuses_rather_than_writes_kernel_settings_and_shares_the_nodes_mounts() -> None:
    config = kubelet.kubelet_config("10.213.0.12")
    assert config["protectKernelDefaults"] is True
    assert config["failCgroupV1"] is False
    unit = kubelet.kubelet_unit("10.213.0.12")
    assert "--node-ip=10.213.0.12" in unit
    assert f"Requires=containerd.service mco-testbed-cgroups.service {kubelet.KERNEL_VIEW_UNIT}" in unit
    # no mount namespace of its own: pods' token and secret volumes must be containerd's to see
    for option in ("BindReadOnlyPaths", "BindPaths", "PrivateTmp", "PrivateMounts", "ProtectSystem", "ReadOnlyPaths"):
        assert option not in unit


def test_the_kernel_view_binds_each_wanted_value_over_its_proc_sys_file(tmp_path: Path) -> None:
    """The unit's command, run with mount and mountpoint stand-ins: one read-only bind per setting."""
    seen = tmp_path / "seen"
    seen.mkdir()
    for name, value in kubelet.KERNEL_WANTED.items():  # as prepare() writes them
        (seen / name.replace("/", ".")).write_text(f"{value}\n")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "mount").write_text('#!/bin/sh\necho "$@"\n')
    (stubs / "mountpoint").write_text("#!/bin/sh\nexit 1\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    line = next(x for x in kubelet.kernel_view_unit().splitlines() if x.startswith("ExecStart="))
    argv = shlex.split(line.removeprefix("ExecStart=").replace("$$", "$").replace(kubelet.SEEN_BY_KUBELET, str(seen)))
    done = subprocess.run(argv, capture_output=True, text=True, check=True, env={"PATH": f"{stubs}:/usr/bin:/bin"})
    binds = sorted(done.stdout.splitlines())
    assert binds == sorted(
        f"--bind -o ro {seen / name.replace('/', '.')} /proc/sys/{name}" for name in kubelet.KERNEL_WANTED
    )


def test_each_node_gets_its_own_pod_network_from_its_address() -> None:
    assert kubelet.pod_network("10.213.0.10") == "10.244.10.0/24"
    cni = kubelet.cni_config("10.213.0.11")
    bridge = cni["plugins"][0]  # type: ignore[index]
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.11.0/24"}]]
    assert bridge["ipMasq"] is False  # routed: pods keep their addresses


def test_containerd_runs_the_sandbox_image_it_was_given_and_keeps_oom_scores_it_can_set() -> None:
    config = tomllib.loads(kubelet.containerd_config("mco.many-core.io/test/pause:3.10.1"))
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "mco.many-core.io/test/pause:3.10.1"
    assert cri["restrict_oom_score_adj"] is True
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    assert kubelet.kubelet_config("10.213.0.10")["cgroupDriver"] == "cgroupfs"
