"""mco_common picks the wheelhouse a host needs: its architecture's (or says it has none), its parts' set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.roles.helpers import BIN, REPO, run

ROLE = REPO / "roles" / "mco_common"


def playbook(tmp_path: Path, groups: list[str], tasks: list[dict[str, object]]) -> tuple[Path, Path]:
    """A play on localhost (in ``groups``) with mco_common's defaults and internal vars, running ``tasks``."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        "localhost": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                        }
                    },
                    "children": {group: {"hosts": {"localhost": {}}} for group in groups},
                }
            }
        )
    )
    play = tmp_path / "play.yml"
    play.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Probe mco_common",
                    "hosts": "all",
                    "gather_facts": False,
                    "vars_files": [str(ROLE / "defaults" / "main.yml"), str(ROLE / "vars" / "main.yml")],
                    "tasks": tasks,
                }
            ]
        )
    )
    return inventory, play


def preflight(tmp_path: Path, architecture: str) -> str:
    include = {
        "name": "Preflight",
        "ansible.builtin.include_tasks": str(ROLE / "tasks" / "preflight.yml"),
        "vars": {"ansible_facts": {"architecture": architecture}},
    }
    inventory, play = playbook(tmp_path, ["mco_nodes"], [include])
    proc = run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(play)])
    return proc.stdout + proc.stderr


def test_a_host_of_another_architecture_is_named_with_the_supported_ones(tmp_path: Path) -> None:
    out = preflight(tmp_path, "ppc64le")
    assert (
        "localhost is ppc64le: MCO's wheelhouse holds wheels for x86_64 and aarch64 only (CPython 3.11, manylinux)"
        in out
    )
    assert "take localhost out of mco_nodes and mco_control" in out


@pytest.mark.parametrize("architecture", ["x86_64", "aarch64"])
def test_a_supported_architecture_passes_the_check(tmp_path: Path, architecture: str) -> None:
    out = preflight(tmp_path, architecture)
    task = out.split("TASK [Assert the host's architecture has MCO's wheels]", 1)[1].split("TASK [", 1)[0]
    assert "ok: [localhost]" in task


@pytest.mark.parametrize(
    ("groups", "switches", "wanted"),
    [
        (["mco_nodes"], {}, "node"),
        (["mco_nodes", "mco_control"], {}, "control"),
        (["mco_control"], {"mco_analyzer_enabled": False}, "control"),  # the extender still runs there
        (["mco_nodes", "mco_control"], {"mco_analyzer_enabled": False, "mco_scheduler_plugin_enabled": False}, "node"),
    ],
)
def test_the_package_set_follows_the_parts_on_the_host(
    tmp_path: Path, groups: list[str], switches: dict[str, bool], wanted: str
) -> None:
    show = {"name": "Show the set", "ansible.builtin.debug": {"msg": "SET={{ mco_common_package_set }}"}}
    inventory, play = playbook(tmp_path, groups, [show])
    args = ["-e", json.dumps(switches)] if switches else []
    proc = run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(play), *args])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f'"msg": "SET={wanted}"' in proc.stdout or f"msg: SET={wanted}" in proc.stdout
