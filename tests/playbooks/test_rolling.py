"""Rolling upgrades: playbooks/mco.yml goes through the control hosts mco_upgrade_serial at a time
(default 1), so one analyzer (its Lease handed over) and one extender restart at a time.

The plays run for real against three local control hosts; ``--tags`` picks none of the install
steps, so only the checks tagged ``always`` run, batch by batch as the play's serial makes them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONTROL_PLAY = "Install the analyzer and the scheduler extender"
WAIT = "Wait until this host's analyzer and extender listen again"


def _inventory(tmp_path: Path, **control_vars: object) -> Path:
    inventory = {
        "all": {
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "ansible_become": False,
            },
            "children": {
                "mco_control": {"hosts": {"c1": {}, "c2": {}, "c3": {}}, "vars": control_vars},
                "mco_nodes": {"hosts": {}},
            },
        }
    }
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory))
    return path


def _run(inventory: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), "playbooks/mco.yml",
         "--tags", "no_install_step", *extra],
        cwd=ROOT,
        env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
             "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return proc, json.loads(proc.stdout)


def _batches(document: dict[str, Any]) -> list[list[str]]:
    """The hosts of each run of the control play (one run per batch), from its facts gathering."""
    return [
        sorted(play["tasks"][0]["hosts"]) for play in document["plays"] if play["play"]["name"].startswith(CONTROL_PLAY)
    ]


def test_mco_upgrade_serial_sets_the_batch(tmp_path: Path) -> None:
    proc, document = _run(_inventory(tmp_path), "-e", "mco_upgrade_serial=2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert _batches(document) == [["c1", "c2"], ["c3"]]
    proc, document = _run(_inventory(tmp_path), "-e", "mco_upgrade_serial=100%")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert _batches(document) == [["c1", "c2", "c3"]]


def _failure(document: dict[str, Any]) -> str:
    results = [result for play in document["plays"] for task in play["tasks"] for result in task["hosts"].values()]
    items = [item for result in results for item in result.get("results", []) if isinstance(item, dict)]
    messages = [str(result.get("msg", "")) for result in results + items if result.get("failed")]
    return " ".join(" ".join(messages).split())


def test_an_inventory_serial_that_ansible_would_not_use_stops_the_play(tmp_path: Path) -> None:
    """Ansible reads a play's serial before the inventory: a group_vars value would be ignored silently."""
    proc, document = _run(_inventory(tmp_path, mco_upgrade_serial=3))
    assert proc.returncode != 0
    message = _failure(document)
    assert "mco_upgrade_serial=3, but this play restarts 1 control host(s) at a time" in message, message
    assert "-e mco_upgrade_serial=N" in message
    assert _batches(document) == [["c1"]], "nothing went past the first batch's checks"
    proc, document = _run(_inventory(tmp_path), "-e", "mco_upgrade_serial=0")
    assert proc.returncode != 0
    assert 'mco_upgrade_serial="0" is not a number of control hosts' in _failure(document)


def _listener() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def _waits(document: dict[str, Any]) -> list[list[str]]:
    """The hosts each run of the control play waited for (its post task)."""
    return [
        sorted(host for task in play["tasks"] if task["task"]["name"].startswith(WAIT) for host in task["hosts"])
        for play in document["plays"]
        if play["play"]["name"].startswith(CONTROL_PLAY)
    ]


def test_one_host_at_a_time_by_default_each_batch_waiting_for_its_analyzer_and_extender(tmp_path: Path) -> None:
    """The control hosts restart one at a time by default. The programs this run set up (and whose
    handlers may have restarted them) must listen again before the next batch starts; one that does
    not stops the upgrade with the next hosts untouched."""
    analyzer, extender = _listener(), _listener()
    try:
        ports = {
            "__mco_common_programs_here": ["mco-analyzer", "mco-extender"],
            "mco_analyzer_listen_host": "127.0.0.1",
            "mco_analyzer_grpc_port": analyzer.getsockname()[1],
            "mco_scheduler_extender_port": extender.getsockname()[1],
            "mco_upgrade_wait_timeout": 2,
        }
        proc, document = _run(_inventory(tmp_path), "-e", json.dumps(ports))
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
        assert _batches(document) == [["c1"], ["c2"], ["c3"]], "one control host at a time by default"
        assert _waits(document) == [["c1"], ["c2"], ["c3"]]
        analyzer.close()  # c1's analyzer does not come back
        proc, document = _run(_inventory(tmp_path), "-e", json.dumps(ports))
        assert proc.returncode != 0
        assert _batches(document) == [["c1"]], "c2 and c3 keep their running analyzers"
        assert "Timeout when waiting for 127.0.0.1:" in _failure(document)
    finally:
        analyzer.close()
        extender.close()
