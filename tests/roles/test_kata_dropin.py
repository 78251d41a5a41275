"""Kata's runtimes for containerd: the drop-in of config version 3 (containerd 2.x merges it) and the
block written into config.toml for version 2 (containerd 1.x would replace config.toml's whole CRI
section with a drop-in's). Both render valid TOML, and the node's own CRI settings survive."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.roles.helpers import BIN, load_module, run

PLUGIN = {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}
config = load_module("plugins/filter/containerd_config.py", "containerd_config")
MARKER = "# {mark} MCO kata_runtime (test)"
#: Debian 12's /etc/containerd/config.toml: a CRI section without runtimes.
DEBIAN = """version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
"""
#: An air-gapped node's: its own sandbox image and runc options.
NODE = """version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.local/pause:3.10"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
"""


def _render(tmp_path: Path, template: str, version: int, shims: list[str], **extra: Any) -> str:
    dest = tmp_path / f"{template}-v{version}.toml"
    variables = {
        "__kata_runtime_cfg_version": version,
        "__kata_runtime_host_shims": shims,
        "__kata_runtime_shim_binary": "/opt/kata/bin/containerd-shim-kata-v2",
        "__kata_runtime_config_dir": "/opt/kata/share/defaults/kata-containers",
        "__kata_runtime_cri_table": f'plugins."{PLUGIN[version]}".containerd',
        "kata_runtime_runc_options": {},
        **extra,
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
            f"src=roles/kata_runtime/templates/{template} dest={dest} mode=0644",
            "-e",
            json.dumps(variables),
            "-e",
            "ansible_python_interpreter={{ ansible_playbook_python }}",
        ]
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dest.read_text()


def _kata_qemu_is_complete(runtimes: dict[str, Any]) -> None:
    qemu = runtimes["kata-qemu"]
    assert qemu["runtime_type"] == "io.containerd.kata-qemu.v2"
    assert qemu["runtime_path"] == "/opt/kata/bin/containerd-shim-kata-v2"
    assert qemu["privileged_without_host_devices"] is True
    assert qemu["pod_annotations"] == ["io.katacontainers.*"]
    assert qemu["options"]["ConfigPath"] == "/opt/kata/share/defaults/kata-containers/configuration-qemu.toml"


def test_containerd_2_gets_a_drop_in_with_the_runtimes_and_runc_default(tmp_path: Path) -> None:
    text = _render(
        tmp_path, "kata.toml.j2", 3, ["qemu", "clh"], __kata_runtime_with_runc=True,
        kata_runtime_runc_options={"SystemdCgroup": True, "BinaryName": "/usr/bin/runc"},
    )  # fmt: skip
    assert text.startswith("#")  # ansible_managed comment first
    doc = tomllib.loads(text)
    assert doc["version"] == 3
    containerd = doc["plugins"][PLUGIN[3]]["containerd"]
    assert containerd["default_runtime_name"] == "runc"
    assert set(containerd["runtimes"]) == {"runc", "kata-qemu", "kata-clh"}
    assert containerd["runtimes"]["runc"]["options"] == {"SystemdCgroup": True, "BinaryName": "/usr/bin/runc"}
    _kata_qemu_is_complete(containerd["runtimes"])


@pytest.mark.parametrize(("base", "declared"), [(DEBIAN, []), (NODE, ["runc"])])
def test_containerd_1_gets_the_runtimes_in_config_toml_and_keeps_every_setting_of_its_own(
    tmp_path: Path, base: str, declared: list[str]
) -> None:
    assert config.cri_runtimes(base, 2, MARKER) == declared
    block = _render(
        tmp_path, "kata-runtimes.toml.j2", 2, ["qemu"], __kata_runtime_with_runc="runc" not in declared,
        kata_runtime_runc_options={"SystemdCgroup": False},
    )  # fmt: skip
    text = config.with_block(base, block, MARKER)
    assert text.startswith(base)  # the operator's bytes, untouched, then the block
    doc, before = tomllib.loads(text), tomllib.loads(base)
    cri = doc["plugins"][PLUGIN[2]]
    for key, value in before["plugins"][PLUGIN[2]].items():
        if key != "containerd":
            assert cri[key] == value
    runtimes = cri["containerd"]["runtimes"]
    assert set(runtimes) == {"runc", "kata-qemu"}
    expected_runc = before["plugins"][PLUGIN[2]]["containerd"]["runtimes"]["runc"] if declared else None
    assert runtimes["runc"] == (
        expected_runc or {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": False}}
    )
    _kata_qemu_is_complete(runtimes)
    # a second run finds only runc as the operator's and writes the same bytes
    assert config.cri_runtimes(text, 2, MARKER) == declared
    assert config.with_block(text, block, MARKER) == text
    # and the removal gives the operator's file back
    assert config.without_block(text, MARKER) == base


def test_an_empty_or_missing_config_gets_the_version_line() -> None:
    text = config.with_block("", '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n', MARKER)
    assert tomllib.loads(text)["version"] == 2
    assert text.startswith("version = 2\n# BEGIN MCO kata_runtime (test)\n")


@pytest.mark.parametrize(
    ("base", "message"),
    [
        ('[plugins.cri]\n  sandbox_image = "x"\n', "no 'version = 2' line"),
        ("version = 3\n", "says version = 3"),
        ("version = 2\n[plugins\n", "is not valid TOML"),
        (
            'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  runtimes = { runc = {} }\n',
            "with the Kata runtimes added is not valid TOML",
        ),
    ],
)
def test_a_config_the_block_cannot_join_is_refused_with_the_reason(base: str, message: str) -> None:
    block = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes."kata-qemu"]\n  runtime_type = "x"\n'
    with pytest.raises(config.ContainerdConfigError, match=message):
        config.with_block(base, block, MARKER)
