"""Bad role inputs are rejected before anything changes, with a message naming the variable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts.build_schedulers import write_image
from tests.roles.helpers import BIN, run

INVENTORY = """\
all:
  hosts:
    localhost:
      ansible_connection: local
      ansible_python_interpreter: "{{ ansible_playbook_python }}"
  children:
    mco_control: {hosts: {localhost: {}}}
    mco_nodes: {hosts: {localhost: {}}}
"""

CASES = [
    ("kata.yml", {"mco_kata_enabled": True, "kata_runtime_method": "bogus"}, "kata_runtime_method must be one of"),
    (
        "kata.yml",
        {"mco_kata_enabled": True, "kata_runtime_artifact_url": "http://127.0.0.1:9/kata-static-3.20.0-amd64.tar.xz"},
        "kata_runtime_artifact_sha256 as 64 hex digits (got '')",
    ),
    (
        "kata.yml",
        {
            "mco_kata_enabled": True,
            "kata_runtime_artifact_src": "/tmp/kata.tar.gz",
            "kata_runtime_artifact_sha256": "0" * 64,
        },
        "naming a .tar.xz or .tar.zst file",
    ),
    ("kata.yml", {"mco_kata_enabled": True, "kata_runtime_containerd_wait": "soon"}, "kata_runtime_containerd_wait"),
    ("kata.yml", {"mco_kata_enabled": True, "kata_runtime_method": "kata-deploy"}, "set kata_runtime_kubeconfig"),
    (
        "kata.yml",
        {
            "mco_kata_enabled": True,
            "kata_runtime_method": "kata-deploy",
            "mco_kubeconfig": "KUBECONFIG",
            "mco_kvm_label_node": False,
            "kata_runtime_shims": ["zzz"],
        },
        "each with an entry in kata_runtime_overhead",
    ),
    ("kvm.yml", {"kvm_check_required": "maybe"}, "kvm_check_required"),
    ("kvm.yml", {"kvm_check_label_node": True}, "kvm_check_label_node=True needs kvm_check_kubeconfig"),
    ("volcano.yml", {"volcano_version": "v1.8.0", "mco_kubeconfig": "/k"}, "volcano_version=v1.8.0 is not supported"),
    (
        "volcano.yml",
        {"mco_volcano_enabled": True, "mco_kubeconfig": "/nonexistent/kubeconfig"},
        "is not a file on the controller",
    ),
    (
        "kvm.yml",
        {"mco_kubeconfig": "/nonexistent/kubeconfig"},
        "kvm_check_kubeconfig=/nonexistent/kubeconfig is not a file",
    ),
    ("volcano.yml", {"volcano_extender_port": "http"}, "volcano_extender_port"),
    *[
        (
            "volcano.yml",
            {
                "mco_volcano_enabled": True,
                "mco_kubeconfig": "KUBECONFIG",
                "mco_scheduler_integration": "extender",
                "volcano_version": "v1.9.0",
                "mco_manage_scheduler_config": True,
                **secured,
            },
            message,
        )
        for secured, message in (
            (
                {
                    "mco_scheduler_extender_tls_server_config": {
                        "cert_file": "/c",
                        "key_file": "/k",
                        "client_auth_type": "RequireAndVerifyClientCert",
                        "client_ca_file": "/ca",
                    }
                },
                "asks for a client certificate",
            ),
            (
                {"mco_scheduler_extender_basic_auth_users": {"volcano": "$2y$10$" + "a" * 53}},
                "set volcano_extender_basic_auth_user to one of those users",
            ),
            (
                {
                    "mco_scheduler_extender_basic_auth_users": {"volcano": "$2y$10$" + "a" * 53},
                    "volcano_extender_basic_auth_user": "prometheus",
                    "volcano_extender_basic_auth_password": "pw",
                },
                'volcano_extender_basic_auth_user="prometheus" is not one of the extender\'s users',
            ),
            (
                {"mco_scheduler_extender_tls_pki": True, "volcano_extender_ca_file": "/nonexistent/ca.pem"},
                "/nonexistent/ca.pem is not a file on the controller",
            ),
        )
    ],
    ("volcano.yml", {"mco_volcano_enabled": True}, "set volcano_kubeconfig (mco_kubeconfig)"),
    (
        "volcano.yml",
        {"mco_volcano_enabled": True, "mco_kubeconfig": "KUBECONFIG", "volcano_version": "v1.10.0"},
        "the role knows no checksum for volcano_version=v1.10.0",
    ),
    (
        "volcano.yml",
        {"mco_scheduler_integration": "both"},
        "mco_scheduler_integration must be one of: auto, plugin, extender",
    ),
    (
        "volcano.yml",
        {
            "mco_volcano_enabled": True,
            "mco_kubeconfig": "KUBECONFIG",
            "volcano_version": "v1.9.0",
            "mco_scheduler_integration": "plugin",
        },
        "needs Volcano v1.14.x",
    ),
    (
        "volcano.yml",
        # installs v1.14.1: auto is plugin, and the scheduler's image is to be replaced
        {"mco_volcano_enabled": True, "mco_kubeconfig": "KUBECONFIG", "mco_manage_scheduler_config": True},
        "no registry serves it. Set volcano_plugin_image_archive",
    ),
    (
        "volcano.yml",
        {
            "mco_volcano_enabled": True,
            "mco_kubeconfig": "KUBECONFIG",
            "volcano_plugin_image_archive": "/nonexistent.tar",
        },
        "/nonexistent.tar cannot be read as an OCI image archive",
    ),
    (
        "volcano.yml",
        {
            "mco_volcano_enabled": True,
            "mco_kubeconfig": "KUBECONFIG",
            "volcano_plugin_image_archive": "ARCHIVE",
            "volcano_plugin_image": "registry.example/mco/vc-scheduler:v1",
        },
        "not volcano_plugin_image=registry.example/mco/vc-scheduler:v1 for linux/amd64",
    ),
    (
        "volcano.yml",
        {
            "mco_volcano_enabled": True,
            "mco_kubeconfig": "KUBECONFIG",
            "volcano_plugin_image_archive": "ARCHIVE",
            "volcano_plugin_image_group": "nowhere",
        },
        "group volcano_plugin_image_group=nowhere has no hosts",
    ),
    (
        "volcano.yml",
        {
            "mco_volcano_enabled": True,
            "mco_kubeconfig": "KUBECONFIG",
            "mco_scheduler_integration": "extender",
            "volcano_images": {"docker.io/volcanosh/vc-controller-manager:v1.14.0": "mine/vc-controller-manager"},
        },
        "give {image: NAME} (a copy in your registry) or",
    ),
]
CASES += [
    (
        "preflight.yml",
        {"mco_scheduler_extender_kube_scheduler_address": "mco-scheduler-extender.mco-system.svc"},
        "runs on the host network and cannot resolve them",
    ),
    (
        "preflight.yml",
        {"mco_scheduler_extender_kube_scheduler_address": "http://10.0.0.11:9879/kube"},
        "without scheme or path",
    ),
    ("preflight.yml", {"mco_scheduler_extender_kube_scheduler_ignorable": "yes"}, "must be true or false"),
]
#: playbooks/kube_scheduler.yml with the switch on in cluster mode (the role is skipped otherwise).
KUBE_SCHEDULER = {"mco_mode": "cluster", "mco_kube_scheduler_enabled": True, "mco_kubeconfig": "KUBECONFIG"}
REGISTRY_IMAGE = {"mco_kube_scheduler_image": "registry.example/mco/kube-scheduler:v1"}
CASES += [
    (
        "kube_scheduler.yml",
        {"mco_mode": "cluster", "mco_kube_scheduler_enabled": True},
        'mco_kube_scheduler_kubeconfig="" is empty',
    ),
    (
        "kube_scheduler.yml",
        {**KUBE_SCHEDULER, **REGISTRY_IMAGE, "mco_kube_scheduler_scheduler_name": "default-scheduler"},
        "two schedulers would race to place every pod",
    ),
    (
        "kube_scheduler.yml",
        {**KUBE_SCHEDULER, **REGISTRY_IMAGE, "mco_kube_scheduler_scheduler_name": "MCO_Scheduler"},
        "must be a DNS subdomain",
    ),
    (
        "kube_scheduler.yml",
        {**KUBE_SCHEDULER, **REGISTRY_IMAGE, "mco_kube_scheduler_plugin_weight": 0},
        "from 1 to 100",
    ),
    ("kube_scheduler.yml", {**KUBE_SCHEDULER, "mco_kube_scheduler_replicas": "two"}, "mco_kube_scheduler_replicas"),
    ("kube_scheduler.yml", KUBE_SCHEDULER, "no registry serves it. Set mco_kube_scheduler_image_archive"),
    (
        "kube_scheduler.yml",
        {**KUBE_SCHEDULER, "mco_kube_scheduler_image_archive": "ARCHIVE"},
        "not mco_kube_scheduler_image=mco.many-core.io/kube-scheduler:v1.34.1-mco0.1.0 for linux/amd64",
    ),
    (
        "kube_scheduler.yml",
        {**KUBE_SCHEDULER, "mco_kube_scheduler_image_archive": "ARCHIVE", "mco_kube_scheduler_image_group": "nowhere"},
        "group mco_kube_scheduler_image_group=nowhere has no hosts",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("playbook", "extra", "message"), CASES)
def test_bad_input_is_rejected_naming_the_variable(
    tmp_path: Path, playbook: str, extra: dict[str, object], message: str
) -> None:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(INVENTORY)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    binary = tmp_path / "vc-scheduler"
    binary.write_bytes(b"#!/bin/true\n")
    archive = tmp_path / "vc-scheduler.image.tar"
    write_image(binary, archive, "mco.many-core.io/vc-scheduler:v1.14.1-mco0.1.0")  # as build_schedulers.py does
    placeholders = {"KUBECONFIG": str(kubeconfig), "ARCHIVE": str(archive)}
    extra = {k: placeholders.get(v, v) if isinstance(v, str) else v for k, v in extra.items()}
    proc = run([str(BIN / "ansible-playbook"), "-i", str(inventory), f"playbooks/{playbook}", "-e", json.dumps(extra)])
    output = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, output[-2000:]
    assert message in output, output[-3000:]
    assert "changed=0" in output or "PLAY RECAP" not in output
