"""A certificate rotation restarts no service (docs/runbooks.md): the HTTP ports read their certificate
and key again when they change (mco_py/obs/http_security.py TLSServer.refresh), so the tasks that install
them notify no restart."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.roles.helpers import REPO


def _certificate_copies(role: str) -> list[dict[str, Any]]:
    tasks = yaml.safe_load((REPO / "roles" / role / "tasks/configure.yml").read_text())
    copies = [
        task for task in tasks if "mco_pki_files[item.key]" in str(task.get("ansible.builtin.copy", {}).get("src"))
    ]
    assert copies, f"{role} installs the certificates mco_pki issues"
    return copies


@pytest.mark.parametrize("role", ["mco_collector", "mco_analyzer", "mco_scheduler_extender"])
def test_installing_a_reissued_http_certificate_restarts_nothing(role: str) -> None:
    for task in _certificate_copies(role):
        assert "notify" not in task, f"{role}: {task['name']!r} notifies {task['notify']!r}"


def test_the_extender_restarts_only_when_its_client_ca_is_mco_pkis_ca() -> None:
    """clientCaFile is read at start only: a CA change restarts the extender only when it is that file."""
    tasks = yaml.safe_load((REPO / "roles/mco_scheduler_extender/tasks/configure.yml").read_text())
    restarting = [task for task in tasks if "pki" in task["name"].lower() or "CA" in task["name"]]
    notifying = [task for task in restarting if "notify" in task]
    assert [task["name"] for task in notifying] == [
        "Restart the extender when the CA it verifies client certificates with changed (read at start only)"
    ]
    assert "client_ca_file" in notifying[0]["when"]
