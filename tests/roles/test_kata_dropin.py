"""The containerd drop-in template renders valid TOML for config version 2 (containerd 1.x) and 3 (2.x)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.roles.helpers import BIN, run

PLUGIN = {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}


def _render(tmp_path: Path, version: int, shims: list[str], runc_options: dict[str, object]) -> dict[str, Any]:
    dest = tmp_path / f"kata-v{version}.toml"
    extra = {
        "__kata_runtime_cfg_version": version,
        "__kata_runtime_host_shims": shims,
        "__kata_runtime_shim_binary": "/opt/kata/bin/containerd-shim-kata-v2",
        "__kata_runtime_config_dir": "/opt/kata/share/defaults/kata-containers",
        "kata_runtime_runc_options": runc_options,
    }
    proc = run(
        [
            str(BIN / "ansible"),
            "localhost",
            "-c",
            "local",
            "-m",
            "ansible.builtin.template",
            "-a",
            f"src=roles/kata_runtime/templates/kata.toml.j2 dest={dest} mode=0644",
            "-e",
            json.dumps(extra),
            "-e",
            "ansible_python_interpreter={{ ansible_playbook_python }}",
        ]
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = dest.read_text()
    assert text.startswith("#")  # ansible_managed comment first
    return tomllib.loads(text)


@pytest.mark.parametrize("version", [2, 3])
def test_runtimes_under_the_cri_plugin_with_runc_default(tmp_path: Path, version: int) -> None:
    doc = _render(tmp_path, version, ["qemu", "clh"], {"SystemdCgroup": True, "BinaryName": "/usr/bin/runc"})
    assert doc["version"] == version
    containerd = doc["plugins"][PLUGIN[version]]["containerd"]
    assert containerd["default_runtime_name"] == "runc"
    runtimes = containerd["runtimes"]
    assert set(runtimes) == {"runc", "kata-qemu", "kata-clh"}
    assert runtimes["runc"]["runtime_type"] == "io.containerd.runc.v2"
    assert runtimes["runc"]["options"] == {"SystemdCgroup": True, "BinaryName": "/usr/bin/runc"}
    qemu = runtimes["kata-qemu"]
    assert qemu["runtime_type"] == "io.containerd.kata-qemu.v2"
    assert qemu["runtime_path"] == "/opt/kata/bin/containerd-shim-kata-v2"
    assert qemu["privileged_without_host_devices"] is True
    assert qemu["pod_annotations"] == ["io.katacontainers.*"]
    assert qemu["options"]["ConfigPath"] == "/opt/kata/share/defaults/kata-containers/configuration-qemu.toml"


def test_only_the_shims_of_the_host(tmp_path: Path) -> None:
    doc = _render(tmp_path, 2, ["qemu"], {})
    runtimes = doc["plugins"][PLUGIN[2]]["containerd"]["runtimes"]
    assert set(runtimes) == {"runc", "kata-qemu"}
    assert runtimes["runc"]["options"] == {}
