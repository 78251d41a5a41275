"""Uninstall leaves nothing of the node guard: the limits its journal records are written back
before the journal and /var/lib/mco-collector go, and a journal nothing can write back stops the
uninstall instead of being deleted with the limits left in place.

The role's uninstall tasks run for real on this host, every path pointed into a temporary root
(the cgroup tree a fixture, the users ones that do not exist) by the role's own variables.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.collector.test_guard import v2_tree

from .helpers import BIN, run


def _host(tmp_path: Path) -> dict[str, Any]:
    """An installed host under tmp_path: venv with the mco command, collector.yaml, state dirs, and a
    guard that was killed after throttling group offline (its journal has the limit it replaced)."""
    cgroups = v2_tree(tmp_path / "cgroup", ["offline"])
    install, config, state, logs, collector_state = (
        tmp_path / "opt/mco", tmp_path / "etc/mco", tmp_path / "var/lib/mco", tmp_path / "var/log/mco",
        tmp_path / "var/lib/mco-collector",
    )  # fmt: skip
    for directory in (install / "venv/bin", config, state, logs, collector_state):
        directory.mkdir(parents=True)
    (install / "venv/bin/mco").symlink_to(BIN / "mco")
    journal = collector_state / "guard-limits.json"
    (config / "collector.yaml").write_text(
        f"stream: {{enabled: false}}\ncgroupRoot: {cgroups}\nguard: {{journal: {journal}}}\n"
    )
    (cgroups / "offline/cpu.max").write_text("10000 100000")
    journal.write_text(json.dumps({"limits": {"offline/cpu.max": "max 100000"}}))
    return {
        "mco_common_install_dir": str(install),
        "mco_common_venv": str(install / "venv"),
        "mco_common_config_dir": str(config),
        "mco_common_state_dir": str(state),
        "mco_common_log_dir": str(logs),
        "mco_common_cli_link": "",
        "mco_common_user": "mco-uninstall-test-absent",
        "mco_collector_user": "mco-uninstall-test-absent-2",
        "__mco_common_collector_state_dir": str(collector_state),
        "cgroups": cgroups,
    }


def _uninstall(tmp_path: Path, host: dict[str, Any]) -> tuple[int, str]:
    variables = {k: v for k, v in host.items() if k != "cgroups"}
    playbook = tmp_path / "uninstall.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Uninstall",
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": False,
                    "vars": {"ansible_python_interpreter": sys.executable},
                    "tasks": [
                        {
                            "name": "Remove MCO from this host",
                            "ansible.builtin.include_role": {
                                "name": "manycore.mco.mco_common",
                                "tasks_from": "uninstall",
                            },
                            "vars": variables,
                        }
                    ],
                }
            ]
        )
    )
    proc = run([str(BIN / "ansible-playbook"), "-i", "localhost,", str(playbook)])
    return proc.returncode, proc.stdout + proc.stderr


def test_uninstall_writes_the_guards_limits_back_then_removes_its_state(tmp_path: Path) -> None:
    host = _host(tmp_path)
    code, out = _uninstall(tmp_path, host)
    assert code == 0, out
    assert (host["cgroups"] / "offline/cpu.max").read_text() == "max 100000", "the limit the guard replaced"
    for name in ("mco_common_install_dir", "mco_common_config_dir", "mco_common_state_dir", "mco_common_log_dir",
                 "__mco_common_collector_state_dir"):  # fmt: skip
        assert not Path(host[name]).exists(), name
    code, out = _uninstall(tmp_path, host)
    assert code == 0, out
    assert "changed=0" in out, "a second uninstall finds nothing to do"


def test_a_journal_nothing_can_write_back_stops_the_uninstall_and_is_kept(tmp_path: Path) -> None:
    """An earlier uninstall that stopped half-way took the venv: deleting the journal now would leave
    the offline group throttled for good."""
    host = _host(tmp_path)
    (Path(host["mco_common_venv"]) / "bin/mco").unlink()
    code, out = _uninstall(tmp_path, host)
    assert code != 0
    text = " ".join(out.split())
    journal = Path(host["__mco_common_collector_state_dir"]) / "guard-limits.json"
    assert f"{journal} records CPU and I/O limits a node guard replaced" in text, out
    assert f"what writes them back is gone ({host['mco_common_venv']}/bin/mco)" in text, out
    assert "Run playbooks/mco.yml on this host again" in text
    assert journal.exists(), "the journal is kept"
    assert (host["cgroups"] / "offline/cpu.max").read_text() == "10000 100000"
