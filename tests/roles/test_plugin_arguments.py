"""mco-plugin's arguments come from the extender's settings (one inventory for both), typed as the plugin reads them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from .helpers import BIN, run

PLAYBOOK = """
- name: The arguments playbooks/volcano.yml hands to the volcano role
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Compute them
      ansible.builtin.include_role:
        name: manycore.mco.mco_scheduler_extender
        tasks_from: plugin_arguments
    - name: Show them
      ansible.builtin.debug:
        var: __mco_scheduler_extender_plugin_arguments
"""


def arguments(tmp_path: Path, extra: dict[str, Any]) -> dict[str, Any]:
    book = tmp_path / "arguments.yml"
    book.write_text(PLAYBOOK)
    argv = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(book)]
    argv += ["-e", f"ansible_python_interpreter={sys.executable}", "-e", json.dumps(extra)]
    proc = run(argv, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    tasks = json.loads(proc.stdout)["plays"][0]["tasks"]
    result: dict[str, Any] = tasks[-1]["hosts"]["localhost"]["__mco_scheduler_extender_plugin_arguments"]
    return result


def test_the_defaults_are_the_designs_arguments(tmp_path: Path) -> None:
    assert arguments(tmp_path, {}) == {
        "crName": "cluster",
        "crStatusTTLSeconds": 30,
        "fallbackWhenCROutdated": True,
        "hardConstraints": {"psiMemoryFullAvg10": 0.0, "psiIoSomeAvg10Threshold": 20.0},
        "kataRuntimeClassPrefixes": ["kata"],
        "scoreWeight": 1.0,
    }


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        # quoted numbers (as -e key=value gives them) become numbers: yaml.v2 would hand the plugin strings
        ({"mco_scheduler_extender_cr_status_ttl_seconds": "20"}, {"crStatusTTLSeconds": 20.0}),
        ({"mco_scheduler_extender_score_weight": "2.5"}, {"scoreWeight": 2.5}),
        # null switches a hard constraint off, as in extender.yaml
        (
            {"mco_scheduler_extender_psi_memory_full_avg10": None},
            {"hardConstraints": {"psiMemoryFullAvg10": None, "psiIoSomeAvg10Threshold": 20.0}},
        ),
        ({"mco_scheduler_extender_fallback_when_cr_outdated": "false"}, {"fallbackWhenCROutdated": False}),
        ({"mco_scheduler_extender_cr_name": "prod"}, {"crName": "prod"}),
    ],
)
def test_the_inventorys_extender_settings_reach_the_plugin(
    tmp_path: Path, extra: dict[str, Any], expected: dict[str, Any]
) -> None:
    got = arguments(tmp_path, extra)
    assert {k: got[k] for k in expected} == expected
