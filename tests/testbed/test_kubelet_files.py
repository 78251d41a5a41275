"""What tests/cluster/kubelet.py writes into a Kubernetes test node (no node needed)."""

from __future__ import annotations

import tomllib

from tests.cluster import kubelet


def test_the_kubelet_refuses_rather_than_writes_kernel_settings_and_sees_the_wanted_values_in_its_own_mounts() -> None:
    config = kubelet.kubelet_config("10.213.0.12")
    assert config["protectKernelDefaults"] is True
    assert config["failCgroupV1"] is False
    unit = kubelet.kubelet_unit("10.213.0.12")
    binds = next(line for line in unit.splitlines() if line.startswith("BindReadOnlyPaths="))
    targets = {pair.split(":", 1)[1] for pair in binds.split("=", 1)[1].split()}
    assert targets == {f"/proc/sys/{name}" for name in kubelet.KERNEL_WANTED}
    assert "--node-ip=10.213.0.12" in unit


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
