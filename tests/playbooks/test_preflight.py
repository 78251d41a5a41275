"""The fact-free inventory check rejects bad inventories with a message naming the variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def preflight(extra: dict[str, Any], inventory: str = "inventory/local.yml") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            inventory,
            "playbooks/preflight.yml",
            "-e",
            json.dumps(extra),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_local_inventory_passes() -> None:
    out = preflight({})
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"mco_kata_enabled": "true"}, "mco_kata_enabled must be true or false"),
        ({"mco_mode": "hybrid"}, "mco_mode must be one of: standalone, cluster, got: hybrid"),
        ({"mco_volcano_enabled": True}, "Volcano, Kata, the scheduler ConfigMap and MCO's kube-scheduler need"),
        ({"mco_kube_scheduler_enabled": True}, "mco_kube_scheduler_enabled=True"),
        ({"mco_kube_scheduler_enabled": "yes"}, "mco_kube_scheduler_enabled must be true or false"),
        ({"mco_mode": "cluster"}, 'mco_kubeconfig=""'),
        ({"mco_analyzer_addr": "x:1"}, "mco_analyzer_addr is no longer used: use mco_collector_analyzer_addrs"),
        (
            {"mco_mode": "cluster", "mco_kubeconfig": "/k", "mco_kata_enabled": True},
            "kata_runtime_artifact_src is empty",
        ),
    ],
)
def test_bad_inventory_is_rejected(extra: dict[str, Any], message: str) -> None:
    out = preflight(extra)
    assert out.returncode != 0
    assert message in out.stdout, out.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        # the example names its hosts by IP; a DNS name cannot go into Endpoints
        ({"ansible_host": "ctl-1.example.com"}, "Endpoints need IP addresses, but these are not: ctl-1.example.com"),
        ({"mco_kubeconfig": "/nonexistent/kubeconfig"}, "mco_kubeconfig=/nonexistent/kubeconfig is not a file"),
    ],
)
def test_example_inventory_with_a_mistake_is_rejected(extra: dict[str, Any], message: str) -> None:
    out = preflight(extra, inventory="inventory/example")
    assert out.returncode != 0
    assert message in " ".join(out.stdout.split()), out.stdout
